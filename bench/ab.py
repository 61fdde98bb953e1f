"""A/B benchmark: two git revisions of the embrasure package, interleaved in one run.

Made for the package move (68555ca, flat modules, against 9c9fd67 and later, a package
per stage), and usable for any two revisions whose CLI, HTTP API and graph version agree.
Each side's package is copied with ``git archive`` (``servers.copy_source``) and every
process that measures it imports that copy. Measured, with the harnesses' own functions:

- ingest single events and 500-event batches: ``ingest.measure`` (a fresh ``embrasure
  serve --no-projector`` on a new SQLite file, wrk warm-up then the measured run, every
  acknowledged delivery counted in the log afterwards);
- projection throughput: ``projection.prefill`` (one log per side, through that side's
  ``SQLiteStore.append``) and ``projection.project_copy`` (the limits ``embrasure
  project`` runs with, a fresh copy of the log each time), in a child process that
  imports that side's copy;
  the same on bench/query.py's platform (``projection_platform``: every event a new job);
- projection on PostgreSQL (``projection_postgres``): the same events appended once per
  side to a database of the cluster at EMBRASURE_BENCH_PG, then each run projects a copy
  (``CREATE DATABASE … TEMPLATE``) with one projector in a child, as above;
- query latencies: one graph (``query.Platform``, loaded over HTTP and projected by ``embrasure
  project`` of side A; side B serves a copy its ``embrasure db upgrade`` moved to its
  schema), then each side's ``embrasure serve`` on it in turn, measured by
  ``query.measure_group`` (hub lineage, chain and hub column lineage, impact of a hub
  column, search); the answers' sizes are compared between the sides.

Every measurement runs in the order A B A B B A B A, twice (``--rounds``): a drift over
the run (the page cache, the disk, other people's jobs) falls on both sides alike, and
each adjacent pair gives one B/A ratio, 8 per figure. The report has, per figure, both medians, B/A
of the medians, the per-pair ratios, each side's spread, and the CPU the rest of the
machine used during the measured windows (from /proc, as each harness measures it).

Run ``python bench/ab.py --a 68555ca --b HEAD`` (about 18 minutes on this 2-core machine
when it is quiet, estimated from the quick runs and the harnesses' own timings: ingest 8,
projection 3, the query graph 2, queries 5; ``--rounds 1`` takes about 11; writes
bench/results/ab.{md,json}) or add ``--quick`` (A B B A once, 5 s ingest runs,
6,000 events projected, the query platform at scale 0.1 and 50 calls per group: a smoke
test, 2 to 3.5 minutes; writes under bench/results/tmp/).
Linux only (it reads /proc; installs wrk with apt-get if missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import ingest
import projection
import psycopg
import query
import servers
from ingest_load import BATCH, SINGLE, Workload, ensure_wrk, event_template

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
SCRATCH_DIR = RESULTS_DIR / "tmp"  # git-ignored

ORDER = "ABABBABA"
QUICK_ORDER = "ABBA"
PARTS = (
    "ingest_single",
    "ingest_batch",
    "projection",
    "projection_platform",
    "projection_postgres",
    "query",
)
# The PostgreSQL cluster of projection_postgres (bench/backends.py's, scripts/test's).
PG_ADMIN = os.environ.get("EMBRASURE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
QUERY_GROUPS = (
    "lineage_hub",
    "column_lineage_chain",
    "column_lineage_hub",
    "impact_hub_column",
    "search",
)
# The query platform's roots are chosen among its first 10% of jobs, as bench/query.py
# does, so the roots (and so the figures) are the ones query.py reports.
QUERY_FIRST_SHARE = 0.1
# What a query answer's size is summarised by (query.measure_group's summary).
ANSWER_KEYS = ("bytes", "nodes", "edges", "items", "results", "truncated_calls")


@dataclasses.dataclass(frozen=True)
class Metric:
    part: str  # a record's "part"
    label: str
    key: str  # the record's value
    higher_is_better: bool
    digits: int


def metrics() -> list[Metric]:
    found = [
        Metric("ingest single", "receipts/s", "req_per_s", True, 0),
        Metric(
            "ingest single", "event-loop CPU µs per request", "main_thread_us_per_req", False, 0
        ),
        Metric("ingest batch", "events/s", "events_per_s", True, 0),
        Metric("ingest batch", "event-loop CPU µs per request", "main_thread_us_per_req", False, 0),
        Metric("projection", "events/s", "events_per_s", True, 0),
        Metric("projection", "CPU µs per event", "cpu_us_per_event", False, 0),
        Metric("projection platform", "events/s", "events_per_s", True, 0),
        Metric("projection platform", "CPU µs per event", "cpu_us_per_event", False, 0),
        Metric("projection postgres", "events/s", "events_per_s", True, 0),
        Metric("projection postgres", "CPU µs per event", "cpu_us_per_event", False, 0),
    ]
    for group in QUERY_GROUPS:
        found += [
            Metric(f"query {group}", "p50 ms", "p50_ms", False, 1),
            Metric(f"query {group}", "p99 ms", "p99_ms", False, 1),
            Metric(f"query {group}", "server CPU ms per call", "server_cpu_ms_per_call", False, 1),
        ]
    return found


@dataclasses.dataclass(frozen=True)
class Config:
    a: str
    b: str
    order: str
    parts: tuple[str, ...]
    ingest_s: int  # each measured wrk run
    warmup_s: int
    projection_events: int
    scale: float  # of bench/query.py's platform
    calls: int  # per query group (the heavy one: a quarter)
    quiet_wait_s: int  # before each measurement, at most this long, for an idle machine
    out: Path  # results path without suffix
    workdir: Path | None


@dataclasses.dataclass(frozen=True)
class Side:
    label: str  # "A" or "B"
    rev: str
    code: str  # what servers.copy_source says it copied
    source: Path  # holds the copy's embrasure/


# -- ingest ---------------------------------------------------------------------------


def ingest_setup(
    source: Path, work: Path, duration_s: int, warmup_s: int, quiet_wait_s: int
) -> ingest.Setup:
    """What ``ingest.measure`` needs to measure the server of ``source``: wrk, the event
    template under ``work``, one measured run of ``duration_s`` per call."""
    template = work / "event-template.json"
    template.write_bytes(event_template())
    icfg = ingest.Config(
        repeats=1,
        duration_s=duration_s,
        warmup_s=warmup_s,
        parse_bodies=0,
        parse_trials=0,
        profile="never",
        quiet_wait_s=quiet_wait_s,
        rev=None,
        out=work / "ingest",
    )
    ingest.SCRATCH_DIR.mkdir(parents=True, exist_ok=True)  # measure's server directories
    return ingest.Setup(icfg, ensure_wrk(), template, source)


def run_ingest(
    cfg: Config, sides: dict[str, Side], workload: Workload, work: Path
) -> list[dict[str, Any]]:
    """``ingest.measure`` of Embrasure (no null receiver: the two sides are the pair)."""
    setups = {
        label: ingest_setup(s.source, work, cfg.ingest_s, cfg.warmup_s, cfg.quiet_wait_s)
        for label, s in sides.items()
    }
    records = []
    for slot, label in enumerate(cfg.order):
        print(f"  [{slot + 1}/{len(cfg.order)}] {label} ", end="", flush=True)
        r = ingest.measure("embrasure", workload, setups[label], slot)
        r.update(part=f"ingest {workload.name}", side=label, slot=slot)
        r["problems"] = _ingest_problems(r)
        records.append(r)
        print(
            f"{r['req_per_s']:,.0f} req/s {r['events_per_s']:,.0f} events/s, event loop "
            f"{r['main_thread_us_per_req'] or 0:,.0f} µs/req, others "
            f"{r['other_cpu_cores']:.2f} cores{_problem_text(r)}",
            flush=True,
        )
    return records


def _ingest_problems(r: dict[str, Any]) -> list[str]:
    """Anything that makes a run's throughput not the receiver's plain work."""
    problems = [f"HTTP {s}: {n}" for s, n in r["non_202"].items()]
    problems += [f"{kind} errors: {n}" for kind, n in r["socket_errors"].items()]
    problems += [f"warm-up HTTP {s}: {n}" for s, n in r["warmup_non_202"].items()]
    if r.get("lost_acknowledged"):
        problems.append(f"{r['lost_acknowledged']} acknowledged deliveries not in the log")
    receipts = r.get("receipts")
    if receipts and receipts["ok"] != receipts["checked"]:
        problems.append(f"receipts {receipts['ok']}/{receipts['checked']} found")
    if r.get("stored") is None:
        problems.append("the log could not be counted")
    if r.get("server_exit_code") not in (0, None):
        problems.append(f"server exit code {r['server_exit_code']}")
    return problems


def _problem_text(r: dict[str, Any]) -> str:
    return f"  PROBLEMS: {'; '.join(r['problems'])}" if r["problems"] else ""


# -- projection -----------------------------------------------------------------------


def _child(side: Side, *args: str) -> dict[str, Any]:
    """This file again, ``--child``, importing ``side``'s copy (PYTHONPATH comes before the
    editable install's import hook); its last line of output is a JSON object."""
    path = [str(side.source), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(side.source), *args]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"side {side.label} child {args[0]} failed:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def child_main(argv: Sequence[str]) -> None:
    """In a child started by ``_child``: prefill a log, or project a copy of one, with
    bench/projection.py's functions on the copy this process imports."""
    source, what, *args = argv
    import projection  # the embrasure it imports is the side's copy (PYTHONPATH)

    from embrasure.cli.main import projector_limits
    from embrasure.projector import worker
    from embrasure.settings import Settings

    imported = Path(str(worker.__file__)).resolve()
    if not imported.is_relative_to(Path(source).resolve()):
        raise RuntimeError(f"embrasure was imported from {imported}, not from {source}")
    projection.tune_gc()  # as `embrasure project` runs, and bench/projection.py
    if what == "prefill":
        log, events = args
        fill = projection.prefill(Path(log), int(events))
        print(json.dumps(dataclasses.asdict(fill) | {"events_per_s": fill.events_per_s}))
    elif what == "prefill-platform":
        log, scale = args
        print(json.dumps(prefill_platform(Path(log), float(scale))))
    elif what == "prefill-postgres":
        url, events = args
        print(json.dumps(prefill_postgres(url, int(events))))
    elif what == "project-postgres":
        url, quiet_wait = args
        print(json.dumps(project_postgres(url, float(quiet_wait))))
    else:
        log, target, quiet_wait = args
        # As `embrasure project` runs (its settings' defaults: since issue 49, 10,000
        # events a transaction), with EMBRASURE_PROJECTOR_PROCESSES from this run's
        # environment (2: the two processes taking turns; a side without the setting
        # ignores it).
        wanted = {k: v for k, v in os.environ.items() if k == "EMBRASURE_PROJECTOR_PROCESSES"}
        limits = projector_limits(Settings.load({}, environ=wanted))
        run = projection.project_copy(Path(log), Path(target), "default", limits, float(quiet_wait))
        print(json.dumps(dataclasses.asdict(run)))


