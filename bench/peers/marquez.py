"""Embrasure beside Marquez (issue 17): one run, one machine, the same events and client.

Three targets, each on a fresh database (bench/peers/targets.py): Embrasure on SQLite,
Embrasure on PostgreSQL, Marquez 0.50.0 on PostgreSQL (bench/peers/marquez_server.py gets
it: ``marquez-api`` from Maven Central, or, where that lacks it, built from a Marquez
checkout given with ``--marquez-source`` or EMBRASURE_MARQUEZ_SOURCE). Parts (``--parts``):

- ``ingest``: wrk single-event ingest (64 connections, unique runIds), Embrasure's
  500-event batches beside it; the database's growth per event; then the time until a
  posted event is answered by the lineage API, idle and under load
  (bench/peers/workloads.py);
- ``correctness``: the shared corpus in two orders (bench/peers/order_compare.py) to fresh
  databases of each target, what each serves compared between the orders;
- ``queries``: bench/query.py's platform at ``--scale`` (0.01: 520 jobs, 584 events
  of ~10 KB; Marquez stored 4 to 10 of them a second here), POSTed
  one event at a time to each target, then lineage at depth 5
  and 20, column lineage of a field and a job's runs, cold and warm; the database's
  growth per platform event.

Results: bench/results/peers.{md,json} (``--out``; ``--quick`` writes under
bench/results/tmp/). Ratios are Embrasure / Marquez. Needs mvn and Java 17 (without
either it says so and exits 2), wrk, and the PostgreSQL at EMBRASURE_BENCH_PG. Linux
only (it reads /proc). Run: ``.venv/bin/python bench/peers/marquez.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:  # run as a script: bench/ holds the shared harness
    sys.path.insert(0, str(BENCH_DIR))

import httpx  # noqa: E402
import ingest_load  # noqa: E402
import orjson  # noqa: E402
import query  # noqa: E402
import servers  # noqa: E402

from peers import marquez_server, order_compare, peers_report, workloads  # noqa: E402
from peers.peer_api import JSON, Snapshot, api_of  # noqa: E402
from peers.targets import TARGETS, Target, running  # noqa: E402

RESULTS = BENCH_DIR / "results"
PARTS = ("ingest", "correctness", "queries")


def versions() -> dict[str, str]:
    """Java's and the PostgreSQL server's, for the report."""
    import backends
    import psycopg

    shown = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    with psycopg.connect(backends.PG_ADMIN) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return {
        "java": shown.splitlines()[0] if shown else "java",
        "postgresql": str(row[0]).split()[0] if row else "?",
    }


# -- correctness ----------------------------------------------------------------------------


def _send(target: Target, deliveries: Sequence[tuple[str, bytes, str]]) -> dict[str, Any]:
    """One client, one delivery at a time, in order: the order is the point. Answers by
    status, and each refusal's reason with the first event it was given for."""
    statuses: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    examples: dict[str, str] = {}
    with httpx.Client(base_url=target.url, timeout=120) as client:
        for path, body, label in deliveries:
            response = client.post(path, content=body, headers=JSON)
            statuses[str(response.status_code)] += 1
            if response.status_code >= 300:
                reason = f"{response.status_code} {_reason(response)}"
                refusals[reason] += 1
                examples.setdefault(reason, label)
    return {
        "statuses": dict(statuses),
        "refusals": [[r, n, examples[r]] for r, n in refusals.most_common(10)],
    }


def _reason(response: httpx.Response) -> str:
    """The first error a refusal names (Marquez: ``errors``; Embrasure: ``detail``)."""
    try:
        doc = response.json()
    except ValueError:
        return response.text[:100]
    if isinstance(doc, dict):
        errors = doc.get("errors")
        if isinstance(errors, list) and errors:
            return str(errors[0])[:100]
        return str(doc.get("detail") or doc.get("message") or "")[:100]
    return ""


def deliveries_of(
    order: str, events: Sequence[order_compare.CorpusEvent], kind: str
) -> list[tuple[str, bytes, str]]:
    """(path, body, the first event's label) of each POST of ``order``."""
    singles = [("/api/v1/lineage", orjson.dumps(e.event), e.label()) for e in events]
    if order == "forward":
        return singles
    if kind == "marquez":  # no batch route: the first pass is one event per POST too
        return singles + singles
    batched = [
        ("/api/v1/lineage/batch", orjson.dumps([e.event for e in b]), b[0].label() + " …")
        for b in order_compare.batches(events)
    ]
    return batched + singles


