"""What deriving column lineage from SQL costs the projector (projector/sql_lineage.py).

The same platform as bench/projection.py (500 Spark jobs in Airflow DAGs, START and
COMPLETE per run, ~4.7 KB events), with every output's ``columnLineage`` facet removed,
in two variants measured side by side, interleaved, in one run:

- ``sql``: the job carries a ``sql`` facet whose query computes the 8 output columns from
  the two inputs (written from the removed facet, half the columns through a function,
  with a join), so the projector parses it and derives 8 column edges per output;
- ``no sql``: the same events without the ``sql`` facet (nothing to derive).

Three cases of how much repeats between runs, each for both variants:

- ``repeating``: every run of a job sends the same job and dataset content, so the
  pipeline's per-content memo (pipeline._declared) reads it once; the parse happens once
  per job too.
- ``row counts``: each run's output carries its own ``outputStatistics`` (rowCount, size),
  as Spark, dbt and Airflow send: the per-content memo misses on every event, and the
  parse LRU (sql_lineage.parse_sql) is what keeps the SQL from being parsed again.
- ``per-run SQL``: the query also names the run's date (a templated ``WHERE`` as Airflow
  renders it), so every event's SQL is new: a parse per event, the worst case.

Measured: ``pipeline`` — ``project_event`` over 5,000 events in this process, both memos
emptied before each repeat (µs per event); ``projector`` — for ``row counts``, a 20,000-event
log pre-filled through ``SQLiteStore.append`` and projected by
``Projector.run_until_caught_up`` on a fresh copy each repeat (events/s). Medians of
``--repeats`` (default 5) rounds; every round runs each variant once, alternating. The CPU
that other processes used meanwhile is reported (``others busy``, cores): the machine is
shared, and a round with others busy is slower for reasons that are not ours.

Run: ``.venv/bin/python bench/sql_lineage.py`` (5 to 15 minutes, longer when the machine
is busy; writes bench/results/sql_lineage.{md,json}); ``--quick`` for a smoke test
(bench/results/tmp/).
Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import importlib.metadata
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import servers
from projection import (
    Platform,
    checkpoint,
    copy_db,
    item_outcomes,
    system_busy_seconds,
    wait_for_quiet,
)

from embrasure.model import DeliveryDraft, EventFacts, utc_now
from embrasure.projector import pipeline, sql_lineage
from embrasure.projector.collector import tune_gc
from embrasure.projector.pipeline import project_event
from embrasure.projector.worker import Projector
from embrasure.store.sqlite import SQLiteStore

RESULTS_DIR = Path(__file__).resolve().parent / "results"
VARIANTS = ("sql", "no sql", "declared")
JOBS = 100  # jobs in the workload; each runs count / (2 * JOBS) times
CASES = ("repeating", "row counts", "per-run SQL")


def query_for(event: dict[str, Any], lineage: dict[str, Any], day: str | None) -> str:
    """An INSERT … SELECT computing the output's columns as its columnLineage facet says."""
    first, second = event["inputs"]
    alias = {first["name"]: "a", second["name"]: "b"}
    columns = []
    for n, (out_field, spec) in enumerate(sorted(lineage["fields"].items())):
        source = spec["inputFields"][0]
        expr = f"{alias[source['name']]}.{source['field']}"
        columns.append(f"{expr if n % 2 else f'upper({expr})'} AS {out_field}")
    key_a = first["facets"]["schema"]["fields"][0]["name"]
    key_b = second["facets"]["schema"]["fields"][0]["name"]
    where = f" WHERE a.{key_a} >= '{day}'" if day else ""
    return (
        f"INSERT INTO {event['outputs'][0]['name']} SELECT {', '.join(columns)} "
        f"FROM {first['name']} a JOIN {second['name']} b ON a.{key_a} = b.{key_b}{where}"
    )


def variant_event(platform: Platform, run: int, kind: str, variant: str, case: str) -> Any:
    event = copy.deepcopy(platform.event(run, kind))
    output = event["outputs"][0]
    facets = event["job"].setdefault("facets", {})
    facets.pop("sql", None)
    if variant == "declared":
        lineage = output["facets"]["columnLineage"]  # the same 8 edges, declared
    else:
        lineage = output["facets"].pop("columnLineage")
    if variant == "sql":
        day = f"2026-11-{1 + run % 28:02d}" if case == "per-run SQL" else None
        facets["sql"] = {"query": query_for(event, lineage, day), "dialect": "postgres"}
    if case != "repeating":
        output["outputFacets"] = {
            "outputStatistics": {"rowCount": 1_000 + run * 7 % 9_000, "size": 64_000 + run}
        }
    return event