def prefill_platform(log: Path, scale: float) -> dict[str, Any]:
    """bench/query.py's platform at ``scale`` (its every event a new job with ~25 column
    mappings) appended to a new log, 500 events a delivery, through this side's store."""
    from embrasure.model import DeliveryDraft, utc_now
    from embrasure.store.sqlite import SQLiteStore

    platform = query.Platform(scale)
    bodies, events = platform.bodies(platform.tasks, 500)
    store = SQLiteStore(str(log))
    started = time.perf_counter()
    try:
        for body in bodies:
            count = body.count(b'"eventType"')
            digest = hashlib.sha256(body).hexdigest()
            draft = DeliveryDraft("default", None, digest, body, "batch", count, (), utc_now())
            store.append([draft])
    finally:
        store.close()
    seconds = time.perf_counter() - started
    projection.checkpoint(log)
    return {
        "events": events,
        "events_per_s": events / seconds,
        "db_bytes": projection.db_size(log),
    }


def prefill_postgres(url: str, events: int) -> dict[str, Any]:
    """bench/projection.py's events, 500 a delivery, appended to the PostgreSQL database
    ``url`` through this side's store (as ``projection.prefill`` does to a SQLite log)."""
    from embrasure.model import DeliveryDraft, utc_now
    from embrasure.store import open_store

    store = open_store(url)
    started = time.perf_counter()
    try:
        for body, count in projection.batch_bodies(projection.Platform(), 0, events, 500):
            digest = hashlib.sha256(body).hexdigest()
            draft = DeliveryDraft("default", None, digest, body, "batch", count, (), utc_now())
            store.append([draft])
    finally:
        store.close()
    return {"events": events, "events_per_s": events / (time.perf_counter() - started)}