def correctness(name: str, work: Path, source: Path) -> dict[str, Any]:
    events = order_compare.corpus_events()
    runs = order_compare.runs_of(events)
    orders = {"forward": order_compare.forward(runs), "backward": order_compare.backward(runs)}
    snapshots: dict[str, Snapshot] = {}
    sent: dict[str, dict[str, Any]] = {}
    for order, sequence in orders.items():
        with running(name, work, source) as target:
            sent[order] = _send(target, deliveries_of(order, sequence, target.kind))
            target.wait_graph()
            with httpx.Client(base_url=target.url, timeout=120) as client:
                snapshots[order] = api_of(target.kind).snapshot(client)
            print(f"[{name}] corpus {order}: {sent[order]['statuses']}", flush=True)
    found = order_compare.diff(snapshots["forward"], snapshots["backward"])
    index = order_compare.EventIndex.of(events)
    return {
        "events": len(events),
        "runs": len(runs),
        "sent": sent,
        "served": {
            o: {"nodes": len(s.nodes), "edges": len(s.edges), "runs": len(s.runs)}
            for o, s in snapshots.items()
        },
        "differences": found.count(),
        # Embrasure's export is canonical: the same set of events gives the same bytes.
        "export_identical": (
            None
            if snapshots["forward"].digest is None
            else snapshots["forward"].digest == snapshots["backward"].digest
        ),
        "by_kind": {f.name: len(getattr(found, f.name)) for f in dataclasses.fields(found)},
        "explained": order_compare.explain(found, index),
    }


# -- the run ----------------------------------------------------------------------------------


def run_target(
    name: str, args: argparse.Namespace, work: Path, source: Path, wrk: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "ingest" in args.parts:
        assert wrk is not None
        template = work / "template.json"
        template.write_bytes(ingest_load.event_template())
        with running(name, work, source) as target:
            out["ingest"] = workloads.ingest(target, wrk, template, args.seconds, args.warmup)
            print(f"[{name}] ingest: {peers_report.ingest_line(out['ingest'])}", flush=True)
            out["visibility"] = workloads.visibility(target, wrk, template, args.probes)
            print(f"[{name}] visibility: {peers_report.visible_line(out['visibility'])}")
    if "correctness" in args.parts:
        out["correctness"] = correctness(name, work, source)
        print(f"[{name}] correctness: {out['correctness']['differences']} differences")
    if "queries" in args.parts:
        platform = query.Platform(args.scale)
        bodies = workloads.platform_events(platform)
        with running(name, work, source) as target:
            out["platform_load"] = workloads.load_platform(target, bodies, args.clients)
            print(f"[{name}] platform: {peers_report.load_line(out['platform_load'])}")
            plan = workloads.query_plan(platform)
            out["queries"] = workloads.queries(target, plan, args.calls)
            for group, found in out["queries"]["groups"].items():
                print(f"[{name}] {group}: {peers_report.query_line(found)}", flush=True)
    return out


def _merged(saved: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s parts put over ``saved``'s, target by target; the rerun recorded."""
    for name, found in new["targets"].items():
        saved["targets"].setdefault(name, {}).update(found)
    rerun = {k: new[k] for k in ("seconds", "others_busy_cores_at_start", "settings")}
    rerun |= {"date": new["machine"]["date"], "commit": new["machine"]["commit"]}
    saved.setdefault("reruns", []).append(rerun)
    return saved


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--seconds", type=int, default=10, help="per wrk run")
    parser.add_argument("--warmup", type=int, default=10, help="wrk warm-up seconds")
    parser.add_argument("--probes", type=int, default=30, help="events per visibility test")
    parser.add_argument("--scale", type=float, default=0.01, help="bench/query.py platform")
    parser.add_argument("--clients", type=int, default=4, help="concurrent platform POSTs")
    parser.add_argument("--calls", type=int, default=30, help="warm calls per query")
    parser.add_argument("--quick", action="store_true", help="small sizes, results/tmp/")
    parser.add_argument("--out", type=Path, default=None, help="results path, no suffix")
    parser.add_argument(
        "--marquez-source", type=Path, default=None, help=marquez_server.SOURCE_HELP
    )
    parser.add_argument(
        "--merge", action="store_true", help="put these parts over those in OUT.json"
    )
    parser.add_argument(
        "--render", action="store_true", help="only write OUT.md again from OUT.json"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.probes, args.calls = 3, 3, 5, 5
        args.scale = min(args.scale, 0.005)
    if args.out is None:
        args.out = RESULTS / ("tmp/peers" if args.quick else "peers")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        saved.setdefault("marquez_origin", marquez_server.origin(saved["marquez"]))
        args.out.with_suffix(".md").write_text(peers_report.markdown(saved))
        return 0
    if "marquez" in args.targets:
        marquez_server.require_java()
        # Before any clock starts; exits 2 without mvn, or without marquez-api and a source.
        marquez_server.fetch(source=args.marquez_source)
    wrk = ingest_load.ensure_wrk() if "ingest" in args.parts else None
    work = Path(tempfile.mkdtemp(prefix="embrasure-peers-"))
    code = servers.copy_source(work, None)
    report: dict[str, Any] = {
        "machine": servers.machine_facts(code),
        "marquez": marquez_server.VERSION,
        "marquez_origin": marquez_server.origin(),
        **versions(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "others_busy_cores_at_start": round(servers.busy_cores(2.0), 2),
        "targets": {},
    }
    started = time.monotonic()
    for name in args.targets:
        report["targets"][name] = run_target(name, args, work, work, wrk)
    report["seconds"] = round(time.monotonic() - started)
    report["others_busy_cores_at_end"] = round(servers.busy_cores(2.0), 2)
    if args.merge and args.out.with_suffix(".json").exists():
        report = _merged(json.loads(args.out.with_suffix(".json").read_text()), report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(peers_report.markdown(report))
    print(f"wrote {args.out.with_suffix('.md')} and .json; logs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
