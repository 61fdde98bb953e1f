"""Ingest benchmark: Embrasure's durable receiver beside a null receiver, in one run.

What it measures, side by side on this machine (the machine is shared and noisy, so only
figures taken in the same run are compared):

- single events: the null receiver (bench/null_receiver.py: the same Starlette + uvicorn +
  uvloop + httptools stack, one process, a route that reads the body, orjson-parses it
  and answers 202) against ``embrasure serve --no-projector`` (one process: strict parse,
  SHA-256, group commit to SQLite in WAL mode with synchronous=FULL, 202 after the
  fsync). wrk drives 64 keep-alive connections; bench/ingest.lua makes every event unique.
- 500-event batches over 8 connections, against the same two servers.
- the parse ceiling (bench/parse_ceiling.py): the fastest one process parses the same
  batch bodies with orjson, and the receiver's strict parse for context.

Targets (the issue): single-event durable ingest >= 60% of the null receiver's requests/s;
batched ingest >= 75% of the parse ceiling. Every measurement repeats, interleaved (null,
embrasure, null, embrasure…), and medians are reported. A missed target gets a py-spy
profile of Embrasure under the same load (--profile).

The embrasure package is copied at the start (the working tree, or --rev REV from git)
and every server runs that copy, so a run measures one version while people edit.

``python bench/ingest.py --backends [--repeats N --seconds S]`` measures SQLite beside
PostgreSQL instead, with 1 and 2 receiver processes (bench/backends.py).

Run: ``python bench/ingest.py`` (5 to 6 minutes; writes bench/results/ingest.{md,json})
or ``python bench/ingest.py --quick`` (one short repeat, for smoke tests; writes under
bench/results/tmp/). Linux only: it reads /proc, and installs wrk with apt-get if missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import ingest_report
import parse_ceiling
import pyspy
import servers
from ingest_load import (
    BATCH,
    SINGLE,
    Workload,
    WrkResult,
    batch_bodies,
    ensure_wrk,
    event_template,
    parse_wrk,
    run_wrk,
    wrk_argv,
)

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
SCRATCH_DIR = RESULTS_DIR / "tmp"  # git-ignored: databases, logs, the source copy

SINGLE_TARGET = 0.45  # the receiver alone, of the null receiver's requests/s
BATCH_TARGET = 0.75  # the receiver alone, of the parse ceiling's events/s
SERVE_TARGET = 0.80  # serve as users run it, of the receiver alone (issue 41)
DRAIN_TARGET_S = 10.0  # after the load, until the projector has caught up
WORKLOADS = (SINGLE, BATCH)
# The null receiver; the receiver alone (serve --no-projector, one process); serve as users
# run it (a process per stage, docs/operations.md#processes); and serve's stages as threads
# of one process (--single-process: what serve was before).
SERVERS = ("null", "embrasure", "serve", "serve-1p")
PROJECTING = ("serve", "serve-1p")
DRAIN_WAIT_S = 120.0
# wrk seeds: distinct per wrk run against one server, so no body repeats on it. The parse
# ceiling renders its bodies with its own seed.
WARMUP_SEED, MEASURE_SEED, PROFILE_SEED, PARSE_SEED = 0, 1, 2, 15
# Per-run figures whose medians the summary reports.
MEDIANS = (
    "req_per_s",
    "events_per_s",
    "p50_ms",
    "p99_ms",
    "rss_mib",
    "hwm_mib",
    "server_cpu_cores",
    "main_thread_cpu_cores",
    "main_thread_us_per_req",
    "wrk_cpu_cores",
    "other_cpu_cores",
    "file_bytes_per_event",
    "write_bytes_per_event",
    "backlog_after",
    "drain_s",
)


@dataclasses.dataclass(frozen=True)
class Config:
    repeats: int
    duration_s: int  # the measured wrk run
    warmup_s: int  # a wrk run before it on the same server, discarded
    parse_bodies: int  # distinct 500-event bodies the parse ceiling cycles through
    parse_trials: int  # passes over them per variant; the fastest pass counts
    profile: str  # "auto" (missed targets), "always" or "never"
    quiet_wait_s: int  # before each measurement, wait up to this long for an idle machine
    rev: str | None  # a git revision to measure; None: the working tree
    out: Path  # results path without suffix


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every measurement of one run shares."""

    cfg: Config
    wrk: str
    template: Path  # the event template file bench/ingest.lua reads
    source: Path  # holds the copy of the embrasure package every server imports


# -- set-up -----------------------------------------------------------------------------