def project_postgres(url: str, quiet_wait_s: float) -> dict[str, Any]:
    """One projector, in this process, over the whole log of ``url`` with the default
    limits (as ``projection.project_copy`` on SQLite); every item must be projected."""
    from embrasure.projector.worker import Projector
    from embrasure.store import open_store
    from embrasure.store.rows import DeliveryOutcome

    projection.wait_for_quiet(quiet_wait_s)
    store = open_store(url)
    try:
        busy, cpu = projection.system_busy_seconds(), time.process_time()
        started = time.perf_counter()
        Projector(store).run_until_caught_up()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        other = max(0.0, (projection.system_busy_seconds() - busy - cpu) / seconds)
        with store.reader() as reader:
            outcomes = reader.rows(DeliveryOutcome)
    finally:
        store.close()
    projected = sum(o.projected for o in outcomes)
    quarantined = sum(o.quarantined for o in outcomes)
    if quarantined:
        raise RuntimeError(f"{quarantined} items quarantined, {projected} projected")
    return {
        "events": projected,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "other_busy_cores": other,
    }


def _pg_admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(sql)


def _pg_url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def run_projection_postgres(cfg: Config, sides: dict[str, Side]) -> list[dict[str, Any]]:
    """bench/projection.py's events on PostgreSQL: a log per side, filled once by that
    side's store, then every run projects a fresh copy of it (``CREATE DATABASE …
    TEMPLATE``) in a child importing that side's copy."""
    prefix = f"embrasure_ab_{secrets.token_hex(4)}"
    fills = {label: f"{prefix}_fill_{label.lower()}" for label in sides}
    records = []
    try:
        for label, side in sides.items():
            _pg_admin(f"CREATE DATABASE {fills[label]}")
            fill = _child(
                side, "prefill-postgres", _pg_url(fills[label]), str(cfg.projection_events)
            )
            print(f"  {label}: pre-filled {fill['events']:,} events "
                  f"({fill['events_per_s']:,.0f} events/s)", flush=True)  # fmt: skip
        for slot, label in enumerate(cfg.order):
            print(f"  [{slot + 1}/{len(cfg.order)}] {label} ", end="", flush=True)
            run_db = f"{prefix}_run"
            _pg_admin(f"CREATE DATABASE {run_db} TEMPLATE {fills[label]}")
            try:
                run = _child(
                    sides[label], "project-postgres", _pg_url(run_db), str(cfg.quiet_wait_s)
                )
            finally:
                _pg_admin(f"DROP DATABASE IF EXISTS {run_db} WITH (FORCE)")
            if run["events"] != cfg.projection_events:
                raise RuntimeError(f"side {label} projected {run['events']:,} events")
            records.append(_projection_record(run, "projection postgres", label, slot))
    finally:
        for name in fills.values():
            _pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return records