def events(count: int) -> Iterator[tuple[int, str]]:
    """(run, eventType): JOBS jobs, run after run, each run's START then COMPLETE. Run
    numbers are bench/projection.py's (job = run % 500, its rotating input = run // 500 %
    5), taken so that a job always reads the same tables: its SQL repeats run after run."""
    for k in range(count // (2 * JOBS)):
        for job in range(JOBS):
            for kind in ("START", "COMPLETE"):
                yield job + 2_500 * k, kind


def bodies(variant: str, case: str, count: int) -> list[bytes]:
    platform = Platform()
    return [
        orjson.dumps(variant_event(platform, run, kind, variant, case))
        for run, kind in events(count)
    ]


def check(variant: str, sample: list[bytes]) -> None:
    """The workload does what it claims: 8 derived edges per output with SQL, 8 declared
    ones in ``declared``, none in ``no sql``, and no warning."""
    facts = project_event(orjson.loads(sample[-1]))
    assert isinstance(facts, EventFacts), facts
    derived = [c for c in facts.columns if c.derived == "sql"]
    assert len(derived) == (8 if variant == "sql" else 0), facts.columns
    assert len(facts.columns) == (0 if variant == "no sql" else 8), facts.columns
    assert not facts.warnings, facts.warnings


def clear_memos() -> None:
    pipeline._memo.clear()
    sql_lineage.clear_cache()


def timed(work: Callable[[], int]) -> dict[str, float]:
    wait_for_quiet(10.0)
    busy, cpu, started = system_busy_seconds(), time.process_time(), time.perf_counter()
    n = work()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    return {
        "events": n,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "others_busy_cores": max(0.0, (system_busy_seconds() - busy - cpu) / seconds),
    }


def pipeline_round(data: list[bytes]) -> int:
    clear_memos()
    for body in data:
        project_event(orjson.loads(body))
    return len(data)


def prefill(path: Path, data: list[bytes]) -> None:
    store = SQLiteStore(str(path))
    try:
        for start in range(0, len(data), 500):
            chunk = data[start : start + 500]
            body = b"[" + b",".join(chunk) + b"]"
            digest = hashlib.sha256(body).hexdigest()
            draft = DeliveryDraft("default", None, digest, body, "batch", len(chunk), (), utc_now())
            store.append([draft])
    finally:
        store.close()
    checkpoint(path)


def projector_round(log: Path, target: Path) -> Callable[[], int]:
    def work() -> int:
        clear_memos()
        store = SQLiteStore(str(target))
        try:
            Projector(store).run_until_caught_up()
        finally:
            store.close()
        outcomes = item_outcomes(target)
        if set(outcomes) != {"projected"}:
            raise RuntimeError(f"items were not all projected: {outcomes}")
        return outcomes["projected"]

    copy_db(log, target)
    return work


def summarise(runs: list[dict[str, float]]) -> dict[str, Any]:
    per_event = [r["seconds"] / r["events"] * 1e6 for r in runs]
    return {
        "median_us_per_event": statistics.median(per_event),
        # This process's CPU per event: less sensitive than the wall clock to the others
        # on the machine (it still pays for the caches and cores they share).
        "median_cpu_us_per_event": statistics.median(
            r["cpu_seconds"] / r["events"] * 1e6 for r in runs
        ),
        "median_events_per_s": statistics.median(r["events"] / r["seconds"] for r in runs),
        "runs_us_per_event": [round(x, 1) for x in per_event],
        "max_others_busy_cores": max(r["others_busy_cores"] for r in runs),
    }


def parse_cost(data: list[bytes]) -> dict[str, float]:
    """openlineage_sql.parse of one benchmark query, uncached (µs), and its length."""
    query = orjson.loads(data[-1])["job"]["facets"]["sql"]["query"]
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(200):
            sql_lineage._parse(query, "postgres")
        times.append((time.perf_counter() - started) / 200 * 1e6)
    return {"chars": len(query), "median_us_per_parse": statistics.median(times)}


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    pipeline_events = 1_000 if args.quick else 5_000
    projector_events = 4_000 if args.quick else 20_000
    results: dict[str, Any] = {"pipeline": {}, "projector": {}}
    for case in CASES:
        data = {v: bodies(v, case, pipeline_events) for v in VARIANTS}
        for v in VARIANTS:
            check(v, data[v])
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for round_ in range(args.repeats):
            for v in rotated(round_):
                runs[v].append(timed(functools.partial(pipeline_round, data[v])))
        results["pipeline"][case] = {v: summarise(runs[v]) for v in VARIANTS}
        results["pipeline"][case]["events"] = pipeline_events
        print(f"pipeline, {case}: " + _line(results["pipeline"][case]), flush=True)
        if case == "per-run SQL":
            results["parse"] = parse_cost(data["sql"])
    case = "row counts"
    logs = {}
    for v in VARIANTS:
        logs[v] = work / f"log-{v.replace(' ', '-')}.db"
        prefill(logs[v], bodies(v, case, projector_events))
    runs = {v: [] for v in VARIANTS}  # the pipeline's, done with
    for round_ in range(args.repeats):
        for v in rotated(round_):
            runs[v].append(timed(projector_round(logs[v], work / "projected.db")))
    results["projector"] = {v: summarise(runs[v]) for v in VARIANTS}
    results["projector"]["events"] = projector_events
    results["projector"]["case"] = case
    print(f"projector, {case}: " + _line(results["projector"]), flush=True)
    return results


def rotated(round_: int) -> tuple[str, ...]:
    """The variants in a different order each round, so none always runs first."""
    n = round_ % len(VARIANTS)
    return VARIANTS[n:] + VARIANTS[:n]


def _line(part: dict[str, Any]) -> str:
    return ", ".join(
        f"{v} {part[v]['median_us_per_event']:.0f} µs/event "
        f"({part[v]['median_events_per_s']:,.0f} events/s)"
        for v in VARIANTS
    )


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# SQL-derived column lineage: what it costs the projector",
        "",
        f"Measured {m['date']} on {m['nproc']} cores ({m['cpu']}), Python {m['python']}, "
        f"SQLite {m['sqlite']}, openlineage-sql {results['openlineage_sql']}. Code: "
        f"{m['commit']}. Medians of {results['repeats']} interleaved rounds; the machine is "
        "shared, so 'others busy' is the CPU other processes used meanwhile (cores, the "
        "largest of the rounds). How and why: the docstring of bench/sql_lineage.py.",
        "",
        "## The pure pipeline (`project_event`, in process)",
        "",
        "µs per event, wall clock (this process's CPU in brackets); `sql`: the job's SQL, "
        "no columnLineage (8 edges derived per output); "
        "`no sql`: the same events without the sql facet; `declared`: the same events with "
        "their columnLineage facet and no sql facet (the same 8 edges, declared).",
        "",
        "| case | events | sql | no sql | declared | sql minus no sql | sql minus declared | "
        "others busy (cores) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in CASES:
        part = results["pipeline"][case]
        sql, none, declared = (part[v]["median_us_per_event"] for v in VARIANTS)
        c_sql, c_none, c_declared = (part[v]["median_cpu_us_per_event"] for v in VARIANTS)
        busy = max(part[v]["max_others_busy_cores"] for v in VARIANTS)
        lines.append(
            f"| {case} | {part['events']:,} | {sql:.0f} ({c_sql:.0f}) | {none:.0f} "
            f"({c_none:.0f}) | {declared:.0f} ({c_declared:.0f}) | {sql - none:+.0f} µs "
            f"({c_sql - c_none:+.0f}) | {sql - declared:+.0f} µs ({c_sql - c_declared:+.0f}) "
            f"| {busy:.2f} |"
        )
    parse = results["parse"]
    proj = results["projector"]
    sql, none, declared = (proj[v]["median_events_per_s"] for v in VARIANTS)
    lines += [
        "",
        f"One parse of the benchmark query ({parse['chars']} characters: 8 columns, a join, "
        f"a WHERE) costs {parse['median_us_per_parse']:.0f} µs alone, uncached.",
        "",
        f"## The projector on SQLite ({proj['case']}, {proj['events']:,} events)",
        "",
        "| variant | events/s | µs/event (CPU) | rounds (µs/event) | others busy (cores) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in VARIANTS:
        p = proj[v]
        lines.append(
            f"| {v} | {p['median_events_per_s']:,.0f} | {p['median_us_per_event']:.0f} "
            f"({p['median_cpu_us_per_event']:.0f}) | "
            f"{', '.join(str(x) for x in p['runs_us_per_event'])} | "
            f"{p['max_others_busy_cores']:.2f} |"
        )
    lines += [
        "",
        f"Events/s with SQL against without: {(sql / none - 1) * 100:+.0f}%; against the "
        f"same lineage declared: {(sql / declared - 1) * 100:+.0f}%.",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    args = p.parse_args()
    tune_gc()  # the collector settings `embrasure serve` and `project` run with
    work = Path(tempfile.mkdtemp(prefix="embrasure-sql-lineage-"))
    try:
        code = servers.working_tree()
        results = measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["machine"] = servers.machine_facts(code)
    results["repeats"] = args.repeats
    results["openlineage_sql"] = importlib.metadata.version("openlineage-sql")
    out_dir = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sql_lineage.json").write_bytes(
        orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n"
    )
    (out_dir / "sql_lineage.md").write_text(markdown(results) + "\n")
    print(f"wrote {out_dir / 'sql_lineage.md'}")


if __name__ == "__main__":
    main()
