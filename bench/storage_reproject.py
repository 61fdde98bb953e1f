"""The reproject part of bench/storage.py: rebuilds timed from outside, from the log alone
and from archive + log.

A log of N events is pre-filled through the side's own ``SQLiteStore.append`` (bench/ab.py's
child, bench/projection.py's ``prefill``: 500-event deliveries, never projected), then
``embrasure reproject --db`` runs on a fresh copy each round, timed from outside (process
start included) with its own CPU and the rest of the machine's beside it. On a side that
has ``embrasure retention``, the projected copy then goes through ``retention --retain-log
0s --archive DIR`` (every body to the archive; ``archive verify`` after it), and
reproject runs again on copies of that trimmed database: every body is read from the
archive. The two graphs' row counts (bench/query.py's ``graph_facts``) are compared.
"""

from __future__ import annotations

import dataclasses
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ab
import projection
import query


@dataclasses.dataclass(frozen=True)
class ReprojectConfig:
    events: int
    rounds: int
    timeout_s: float
    sides: tuple[str, ...]


def cli(side: ab.Side, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "embrasure", *args]
    env = projection.child_env(side.source)
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)


def has_command(side: ab.Side, work: Path, command: str) -> bool:
    return cli(side, work, command, "--help").returncode == 0


def timed(side: ab.Side, work: Path, args: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """``embrasure ARGS`` timed from outside (process start included), with the CPU the
    whole machine used meanwhile."""
    projection.wait_for_quiet(30)
    argv = [sys.executable, "-m", "embrasure", *args]
    busy, started = projection.system_busy_seconds(), time.monotonic()
    # The command's own CPU: the children's rusage grows by it once it has been waited for.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        argv,
        cwd=work,
        env=projection.child_env(side.source),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own child, by its handle
        output, _ = proc.communicate()
        raise RuntimeError(f"embrasure {args[0]} took over {timeout_s:.0f} s") from None
    seconds = time.monotonic() - started
    machine = projection.system_busy_seconds() - busy
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"embrasure {' '.join(args)} failed ({proc.returncode}):\n{output}")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "others_busy_cores": max(0.0, machine - cpu) / seconds,
        "output": output.strip()[-2000:],
    }


def reproject_rounds(
    cfg: ReprojectConfig,
    side: ab.Side,
    work: Path,
    log: Path,
    events: int,
    extra: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rounds of ``embrasure reproject`` on fresh copies of ``log``; the last copy is
    kept (projected) at ``work / "reprojected.db"``, its graph's row counts returned."""
    runs = []
    target = work / "reprojected.db"
    for round_ in range(cfg.rounds):
        projection.copy_db(log, target)
        run = timed(
            side,
            work,
            ["reproject", "--db", f"sqlite:///{target}", *extra],
            cfg.timeout_s,
        )
        run["events_per_s"] = events / run["seconds"]
        runs.append(run)
        print(
            f"    round {round_ + 1}: {run['seconds']:,.1f} s ({run['events_per_s']:,.0f} "
            f"events/s), CPU {run['cpu_seconds']:,.1f} s, others {run['others_busy_cores']:.2f} "
            "cores",
            flush=True,
        )
    facts = query.graph_facts(target)
    if set(facts["items"]) != {"projected"}:
        raise RuntimeError(f"side {side.label}: items not all projected: {facts['items']}")
    return runs, facts


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = statistics.median(r["seconds"] for r in runs)
    return {"median_seconds": seconds, "median_minutes": seconds / 60, "runs": runs}


def run(cfg: ReprojectConfig, sides: dict[str, ab.Side], work: Path) -> dict[str, Any]:
    events = cfg.events
    results: dict[str, Any] = {"events": events, "sides": {}}
    for label in cfg.sides:
        side = sides[label]
        log = work / f"reproject-log-{label}.db"
        print(f"  {label}: pre-filling {events:,} events (log only)", flush=True)
        fill = ab._child(side, "prefill", str(log), str(events))
        print(
            f"    {fill['seconds']:,.0f} s ({fill['events_per_s']:,.0f} events/s), "
            f"{fill['db_bytes'] / 2**20:,.0f} MiB",
            flush=True,
        )
        print(f"  {label}: reproject from the log", flush=True)
        runs, facts = reproject_rounds(cfg, side, work, log, events)
        mine: dict[str, Any] = {"fill": fill, "from_log": _medians(runs)}
        if has_command(side, work, "retention"):
            mine |= reproject_from_archive(cfg, side, work, events, facts)
        else:
            mine["from_archive"] = None  # this side has no `embrasure retention`
        results["sides"][label] = mine
        projection.remove_db(log)
        projection.remove_db(work / "reprojected.db")
    return results


def reproject_from_archive(
    cfg: ReprojectConfig, side: ab.Side, work: Path, events: int, facts: dict[str, Any]
) -> dict[str, Any]:
    """Archive every body of the projected copy (``--retain-log 0s``), then reproject
    copies of that trimmed database: the rebuild reads the archive and the log."""
    trimmed, archive = work / "trimmed.db", work / "archive"
    shutil.rmtree(archive, ignore_errors=True)
    projection.copy_db(work / "reprojected.db", trimmed)
    before = projection.db_size(trimmed)
    print(f"  {side.label}: retention --retain-log 0s --archive {archive}", flush=True)
    url = f"sqlite:///{trimmed}"
    args = ["retention", "--db", url, "--retain-log", "0s", "--archive", str(archive)]
    try:
        retention = timed(side, work, args, cfg.timeout_s)
    except RuntimeError as error:  # reported, not raised: the log-only figures stand
        print(f"    {error}", flush=True)
        projection.remove_db(trimmed)
        return {"retention": {"error": str(error)[-2000:]}, "from_archive": None}
    # With --db (every trimmed delivery found) where the command takes it.
    takes_db = "--db" in cli(side, work, "archive", "verify", "--help").stdout
    verify_args = ["archive", "verify", "--archive", str(archive)]
    verify = cli(side, work, *verify_args, *(["--db", url] if takes_db else []))
    retention |= {
        "db_bytes_before": before,
        "db_bytes_after": projection.db_size(trimmed),
        "archive_bytes": sum(p.stat().st_size for p in archive.rglob("*") if p.is_file()),
        "archive_verify": {
            "exit_code": verify.returncode,
            "with_db": takes_db,
            "output": (verify.stdout + verify.stderr)[-1000:],
        },
    }
    print(
        f"    {retention['seconds']:,.1f} s; DB {before / 2**20:,.0f} → "
        f"{retention['db_bytes_after'] / 2**20:,.0f} MiB, archive "
        f"{retention['archive_bytes'] / 2**20:,.0f} MiB; archive verify exit "
        f"{verify.returncode}",
        flush=True,
    )
    print(f"  {side.label}: reproject from archive + log", flush=True)
    # Told where the archive is, if reproject takes the flag (else it knows from the DB).
    takes = "--archive" in cli(side, work, "reproject", "--help").stdout
    extra = ["--archive", str(archive)] if takes else []
    runs, after = reproject_rounds(cfg, side, work, trimmed, events, extra)
    projection.remove_db(trimmed)
    shutil.rmtree(archive, ignore_errors=True)
    return {
        "retention": retention,
        "from_archive": _medians(runs),
        "same_graph": after == facts,
        "graph_rows": {"from_log": facts, "from_archive": after},
    }