def _projection_record(run: dict[str, Any], part: str, label: str, slot: int) -> dict[str, Any]:
    """A projection child's figures as a record of ``part``; printed on the run's line."""
    r = run | {
        "part": part,
        "side": label,
        "slot": slot,
        "events_per_s": run["events"] / run["seconds"],
        "cpu_us_per_event": run["cpu_seconds"] / run["events"] * 1e6,
        "other_cpu_cores": run["other_busy_cores"],
        "problems": [],
    }
    print(
        f"{r['events_per_s']:,.0f} events/s, CPU {r['cpu_us_per_event']:,.0f} µs/event, "
        f"others {r['other_cpu_cores']:.2f} cores",
        flush=True,
    )
    return r


def run_projection(
    cfg: Config, sides: dict[str, Side], work: Path, part: str = "projection"
) -> list[dict[str, Any]]:
    """``part``: bench/projection.py's events (``projection``), or bench/query.py's
    platform at ``cfg.scale`` (``projection platform``)."""
    logs = {label: work / f"projection-log-{label}.db" for label in sides}
    for label, side in sides.items():
        if part == "projection":
            fill = _child(side, "prefill", str(logs[label]), str(cfg.projection_events))
        else:
            fill = _child(side, "prefill-platform", str(logs[label]), str(cfg.scale))
        print(
            f"  {label}: pre-filled {fill['events']:,} events "
            f"({fill['events_per_s']:,.0f} events/s, {fill['db_bytes'] / 2**20:,.0f} MiB)",
            flush=True,
        )
    target = work / "projection-projected.db"
    records = []
    for slot, label in enumerate(cfg.order):
        print(f"  [{slot + 1}/{len(cfg.order)}] {label} ", end="", flush=True)
        run = _child(sides[label], "project", str(logs[label]), str(target), str(cfg.quiet_wait_s))
        records.append(_projection_record(run, part, label, slot))
    for log in (*logs.values(), target):
        projection.remove_db(log)
    return records


