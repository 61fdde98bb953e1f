"""Marquez's own OpenAPI document, with tests/marquez_openapi.py's corrections, checked by
schemathesis against Marquez 0.50.0 itself and against Embrasure's Marquez port over the
same events (tests/marquez_web_platform.py's), side by side (issue 51).

Every GET operation of the document gets the same generated requests on both servers
(hypothesis derandomized: the same cases in the same order), valid ones
(``--examples`` each) and invalid ones; each answer is checked for a 5xx, a status the
document does not list, a body its schema refuses and a content type it does not name.
A failure on both servers is the document's (a correction to make, or one made that is
not enough); on the port alone, the port's; on Marquez alone, Marquez's. The document
is run twice: as read (with only the two corrections without which it cannot be read)
and corrected, which shows what the corrections are for.

Results: bench/results/peers-marquez-spec.{md,json}. Run:
``.venv/bin/python bench/peers/marquez_spec.py --marquez-source PATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
TESTS_DIR = BENCH_DIR.parent / "tests"
for folder in (BENCH_DIR, TESTS_DIR):  # run as a script: the shared harness, the document
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import httpx  # noqa: E402
import schemathesis  # noqa: E402
import servers  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

from peers import marquez_server, marquez_web  # noqa: E402

import marquez_openapi  # noqa: E402  (tests/marquez_openapi.py)

RESULTS = BENCH_DIR / "results"
CHECKS: dict[str, Callable[..., Any]] = {
    "server error": schemathesis.checks.not_a_server_error,
    "status": schemathesis.checks.status_code_conformance,
    "shape": schemathesis.checks.response_schema_conformance,
    "content type": schemathesis.checks.content_type_conformance,
}
Found = dict[str, dict[str, dict[str, int]]]  # operation → check → first line → times


def run_checks(base_url: str, document: dict[str, Any], examples: int) -> Found:
    """Each GET operation's generated cases, then the known entities' requests
    (``known``), called at ``base_url``; what each check found, one line each."""
    schema = schemathesis.openapi.from_dict(document).include(method="GET")
    found: Found = {}
    operations = {}
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # a document that loads
        operations[operation.path] = operation
        found[operation.label] = _check(base_url, operation, examples)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        requests = marquez_openapi.known_requests(client)
    for path, path_parameters, query in requests:
        operation = operations[path]
        case = operation.Case(path_parameters=path_parameters, query=query)
        for name, line in _failed(case, case.call(base_url=base_url, timeout=60)):
            counts = found[operation.label].setdefault(name, {})
            counts[f"(known) {line}"] = counts.get(f"(known) {line}", 0) + 1
    return found


def _failed(case: Any, response: Any) -> list[tuple[str, str]]:
    """What each check found wrong with ``response``: (check, one line a failure)."""
    out = []
    for name, check in CHECKS.items():
        try:
            case.validate_response(response, checks=[check])
        except (Exception, BaseExceptionGroup) as failure:  # schemathesis's group
            out += [(name, line) for line in _described(failure)]
    return out


def _check(base_url: str, operation: Any, examples: int) -> dict[str, dict[str, int]]:
    failures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(operation.as_strategy(generation_mode=mode))
        def call(case: Any) -> None:
            for name, line in _failed(case, case.call(base_url=base_url, timeout=60)):
                failures[name][line] += 1

        with contextlib.suppress(Exception, BaseExceptionGroup):  # a case it cannot make
            call()
    return {k: dict(v) for k, v in failures.items()}


def _described(failure: BaseException) -> list[str]:
    """Each failure of a group as one line: its title and its message's first lines
    (a status received and those documented; the schema error and where)."""
    inner = failure.exceptions if isinstance(failure, BaseExceptionGroup) else [failure]
    lines = []
    for one in inner:
        title = getattr(one, "title", type(one).__name__)
        message = [x.strip() for x in str(getattr(one, "message", one)).splitlines() if x.strip()]
        lines.append(f"{title}: {'; '.join(message[:3])}"[:240])
    return lines


def compare(marquez: Found, port: Found) -> list[dict[str, Any]]:
    rows = []
    for operation in sorted(marquez.keys() | port.keys()):
        for check in CHECKS:
            m = marquez.get(operation, {}).get(check, {})
            e = port.get(operation, {}).get(check, {})
            if m or e:
                rows.append({"operation": operation, "check": check, "marquez": m, "port": e})
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="embrasure-marquez-spec-"))
    code = servers.copy_source(work, None)
    documents = {"as read": marquez_openapi.readable(), "corrected": marquez_openapi.corrected()}
    started = time.monotonic()
    (work / "m").mkdir()
    (work / "e").mkdir()
    with marquez_web.marquez_loaded(work / "m") as (url, _):
        marquez = {k: run_checks(url + "/api/v1", d, args.examples) for k, d in documents.items()}
    with marquez_web.embrasure_loaded(work / "e") as (url, _):
        port = {k: run_checks(url + "/api/v1", d, args.examples) for k, d in documents.items()}
    return {
        "machine": servers.machine_facts(code),
        "marquez_origin": marquez_server.origin(),
        "corrections": [
            {"what": c.what, "why": c.why, "to_read": c.to_read}
            for c in marquez_openapi.CORRECTIONS
        ],
        "examples": args.examples,
        "operations": len(marquez["corrected"].keys() | port["corrected"].keys()),
        "found": {k: compare(marquez[k], port[k]) for k in documents},
        "seconds": round(time.monotonic() - started),
    }


def _sides(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "On both (the document's)": [r for r in rows if r["marquez"] and r["port"]],
        "On the port only": [r for r in rows if r["port"] and not r["marquez"]],
        "On Marquez only": [r for r in rows if r["marquez"] and not r["port"]],
    }


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    read, fixed = _sides(report["found"]["as read"]), _sides(report["found"]["corrected"])
    lines = [
        "# Marquez's OpenAPI document, checked against Marquez and the port",
        "",
        f"Run {m['date']} on {m['nproc']} cores, `bench/peers/marquez_spec.py`"
        f" ({report['seconds']} s). Embrasure: {m['commit']}; Marquez 0.50.0"
        f" ({report['marquez_origin']}). {report['operations']} GET operations, up to"
        f" {report['examples']} valid and {report['examples']} invalid generated requests"
        " each, then the requests of every namespace, dataset, job and run the events hold"
        " (marked known), the same on both servers, over the same events"
        " (tests/marquez_web_platform.py). An operation and check that fails:",
        "",
        "| | the document as read | corrected |",
        "| --- | --- | --- |",
        *(f"| {t.lower()} | {len(read[t])} | {len(fixed[t])} |" for t in read),
        "",
        "## The corrections (tests/marquez_openapi.py)",
        "",
        *(
            f"{n}. {c['what']}: {c['why']}."
            + (
                " Applied to the document as read too: it cannot be read without."
                if c["to_read"]
                else ""
            )
            for n, c in enumerate(report["corrections"], 1)
        ),
        "",
        "## What fails with the corrections",
        "",
    ]
    for title, group in fixed.items():
        lines += [f"### {title}: {len(group)}", ""]
        if not group:
            continue
        lines += ["| operation | check | Marquez | port |", "| --- | --- | --- | --- |"]
        for r in group:
            shown = [
                "<br>".join(f"{n} x {text}" for text, n in sorted(side.items())) or "-"
                for side in (r["marquez"], r["port"])
            ]
            cells = [r["operation"], r["check"], *(c.replace("|", "\\|") for c in shown)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--marquez-source", type=Path, default=None, help=marquez_server.SOURCE_HELP
    )
    parser.add_argument("--examples", type=int, default=25, help="valid (and invalid) each")
    parser.add_argument("--out", type=Path, default=RESULTS / "peers-marquez-spec")
    args = parser.parse_args(argv)
    marquez_server.require_java()
    marquez_server.fetch(source=args.marquez_source)
    servers.write_results(args.out, run(args), markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
