"""Each graph index's cost to the projector, beside the reads that use it (issue 49:
"indexes that cost the writer only what they earn").

Write cost: bench/projection.py's events (``--events``, 20,000) and bench/query.py's
platform (``--scale``, 0.15: every event a new job) are each appended once to a log; then
each workload is projected by one projector process into fresh copies of its log: with
every index (``all``), without every index only reads use, and without each index
alone, in ``--rounds`` rounds (3) that each project every configuration once, so that a
drift over the run falls on all alike. The figure is this process's CPU an event (the
projector's thread, SQLite's work in it and the WAL checkpoints of the pages it wrote);
an index's cost is the difference with the median of ``all``. Indexes that keep rows
unique (primary keys, UNIQUE) are not candidates: the projection's own upserts look rows
up by them.

Read use: the platform's graph, projected with every index, served in process
(``build_app``), and asked what bench/query.py's groups ask (lineage, column lineage,
impact, search) and what the UI's pages lean on (listings, a dataset's and a job's
runs, a dataset's writers, lineage ``asOf``, events, quarantine, the overview, the
export). Every
statement SQLite runs is recorded (``set_trace_callback``) and its plan read (``EXPLAIN
QUERY PLAN``): which route's statements use which index.

Writes bench/results/indexes.{md,json}. Run ``.venv/bin/python bench/indexes.py``
(about 16 minutes on this 2-core machine).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab
import projection
import query
import servers

from embrasure.projector.worker import Projector, ProjectorLimits
from embrasure.store import sqlite_files
from embrasure.store.sqlite import SQLiteStore

RESULTS = Path(__file__).resolve().parent / "results"
ONE_PROCESS = ProjectorLimits(processes=1)
_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)")


def graph_indexes(db: Path) -> list[str]:
    """The graph file's explicit indexes (not the ones its keys make)."""
    with contextlib.closing(sqlite3.connect(f"{db}-graph")) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
        ).fetchall()
    return [name for (name,) in rows]


def read_only(names: list[str]) -> list[str]:
    """Those store/schema.py defers in a rebuild: only reads use them."""
    from embrasure.store.schema import DEFERRED_INDEXES

    return [n for n in names if re.sub(r"^g\d+_", "", n) in DEFERRED_INDEXES]


def project_without(log: Path, target: Path, dropped: list[str]) -> float:
    """CPU seconds of one projection of a fresh copy of ``log`` without ``dropped``."""
    projection.copy_db(log, target)
    with contextlib.closing(sqlite3.connect(f"{target}-graph", isolation_level=None)) as conn:
        for name in dropped:
            conn.execute(f"DROP INDEX {name}")
    projection.wait_for_quiet(30)
    store = SQLiteStore(str(target))
    try:
        cpu = projection.own_cpu_seconds()  # the WAL's checkpoints too: pages the index adds
        Projector(store, ONE_PROCESS).run_until_caught_up()
        return projection.own_cpu_seconds() - cpu
    finally:
        store.close()