# -- queries --------------------------------------------------------------------------


def graph_version(source: Path) -> int | None:
    """GRAPH_VERSION in a copy, read from the source (it moved: store/graph_schema.py,
    then store/schema.py), so this process imports neither side."""
    for path in sorted((source / "embrasure" / "store").glob("*.py")):
        found = re.search(r"^GRAPH_VERSION = (\d+)", path.read_text(), re.MULTILINE)
        if found:
            return int(found.group(1))
    return None


def run_query(cfg: Config, sides: dict[str, Side], work: Path) -> list[dict[str, Any]]:
    versions = {label: graph_version(s.source) for label, s in sides.items()}
    if len(set(versions.values())) != 1 or None in versions.values():
        raise SystemExit(f"the sides' graph versions differ or are unknown: {versions}")
    builder = sides["A"]
    platform = query.Platform(cfg.scale)
    tasks = platform.tasks
    first = max(1, round(len(tasks) * QUERY_FIRST_SHARE))
    groups = [g for g in query.query_groups(platform, first, cfg.calls) if g.name in QUERY_GROUPS]
    db = work / "query.db"
    bodies, events = platform.bodies(tasks, 200)
    print(f"  {events:,} events of {len(tasks):,} jobs; loading and projecting with A", flush=True)
    server = servers.start_embrasure(work, db, builder.source)
    try:
        loaded = query.load(server.url, bodies, events, 4)
    finally:
        server.stop()
    del bodies
    projected = query.project(work, builder.source, db, events)
    facts = query.graph_facts(db)
    print(
        f"  loaded in {loaded['seconds']:.0f} s, projected in {projected['seconds']:.0f} s; "
        f"items {facts['items']}",
        flush=True,
    )
    dbs = {label: _served_copy(work, db, label, side.source) for label, side in sides.items()}
    records = []
    for slot, label in enumerate(cfg.order):
        server = servers.start_embrasure(work, dbs[label], sides[label].source)
        try:
            with httpx.Client(base_url=server.url, timeout=600) as client:
                for group in groups:
                    summary, _ = query.measure_group(
                        client, server, group, quiet_wait_s=cfg.quiet_wait_s
                    )
                    records.append(_query_record(summary, group.name, label, slot))
        finally:
            server.stop()
        mine = [r for r in records if r["slot"] == slot]
        print(
            f"  [{slot + 1}/{len(cfg.order)}] {label} "
            + ", ".join(f"{r['part'].removeprefix('query ')} p50 {r['p50_ms']:.1f}" for r in mine)
            + f" ms; others {statistics.median(r['other_cpu_cores'] for r in mine):.2f} cores"
            + "".join(_problem_text(r) for r in mine),
            flush=True,
        )
    for path in {db, *dbs.values()}:
        projection.remove_db(path)
    return records