def machine_facts(wrk: str, measured_code: str) -> dict[str, Any]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    # wrk -v prints "wrk debian/4.1.0-3+b2 [epoll] Copyright (C) 2012 Will Glozer".
    wrk_version = subprocess.run([wrk, "-v"], capture_output=True, text=True).stdout
    wrk_version = wrk_version.partition(" Copyright")[0]
    libraries = ("starlette", "uvicorn", "uvloop", "httptools", "orjson", "msgspec", "jiter")
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "wrk": wrk_version.splitlines()[0] if wrk_version else "?",
        "libraries": {name: metadata.version(name) for name in libraries},
        "embrasure": measured_code,
    }


# -- one measured server ------------------------------------------------------------------


@contextmanager
def running(kind: str, work_dir: Path, source: Path) -> Iterator[servers.Server]:
    """A fresh server: the null receiver, or Embrasure on a new SQLite file (SERVERS)."""
    if kind == "null":
        server = servers.start_null_receiver(work_dir)
    else:
        server = servers.start_embrasure(
            work_dir,
            work_dir / "embrasure.db",
            source,
            projector=kind in PROJECTING,
            single_process=kind != "serve",
        )
    try:
        yield server
    finally:
        server.stop()


def db_file_bytes(db: Path) -> dict[str, int]:
    wal = db.with_name(db.name + "-wal")
    return {"db_bytes": db.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0}