def write_costs(log: Path, events: int, work: Path, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds, each projecting every configuration once (with every index
    first and last): a drift over the run falls on all of them alike."""
    target = work / "projected.db"
    names = graph_indexes(_projected_once(log, target))
    configs: dict[str, list[str]] = {"all": [], "no read-only indexes": read_only(names)}
    configs.update({f"without {n}": [n] for n in names})
    us: dict[str, list[float]] = {label: [] for label in configs}
    project_without(log, target, [])  # a warm-up: the first projection in a process pays more
    for r in range(rounds):
        for label in [*configs, "all"]:
            cpu = project_without(log, target, configs[label])
            us[label].append(cpu / events * 1e6)
        print(f"  round {r + 1}: all {us['all'][-2]:,.1f} / {us['all'][-1]:,.1f} µs", flush=True)
    projection.remove_db(target)
    base = statistics.median(us["all"])
    return {
        "events": events,
        "all_us": us["all"],
        "rows": [
            {
                "config": label,
                "index": dropped[0] if len(dropped) == 1 else None,
                "us": values,
                "us_per_event": statistics.median(values),
                "saved_us": base - statistics.median(values),
                "saved_share": (base - statistics.median(values)) / base,
            }
            for label, dropped in configs.items()
            if label != "all"
            for values in [us[label]]
        ],
    }


def _projected_once(log: Path, target: Path) -> Path:
    """An empty copy with the graph's tables made (the store makes them at open)."""
    projection.copy_db(log, target)
    SQLiteStore(str(target)).close()
    return target


# -- read use ----------------------------------------------------------------------------


def traced_statements() -> tuple[list[str], Callable[[], None]]:
    """Every statement run on the store's connections from now on, and an undo."""
    seen: list[str] = []
    original = sqlite_files.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = original(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    sqlite_files.connect = connect
    return seen, lambda: setattr(sqlite_files, "connect", original)


def read_routes(platform: query.Platform) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(group, path, params): bench/query.py's groups, three roots each, then the
    listings and pages."""
    groups = query.query_groups(platform, len(platform.tasks) // 10, 3)
    for group in groups:
        for q in group.queries[:3]:
            yield group.name, q.path, q.params
    hub = dict(groups[1].queries[0].params)
    ns, name = hub["namespace"], hub["name"]
    yield "lineage_as_of", "/api/v1/lineage", {**hub, "asOf": "2026-01-01T00:00:00Z"}
    yield "namespaces", "/api/v1/namespaces", {}
    yield "datasets", "/api/v1/datasets", {"namespace": ns}
    yield "jobs", "/api/v1/jobs", {}
    yield "dataset_runs", "/api/v1/datasets/runs", {"namespace": ns, "name": name}
    yield "writers", "/api/v1/runs", {"type": "dataset", "namespace": ns, "name": name}
    job_ns, job_name = query.JOB_NS, platform.job_name(0, 0)
    yield "job_runs", "/api/v1/runs", {"namespace": job_ns, "name": job_name}
    yield "job", "/api/v1/jobs", {"namespace": job_ns, "name": job_name}
    yield (
        "job_lineage_as_of",
        "/api/v1/lineage",
        {"type": "job", "namespace": job_ns, "name": job_name, "asOf": "2026-06-01T00:00:00Z"},
    )
    yield "events", "/api/v1/events", {"after": "2026-01-01T00:00:00Z"}
    yield "quarantine", "/api/v1/quarantine", {}
    yield "overview", "/api/v1/overview", {}
    yield "export", "/api/v1/export", {}


def read_use(db: Path, platform: query.Platform) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from embrasure.app import build_app
    from embrasure.settings import Settings

    url = f"sqlite:///{db}"
    seen, undo = traced_statements()
    uses: dict[str, dict[str, int]] = {}  # index → route group → statements
    statuses: dict[str, int] = {}
    store = SQLiteStore(str(db))
    try:
        with TestClient(build_app(Settings(db=url, read_workers=0), store)) as client:
            for group, path, params in read_routes(platform):
                del seen[:]
                response = client.get(path, params=params)
                statuses[group] = response.status_code
                for sql in set(seen):
                    for index in plan_indexes(db, sql):
                        counts = uses.setdefault(index, {})
                        counts[group] = counts.get(group, 0) + 1
    finally:
        undo()
        store.close()
    return {"uses": uses, "statuses": statuses}


def plan_indexes(db: Path, sql: str) -> set[str]:
    """The indexes ``sql``'s plan uses (a connection with the store's attachments)."""
    if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
        return set()
    conn = sqlite_files.connect(sqlite_files.graph_path_of(str(db)), log_path=str(db))
    try:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
    except sqlite3.Error:
        return set()
    finally:
        conn.close()
    return {m.group(1) for row in rows for m in [_INDEX.search(str(row[-1]))] if m}


# -- the report ---------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# What each graph index costs the projector, and which reads use it",
        "",
        f"Run {m['date']}. Machine: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']},"
        f" SQLite {m['sqlite']}. Code: {m['commit']}. `bench/indexes.py` (its docstring says"
        " how it measures; raw numbers in [indexes.json](indexes.json)). One projector"
        " process; its CPU an event (threads and WAL checkpoints included), medians of"
        f" {len(next(iter(results['write_cost'].values()))['all_us']) // 2} rounds; 'saved'"
        " is what projecting without the index saves against the median with every index"
        " (negative, or inside the runs' spread: noise).",
        "",
    ]
    uses = results["read_use"]["uses"]
    for workload, w in results["write_cost"].items():
        base = statistics.median(w["all_us"])
        spread = f"{min(w['all_us']):,.1f}-{max(w['all_us']):,.1f}"
        lines += [
            f"## Write cost: {workload} ({w['events']:,} events)",
            "",
            f"With every index: {base:,.1f} µs an event (runs {spread}).",
            "",
            "| without | µs/event (runs) | saved | share | reads that use it |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for row in sorted(w["rows"], key=lambda r: -r["saved_us"]):
            index = row["index"]
            used = ", ".join(sorted(uses.get(index, {}))) if index else "-"
            lines.append(
                f"| {row['config'].removeprefix('without ')} | {row['us_per_event']:,.1f}"
                f" ({min(row['us']):,.1f}-{max(row['us']):,.1f})"
                f" | {row['saved_us']:,.1f} | {row['saved_share']:.1%} | {used or 'none seen'} |"
            )
        lines.append("")
    statuses = results["read_use"]["statuses"]
    lines += [
        "## Reads asked (status)",
        "",
        ", ".join(f"{g} {s}" for g, s in statuses.items()),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="bench/projection.py's")
    parser.add_argument("--scale", type=float, default=0.15, help="bench/query.py's platform")
    parser.add_argument("--rounds", type=int, default=3, help="projections of each configuration")
    parser.add_argument("--out", type=Path, default=RESULTS / "indexes")
    args = parser.parse_args(argv)
    projection.tune_gc()
    with tempfile.TemporaryDirectory(prefix="embrasure-indexes-") as tmp:
        work = Path(tmp)
        bench_log, platform_log = work / "bench.db", work / "platform.db"
        projection.prefill(bench_log, args.events)
        platform = query.Platform(args.scale)
        platform_events = ab.prefill_platform(platform_log, args.scale)["events"]
        write = {}
        for label, log, events in (
            ("bench/projection.py's events", bench_log, args.events),
            (f"bench/query.py's platform at scale {args.scale}", platform_log, platform_events),
        ):
            print(label, flush=True)
            write[label] = write_costs(log, events, work, args.rounds)
        served = work / "served.db"
        projection.copy_db(platform_log, served)
        store = SQLiteStore(str(served))
        try:
            Projector(store, ONE_PROCESS).run_until_caught_up()
        finally:
            store.close()
        results = {
            "machine": servers.machine_facts(servers.working_tree()),
            "write_cost": write,
            "read_use": read_use(served, platform),
        }
    servers.write_results(args.out, results, markdown)


if __name__ == "__main__":
    main()