def _served_copy(work: Path, db: Path, label: str, source: Path) -> Path:
    """The graph side ``label`` serves: A's own, or a copy that ``embrasure db upgrade``
    of that side moved to its schema (a newer side refuses an older file; an upgrade
    that has nothing to do leaves the copy as it was)."""
    if label == "A":
        return db
    copy = work / f"query-{label}.db"
    for source_file, copy_file in zip(
        servers.sqlite_files(db), servers.sqlite_files(copy), strict=True
    ):
        if source_file.exists():
            shutil.copyfile(source_file, copy_file)
    subprocess.run(
        [sys.executable, "-m", "embrasure", "db", "upgrade", "--db", f"sqlite:///{copy}"],
        check=True,
        cwd=work,
        env=servers.child_env(source),
        stdout=subprocess.DEVNULL,
    )
    return copy


def _query_record(summary: dict[str, Any], group: str, label: str, slot: int) -> dict[str, Any]:
    problems = []
    if summary["non_200"]:
        problems.append(f"{summary['non_200']} non-200, e.g. {summary['non_200_example']}")
    return {
        "part": f"query {group}",
        "side": label,
        "slot": slot,
        "calls": summary["calls"],
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
        "server_cpu_ms_per_call": summary["server_cpu_ms_per_call"],
        "other_cpu_cores": summary["others_busy_cores"],
        "answers": {key: summary[key] for key in ANSWER_KEYS},
        "problems": problems,
    }


# -- the summary ----------------------------------------------------------------------


def _spread(values: Sequence[float]) -> float:
    """Half the range over the median: ±this share around it holds every run."""
    return (max(values) - min(values)) / 2 / statistics.median(values)


def summarise(records: list[dict[str, Any]], order: str) -> list[dict[str, Any]]:
    rows = []
    for metric in metrics():
        by_slot = {
            r["slot"]: r
            for r in records
            if r["part"] == metric.part and r.get(metric.key) is not None
        }
        if not by_slot:
            continue
        a = [r[metric.key] for r in by_slot.values() if r["side"] == "A"]
        b = [r[metric.key] for r in by_slot.values() if r["side"] == "B"]
        if not a or not b:
            continue
        pairs = []
        for first in range(0, len(order) - 1, 2):
            pair = [by_slot.get(first), by_slot.get(first + 1)]
            if all(pair):
                value = {r["side"]: r[metric.key] for r in pair if r}
                pairs.append(value["B"] / value["A"])
        worse = [p < 1 if metric.higher_is_better else p > 1 for p in pairs]
        better = [p > 1 if metric.higher_is_better else p < 1 for p in pairs]
        if pairs and all(worse):
            verdict = "B worse in every pair"
        elif pairs and all(better):
            verdict = "B better in every pair"
        else:
            verdict = "mixed or equal: within noise"
        others = [r["other_cpu_cores"] for r in by_slot.values()]
        rows.append(
            {
                "part": metric.part,
                "metric": metric.label,
                "key": metric.key,
                "higher_is_better": metric.higher_is_better,
                "digits": metric.digits,
                "a_median": statistics.median(a),
                "b_median": statistics.median(b),
                "ratio": statistics.median(b) / statistics.median(a),
                "pair_ratios": pairs,
                "a_runs": a,
                "b_runs": b,
                "a_spread": _spread(a),
                "b_spread": _spread(b),
                "others_median": statistics.median(others),
                "others_max": max(others),
                "verdict": verdict,
            }
        )
    return rows