def stored_counts(db: Path) -> dict[str, int] | None:
    """Deliveries and events in the log, read after the server stopped (None if the
    schema is not the one this benchmark knows)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            deliveries, events = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(item_count), 0) FROM deliveries"
            ).fetchone()
        return {"deliveries": deliveries, "events": events}
    except sqlite3.Error:
        return None


def verify_receipts(url: str, ids: list[str], per_body: int) -> dict[str, int]:
    """Look acknowledged deliveries up: each must exist, holding the events sent."""
    ok = 0
    for delivery_id in ids:
        response = httpx.get(f"{url}/api/v1/deliveries/{delivery_id}", timeout=10)
        if response.status_code == 200:
            body = response.json()
            ok += body.get("item_count") == per_body and body.get("invalid_item_count") == 0
    return {"checked": len(ids), "ok": ok}


@dataclasses.dataclass
class Observed:
    """What one measurement saw, before it is reduced to a record."""

    warm: WrkResult
    run: WrkResult
    cpu: tuple[servers.CpuSnapshot, servers.CpuSnapshot]
    written_bytes: int  # by the server during the measured run
    memory_kib: dict[str, int]
    disk: dict[str, int] = dataclasses.field(default_factory=dict)
    receipts: dict[str, int] | None = None
    stored: dict[str, int] | None = None
    exit_code: int | None = None
    backlog_after: int | None = None  # items not yet projected when the load stopped
    drain_s: float | None = None  # then until the projector had them all


def measure(kind: str, workload: Workload, setup: Setup, repeat: int) -> dict[str, Any]:
    """Start a fresh server, warm it up, measure one wrk run, collect /proc and disk facts."""
    cfg, wrk, template = setup.cfg, setup.wrk, setup.template
    waited = servers.wait_for_quiet(cfg.quiet_wait_s)
    work_dir = Path(tempfile.mkdtemp(prefix=f"{kind}-{workload.name}-", dir=SCRATCH_DIR))
    try:
        with running(kind, work_dir, setup.source) as server:
            warm = run_wrk(wrk, server.url, workload, cfg.warmup_s, WARMUP_SEED, template)
            cpu0, io0 = servers.cpu_snapshot(server.pid), servers.write_bytes(server.pid)
            run = run_wrk(wrk, server.url, workload, cfg.duration_s, MEASURE_SEED, template)
            cpu1, io1 = servers.cpu_snapshot(server.pid), servers.write_bytes(server.pid)
            seen = Observed(warm, run, (cpu0, cpu1), io1 - io0, servers.memory_kib(server.pid))
            if kind in PROJECTING:
                seen.backlog_after, seen.drain_s = drain(server.url)
            if server.db_path:
                seen.disk = db_file_bytes(server.db_path)  # before shutdown checkpoints
                seen.receipts = verify_receipts(
                    server.url, run.sample_ids, workload.events_per_body
                )
            seen.exit_code = server.stop()
        if server.db_path:
            seen.stored = stored_counts(server.db_path)
        return {**run_record(kind, workload, repeat, seen), "waited_for_quiet_s": waited}
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)  # a batch run writes ~1 GB


def backlog_items(url: str) -> int:
    overview = httpx.get(f"{url}/api/v1/overview", params={"runs": 0}, timeout=30).json()
    return int(overview["backlog"]["items"])


def drain(url: str) -> tuple[int, float | None]:
    """The backlog when the load stopped, and the seconds until it was empty (None: not
    within DRAIN_WAIT_S)."""
    started, left = time.monotonic(), backlog_items(url)
    while backlog_items(url) > 0:
        if time.monotonic() - started > DRAIN_WAIT_S:
            return left, None
        time.sleep(0.1)
    return left, time.monotonic() - started


def run_record(kind: str, workload: Workload, repeat: int, seen: Observed) -> dict[str, Any]:
    """One measurement as a flat JSON-able record; throughput counts 202s only."""
    before, after = seen.cpu
    run, warm = seen.run, seen.warm
    wall = after.wall - before.wall
    accepted = run.count(202)
    server_cpu = after.process - before.process
    record: dict[str, Any] = {
        "server": kind,
        "workload": workload.name,
        "repeat": repeat,
        "duration_s": run.duration_s,
        "accepted": accepted,
        "req_per_s": accepted / run.duration_s,
        "events_per_s": accepted * workload.events_per_body / run.duration_s,
        **{f"{k}_ms": v for k, v in run.latency_ms.items()},
        "non_202": {str(s): n for s, n in run.statuses.items() if s != 202},
        "socket_errors": {k: v for k, v in run.socket_errors.items() if v},
        "warmup_non_202": {str(s): n for s, n in warm.statuses.items() if s != 202},
        "warmup_socket_errors": {k: v for k, v in warm.socket_errors.items() if v},
        "rss_mib": seen.memory_kib.get("VmRSS", 0) / 1024,
        "hwm_mib": seen.memory_kib.get("VmHWM", 0) / 1024,
        # CPU in cores (1.0 = one core busy for the whole window). "other" is everything
        # else on the machine: another user's job makes a run slower, and this shows it.
        "server_cpu_cores": server_cpu / wall,
        "main_thread_cpu_cores": (after.main_thread - before.main_thread) / wall,
        # Every request's Python work runs on the event-loop thread: its CPU per request
        # is the cost that caps a one-process server, whatever else is waited for.
        "main_thread_us_per_req": (after.main_thread - before.main_thread) / accepted * 1e6
        if accepted
        else None,
        "wrk_cpu_cores": run.wrk_cpu_s / run.duration_s,
        "other_cpu_cores": max(
            0.0, (after.system_busy - before.system_busy - server_cpu - run.wrk_cpu_s) / wall
        ),
        "server_exit_code": seen.exit_code,
        "backlog_after": seen.backlog_after,
        "drain_s": seen.drain_s,
    }
    if kind != "null":
        record.update(_durability(seen, accepted * workload.events_per_body))
    return record


def _durability(seen: Observed, events: int) -> dict[str, Any]:
    """Disk cost per event, and whether every acknowledged delivery is in the log."""
    acked = seen.warm.count(202) + seen.run.count(202)
    facts: dict[str, Any] = {
        **seen.disk,
        "write_bytes_per_event": seen.written_bytes / events if events else None,
        "acked_deliveries": acked,
        "stored": seen.stored,
        "receipts": seen.receipts,
    }
    if seen.stored and seen.stored["events"]:
        # The files after the run over every event the log holds (warm-up included).
        files = seen.disk["db_bytes"] + seen.disk["wal_bytes"]
        facts["file_bytes_per_event"] = files / seen.stored["events"]
        facts["lost_acknowledged"] = max(0, acked - seen.stored["deliveries"])
    return facts


# -- profile ----------------------------------------------------------------------------------


def profile_embrasure(workload: Workload, setup: Setup, py_spy: str) -> dict[str, Any]:
    """Embrasure under the same load, sampled by py-spy (native frames) mid-run."""
    cfg, wrk, template = setup.cfg, setup.wrk, setup.template
    work_dir = Path(tempfile.mkdtemp(prefix=f"profile-{workload.name}-", dir=SCRATCH_DIR))
    out = Path(f"{cfg.out}-profile-{workload.name}.txt")
    seconds = max(3, cfg.duration_s - 4)
    servers.wait_for_quiet(cfg.quiet_wait_s)
    try:
        with running("embrasure", work_dir, setup.source) as server:
            run_wrk(wrk, server.url, workload, cfg.warmup_s, WARMUP_SEED, template)
            argv = wrk_argv(wrk, server.url, workload, seconds + 4, PROFILE_SEED, template)
            wrk_proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            time.sleep(2)  # into the steady state before sampling
            cpu0 = servers.cpu_snapshot(server.pid)
            pyspy.record(py_spy, server.pid, seconds, out)
            cpu1 = servers.cpu_snapshot(server.pid)
            stdout, _ = wrk_proc.communicate(timeout=seconds + 120)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    run = parse_wrk(stdout, 0.0)
    wall = cpu1.wall - cpu0.wall
    return {
        "workload": workload.name,
        "seconds": seconds,
        "raw_stacks": out.name,
        # py-spy pauses the server to unwind native stacks: this is not a measurement.
        "req_per_s_while_profiled": run.count(202) / run.duration_s,
        "non_202": {str(s): n for s, n in run.statuses.items() if s != 202},
        "server_cpu_cores": (cpu1.process - cpu0.process) / wall,
        "main_thread_cpu_cores": (cpu1.main_thread - cpu0.main_thread) / wall,
        "threads": pyspy.summarise(out),
    }


def run_profiles(setup: Setup, summary: dict[str, Any]) -> list[dict[str, Any]]:
    missed = [w for w in WORKLOADS if not summary["targets"][w.name]["met"]]
    wanted = {"auto": missed, "always": list(WORKLOADS), "never": []}[setup.cfg.profile]
    py_spy = pyspy.ensure_py_spy() if wanted else None
    if py_spy is None:
        return []
    profiles = []
    for workload in wanted:
        print(f"profiling embrasure under the {workload.name} load", flush=True)
        profiles.append(profile_embrasure(workload, setup, py_spy))
    return profiles


# -- the whole run -----------------------------------------------------------------------------


def run_all(setup: Setup) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    """Every repeat: null and embrasure interleaved per workload, then the parse ceiling."""
    cfg = setup.cfg
    receiver_parse = parse_ceiling.load_receiver_parse(setup.source)
    bodies = batch_bodies(
        setup.template.read_bytes(), cfg.parse_bodies, BATCH.events_per_body, PARSE_SEED
    )
    runs: list[dict[str, Any]] = []
    parses: list[dict[str, float]] = []
    for repeat in range(1, cfg.repeats + 1):
        for workload in WORKLOADS:
            for kind in SERVERS:
                print(f"[{repeat}/{cfg.repeats}] {workload.name:6} {kind:9} ", end="", flush=True)
                runs.append(measure(kind, workload, setup, repeat))
                print(ingest_report.one_line(runs[-1]), flush=True)
        print(f"[{repeat}/{cfg.repeats}] parse ceiling ", end="", flush=True)
        servers.wait_for_quiet(cfg.quiet_wait_s)
        parses.append(
            parse_ceiling.parse_rates(
                bodies, BATCH.events_per_body, cfg.parse_trials, receiver_parse
            )
        )
        print(f"{parse_ceiling.ceiling(parses[-1]):,.0f} events/s", flush=True)
    return runs, parses


def summarise(runs: list[dict[str, Any]], parses: list[dict[str, float]]) -> dict[str, Any]:
    """Medians per (workload, server), the parse ceiling, and the two target ratios."""
    cells: dict[str, dict[str, dict[str, float]]] = {}
    for workload in WORKLOADS:
        for server in SERVERS:
            mine = [r for r in runs if r["workload"] == workload.name and r["server"] == server]
            cells.setdefault(workload.name, {})[server] = {
                key: statistics.median(r[key] for r in mine)
                for key in MEDIANS
                if all(r.get(key) is not None for r in mine)
            }
    ceiling = statistics.median(parse_ceiling.ceiling(p) for p in parses)
    single = cells["single"]["embrasure"]["req_per_s"] / cells["single"]["null"]["req_per_s"]
    batch = cells["batch"]["embrasure"]["events_per_s"] / ceiling
    targets = {
        "single": _verdict(single, SINGLE_TARGET, _paired(runs, "single", "embrasure", "null")),
        "batch": _verdict(batch, BATCH_TARGET, _paired(runs, "batch", "embrasure", parses)),
    }
    for workload in WORKLOADS:  # serve as users run it, against its receiver alone
        name = workload.name
        ratio = cells[name]["serve"]["events_per_s"] / cells[name]["embrasure"]["events_per_s"]
        per_repeat = _paired(runs, name, "serve", "embrasure")
        targets[f"serve_{name}"] = _verdict(ratio, SERVE_TARGET, per_repeat)
    drains = [r["drain_s"] for r in runs if r["server"] == "serve"]
    slowest = max((d if d is not None else DRAIN_WAIT_S) for d in drains)
    targets["drain"] = {
        "seconds": slowest,
        "per_run": drains,
        "target": DRAIN_TARGET_S,
        "met": all(d is not None and d <= DRAIN_TARGET_S for d in drains),
    }
    return {
        "cells": cells,
        "parse_rates": {k: statistics.median(p[k] for p in parses) for k in parses[0]},
        "parse_ceiling": ceiling,
        "targets": targets,
    }


def _paired(
    runs: list[dict[str, Any]], workload: str, server: str, against: str | list[dict[str, float]]
) -> list[float]:
    """Per-repeat ratios of ``server``'s events/s over ``against``'s (a server measured
    beside it, or the parse ceilings), to show the spread."""
    ratios = []
    for repeat in sorted({r["repeat"] for r in runs}):
        mine = {r["server"]: r for r in runs if r["repeat"] == repeat and r["workload"] == workload}
        if isinstance(against, str):
            ratios.append(mine[server]["events_per_s"] / mine[against]["events_per_s"])
        else:
            ratios.append(mine[server]["events_per_s"] / parse_ceiling.ceiling(against[repeat - 1]))
    return ratios


def _verdict(ratio: float, target: float, per_repeat: list[float]) -> dict[str, Any]:
    return {
        "ratio": ratio,
        "target": target,
        "met": ratio >= target,
        "per_repeat": per_repeat,
        "shortfall_points": max(0.0, (target - ratio) * 100),
        "speedup_needed": target / ratio if ratio < target else 1.0,
    }


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one 3 s repeat: a smoke test")
    parser.add_argument("--repeats", type=int, help="repeats of every measurement (default 3)")
    parser.add_argument("--duration", type=int, help="seconds per measured run (default 10)")
    parser.add_argument("--warmup", type=int, help="seconds of warm-up per server (default 3)")
    parser.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="py-spy profile of Embrasure per workload: auto = when its target is missed",
    )
    parser.add_argument(
        "--quiet-wait",
        type=int,
        default=8,
        help="seconds to wait, before each measurement, for other jobs to leave the CPU",
    )
    parser.add_argument("--rev", help="measure this git revision (default: the working tree)")
    parser.add_argument("--out", type=Path, help="results path without suffix")
    args = parser.parse_args(argv)
    quick = args.quick
    return Config(
        repeats=args.repeats or (1 if quick else 3),
        duration_s=args.duration or (3 if quick else 10),
        warmup_s=args.warmup or (1 if quick else 3),
        parse_bodies=4 if quick else 8,
        parse_trials=2 if quick else 6,
        profile=args.profile,
        quiet_wait_s=args.quiet_wait,
        rev=args.rev,
        out=args.out or (SCRATCH_DIR / "ingest-quick" if quick else RESULTS_DIR / "ingest"),
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--backends"]:  # SQLite beside PostgreSQL: bench/backends.py
        import backends

        return backends.main(["--part", "ingest", *args[1:]])
    cfg = parse_args(argv)
    SCRATCH_DIR.mkdir(parents=True, exist_ok=True)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    wrk = ensure_wrk()
    template = SCRATCH_DIR / "event-template.json"
    template.write_bytes(event_template())
    source = Path(tempfile.mkdtemp(prefix="source-", dir=SCRATCH_DIR))
    started = time.monotonic()
    try:
        facts = machine_facts(wrk, servers.copy_source(source, cfg.rev))
        setup = Setup(cfg, wrk, template, source)
        runs, parses = run_all(setup)
        summary = summarise(runs, parses)
        profiles = run_profiles(setup, summary)
    finally:
        shutil.rmtree(source, ignore_errors=True)
    results = {
        "machine": facts,
        "config": {
            **dataclasses.asdict(cfg),
            "out": str(cfg.out),
            "workloads": [dataclasses.asdict(w) for w in WORKLOADS],
            "event_bytes": len(template.read_bytes()),
            "batch_body_bytes": len(batch_bodies(template.read_bytes(), 1, 500, 0)[0]),
            "elapsed_s": time.monotonic() - started,
        },
        "runs": runs,
        "parse": parses,
        "summary": summary,
        "profiles": profiles,
    }
    print("\n" + ingest_report.table(results))
    Path(f"{cfg.out}.json").write_text(json.dumps(results, indent=2) + "\n")
    readme = os.path.relpath(BENCH_DIR / "README.md", cfg.out.parent)
    markdown = ingest_report.markdown(results, Path(f"{cfg.out}.json").name, readme)
    Path(f"{cfg.out}.md").write_text(markdown)
    print(f"\nwrote {cfg.out}.md and {cfg.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