def answer_check(records: list[dict[str, Any]]) -> dict[str, str]:
    """Per query group: whether every slot's answers had the same sizes (both sides)."""
    checks = {}
    for group in QUERY_GROUPS:
        mine = [r for r in records if r["part"] == f"query {group}"]
        if not mine:
            continue
        seen = {
            side: {json.dumps(r["answers"], sort_keys=True) for r in mine if r["side"] == side}
            for side in "AB"
        }
        if len(seen["A"] | seen["B"]) == 1:
            checks[group] = "same answer sizes in every run"
        elif seen["A"].isdisjoint(seen["B"]) and len(seen["A"]) == len(seen["B"]) == 1:
            checks[group] = "ANSWERS DIFFER between A and B"
        else:
            checks[group] = "answer sizes vary between runs of one side"
    return checks


# -- the report -----------------------------------------------------------------------


def _num(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for row in rows:
        d = row["digits"]
        out.append(
            [
                row["part"],
                row["metric"],
                "higher" if row["higher_is_better"] else "lower",
                _num(row["a_median"], d),
                _num(row["b_median"], d),
                f"{row['ratio']:.3f}",
                " ".join(f"{p:.2f}" for p in row["pair_ratios"]),
                f"±{row['a_spread']:.0%}",
                f"±{row['b_spread']:.0%}",
                f"{row['others_median']:.2f} / {row['others_max']:.2f}",
                row["verdict"],
            ]
        )
    return out


HEADERS = [
    "measurement",
    "figure",
    "better",
    "A median",
    "B median",
    "B/A",
    "B/A per pair",
    "A spread",
    "B spread",
    "others busy (median / max cores)",
    "verdict",
]


def markdown(results: dict[str, Any]) -> str:
    m, c = results["machine"], results["config"]
    sides = results["sides"]
    problems = [
        f"- {r['part']}, {r['side']} run {r['slot'] + 1}: {'; '.join(r['problems'])}"
        for r in results["records"]
        if r["problems"]
    ]
    problems += [f"- {part} failed: {why}" for part, why in results["failed_parts"].items()]
    lines = [
        "# A/B: " + " against ".join(f"{k} = `{v['rev']}` ({v['code']})" for k, v in sides.items()),
        "",
        f"Run {m['date']} by `bench/ab.py` (its docstring says what each part runs). Machine: "
        f"{m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, SQLite {m['sqlite']}. "
        f"{results['elapsed_s'] / 60:.1f} minutes in all ("
        + ", ".join(f"{k} {v / 60:.1f}" for k, v in results["part_seconds"].items())
        + ").",
        "",
        f"Order of every measurement: {' '.join(c['order'])} (adjacent runs are the pairs). "
        f"Ingest: {c['ingest_s']} s measured after {c['warmup_s']} s of warm-up, a fresh "
        f"server each run. Projection: {c['projection_events']:,} events, default limits. "
        f"Queries: bench/query.py's platform at scale {c['scale']}, {c['calls']} calls per "
        "group (the limit=10000 hub column lineage a quarter of them), on one graph "
        "projected by A (B serves a copy its `db upgrade` moved to its schema). "
        "Before each measurement the harness waits up to "
        f"{c['quiet_wait_s']} s for other jobs to leave the CPU.",
        "",
        "*Spread*: ± half the range of one side's runs around their median. *Others busy*: "
        "the CPU the rest of the machine used during the measured windows (2.0 = both "
        "cores). *Verdict*: B worse (or better) in every adjacent pair, else mixed; a "
        "verdict for one figure is a flag to read with its spread, not a test.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *("| " + " | ".join(cells) + " |" for cells in table_rows(results["summary"])),
        "",
    ]
    if results["answers"]:
        lines += [
            "Query answers (sizes: bytes, nodes, edges, items, results, truncated calls): "
            + "; ".join(f"{k}: {v}" for k, v in results["answers"].items())
            + ".",
            "",
        ]
    lines += ["Problems seen: " + ("none." if not problems else ""), *problems, ""]
    lines += [f"Raw figures: [{Path(c['out']).name}.json]({Path(c['out']).name}.json).", ""]
    return "\n".join(lines)


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [HEADERS, *table_rows(rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADERS))]
    for row in cells:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


# -- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--a", required=True, help="side A: a git revision (the baseline)")
    p.add_argument("--b", default="HEAD", help="side B: a git revision (default HEAD)")
    p.add_argument("--quick", action="store_true", help="A B B A, small: a smoke test")
    p.add_argument("--rounds", type=int, default=2, help="repeats of A B A B B A B A")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated of {PARTS}")
    p.add_argument("--ingest-seconds", type=int, help="measured seconds per ingest run")
    p.add_argument("--events", type=int, help="events in the projection log")
    p.add_argument("--scale", type=float, help="bench/query.py's platform scale")
    p.add_argument("--calls", type=int, help="calls per query group")
    p.add_argument("--quiet-wait", type=int, help="seconds to wait for an idle machine")
    p.add_argument("--out", type=Path, help="results path without suffix")
    p.add_argument("--workdir", type=Path, help="where the copies and DB files go")
    args = p.parse_args(argv)
    parts = tuple(part for part in args.parts.split(",") if part)
    if not set(parts) <= set(PARTS):
        p.error(f"--parts: choose among {', '.join(PARTS)}")
    quick = args.quick
    default_out = SCRATCH_DIR / "ab-quick" if quick else RESULTS_DIR / "ab"
    return Config(
        a=args.a,
        b=args.b,
        order=QUICK_ORDER if quick else ORDER * args.rounds,
        parts=parts,
        ingest_s=args.ingest_seconds or (5 if quick else 10),
        warmup_s=2 if quick else 3,
        projection_events=args.events or (6_000 if quick else 20_000),
        scale=args.scale or (0.1 if quick else 1.0),
        calls=args.calls or (50 if quick else 100),
        quiet_wait_s=args.quiet_wait if args.quiet_wait is not None else (2 if quick else 8),
        out=args.out or default_out,
        workdir=args.workdir,
    )


def main(argv: Sequence[str] | None = None) -> None:
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["--child"]:
        child_main(given[1:])
        return
    cfg = parse_args(given)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="embrasure-ab-", dir=cfg.workdir))
    records: list[dict[str, Any]] = []
    part_seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    try:
        sides = {}
        for label, rev in (("A", cfg.a), ("B", cfg.b)):
            source = work / f"src-{label}"
            sides[label] = Side(label, rev, servers.copy_source(source, rev), source)
            print(f"{label} = {rev}: {sides[label].code}", flush=True)
        runs = {
            "ingest_single": lambda: run_ingest(cfg, sides, SINGLE, work),
            "ingest_batch": lambda: run_ingest(cfg, sides, BATCH, work),
            "projection": lambda: run_projection(cfg, sides, work),
            "projection_platform": lambda: run_projection(cfg, sides, work, "projection platform"),
            "projection_postgres": lambda: run_projection_postgres(cfg, sides),
            "query": lambda: run_query(cfg, sides, work),
        }
        for part in cfg.parts:
            print(part.replace("_", " "), flush=True)
            part_started = time.monotonic()
            try:
                records += runs[part]()
            except Exception as error:  # one part's failure must not lose the others'
                traceback.print_exc()
                failed[part] = f"{type(error).__name__}: {str(error).strip()[:500]}"
            part_seconds[part] = time.monotonic() - part_started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarise(records, cfg.order)
    results: dict[str, Any] = {
        "machine": servers.machine_facts(f"A {sides['A'].code}, B {sides['B'].code}"),
        "sides": {k: {"rev": s.rev, "code": s.code} for k, s in sides.items()},
        "config": dataclasses.asdict(cfg) | {"out": str(cfg.out), "workdir": str(cfg.workdir)},
        "elapsed_s": time.monotonic() - started,
        "part_seconds": part_seconds,
        "failed_parts": failed,
        "summary": summary,
        "answers": answer_check(records),
        "records": records,
    }
    print()
    print_table(summary)
    for group, check in results["answers"].items():
        print(f"answers {group}: {check}")
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{cfg.out}.json").write_text(json.dumps(results, indent=2) + "\n")
    Path(f"{cfg.out}.md").write_text(markdown(results))
    print(f"\n{results['elapsed_s'] / 60:.1f} minutes; wrote {cfg.out}.md and {cfg.out}.json")


if __name__ == "__main__":
    main()
