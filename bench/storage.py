"""Storage benchmark (issue 15, "Years of events"): disk, ingest, projection, rebuilds and a
retention soak, side by side with an older revision in one run.

Parts (``--parts``, comma-separated; all by default):

- ``sizes``: each data set (bench/storage_sizes.py: ``bench`` — N of bench/projection.py's
  events, ``corpus`` — the shared OpenLineage corpus, ``platform`` — bench/query.py's
  column-heavy platform) POSTed to a fresh ``embrasure serve`` of side A and of side B on
  each backend, projected, then the bytes of every table and index, the log (every table
  that is not the graph's) over the raw JSON bytes, the whole database over the raw bytes.
- ``ingest``: ``ingest.measure`` (wrk, single events and 500-event batches, a fresh
  ``serve --no-projector`` per run) of side B with ``EMBRASURE_LOG_COMPRESSION=off``
  (labelled A) and ``zstd`` (B), in the order A B A B B A B A: compression on over off.
- ``projection``: bench/ab.py's projection part, side A against side B (each side's log
  pre-filled through its own ``SQLiteStore.append``, N events projected in a child that
  imports that side).
- ``reproject``: a log of ``--reproject-events`` pre-filled (log only, never projected),
  then ``embrasure reproject`` timed from outside; on a side that has ``embrasure
  retention``, again after ``retention --retain-log 0s --archive DIR`` moved every body
  to the archive (the rebuild reads archive + log), and the graphs' row counts compared.
- ``soak`` (bench/storage_soak.py): side B's ``serve`` with ``--retain-log``,
  ``--retain-runs``, ``--retention-interval`` and ``--archive``, fed a steady load, open
  loop; the database's size, the server's RSS, receipt latency inside and outside
  retention passes.

Targets (the issue's): log ≤ 0.15x raw (bench) and ≤ 0.25x (corpus); the SQLite database
≤ 0.6x raw (bench) and ≤ 2x (platform); ingest with compression ≥ 0.95x without;
projection ≥ 1.5x side A; reproject of 1,000,000 events ≤ 6 minutes, from the log and
from archive + log; soak: size slope over the last third ≤ 2% of the size per 10
minutes, receipt p99 during passes ≤ 2x between them, RSS flat.

Every timed figure is a median of repeated runs; each records the CPU the rest of the
machine used meanwhile (``others busy``, from /proc): run it on a quiet machine. Both
sides are copied with ``git archive`` (``servers.copy_source``) and every process that
measures a side imports its copy.

Run ``python bench/storage.py`` (the full run, about 1.5 hours: sizes ~20 min, ingest ~5,
projection ~10, reproject of 1,000,000 events on both sides ~25, soak 30; writes
bench/results/storage.{md,json}, merging with parts measured before) or ``--quick``
(small sizes, a 3-minute soak with horizons a tenth as long; writes under
bench/results/tmp/). Linux only (it reads /proc; installs wrk with apt-get if missing).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ab
import ingest
import projection
import query
import servers
import storage_report
import storage_sizes
import storage_soak
from ingest_load import BATCH, SINGLE, ensure_wrk, event_template

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
SCRATCH_DIR = RESULTS_DIR / "tmp"  # git-ignored

PARTS = ("sizes", "ingest", "projection", "reproject", "soak")
# The last commit before issue 15's work: what "today" means in the issue's targets.
BASELINE = "bb41eaa"
COMPRESSION_ENV = "EMBRASURE_LOG_COMPRESSION"  # the log_compression setting
COMPRESSION = {"A": "off", "B": "zstd"}  # the ingest part's two "sides", one build
ORDER = "ABABBABA"
QUICK_ORDER = "ABBA"


@dataclasses.dataclass(frozen=True)
class Config:
    a: str
    b: str
    sides: tuple[str, ...]  # which of A, B the sizes and reproject parts measure
    parts: tuple[str, ...]
    quick: bool
    order: str  # of the ingest and projection runs
    events: int  # N: the bench data set, and the projection log
    datasets: tuple[str, ...]
    backends: tuple[str, ...]
    platform_scale: float
    ingest_s: int
    warmup_s: int
    reproject_events: int
    reproject_rounds: int
    reproject_timeout_s: float
    soak: storage_soak.SoakConfig
    quiet_wait_s: int
    out: Path
    workdir: Path | None


# -- sizes ----------------------------------------------------------------------------


def run_sizes(cfg: Config, sides: dict[str, ab.Side], work: Path) -> dict[str, Any]:
    found = []
    for dataset in cfg.datasets:
        for backend in cfg.backends:
            for label in cfg.sides:
                print(f"  {dataset} on {backend}, {label} ", end="", flush=True)
                r = storage_sizes.measure(
                    dataset,
                    backend,
                    sides[label].source,
                    work,
                    events=cfg.events,
                    scale=cfg.platform_scale,
                )
                found.append(r | {"side": label})
                print(
                    f"{r['load']['events']:,} events, raw {r['raw_bytes'] / 2**20:,.1f} MiB: "
                    f"log {r['log_ratio']:.3f}x, database {r['db_ratio']:.3f}x "
                    f"({r['file_bytes'] / 2**20:,.1f} MiB)",
                    flush=True,
                )
    return {"runs": found}


# -- ingest: compression on against off, one build ---------------------------------------


@contextlib.contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """``name=value`` for the servers started meanwhile (servers.start_embrasure passes
    this process's environment on): a setting changed without a flag of this harness's."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def run_ingest(cfg: Config, side: ab.Side, work: Path) -> dict[str, Any]:
    wrk = ensure_wrk()
    template = work / "event-template.json"
    template.write_bytes(event_template())
    icfg = ingest.Config(
        repeats=1,
        duration_s=cfg.ingest_s,
        warmup_s=cfg.warmup_s,
        parse_bodies=0,
        parse_trials=0,
        profile="never",
        quiet_wait_s=cfg.quiet_wait_s,
        rev=None,
        out=work / "ingest",
    )
    ingest.SCRATCH_DIR.mkdir(parents=True, exist_ok=True)  # measure's server directories
    setup = ingest.Setup(icfg, wrk, template, side.source)
    records = []
    for workload in (SINGLE, BATCH):
        print(f"  {workload.name}", flush=True)
        for slot, label in enumerate(cfg.order):
            print(f"  [{slot + 1}/{len(cfg.order)}] {COMPRESSION[label]:4} ", end="", flush=True)
            with environment(COMPRESSION_ENV, COMPRESSION[label]):
                r = ingest.measure("embrasure", workload, setup, slot)
            r.update(part=f"ingest {workload.name}", side=label, slot=slot)
            r.update(compression=COMPRESSION[label], problems=ab._ingest_problems(r))
            records.append(r)
            print(
                f"{r['req_per_s']:,.0f} req/s {r['events_per_s']:,.0f} events/s, "
                f"{(r.get('file_bytes_per_event') or 0):,.0f} B/event on disk, others "
                f"{r['other_cpu_cores']:.2f} cores{ab._problem_text(r)}",
                flush=True,
            )
    return {
        "compression_env": COMPRESSION_ENV,
        "summary": ab.summarise(records, cfg.order),
        "bytes_per_event": compression_effect(records),
        "records": records,
    }


def compression_effect(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The files' bytes per event stored, off and on: a setting the server ignored would
    leave them equal, and the on/off throughput ratio would then measure nothing."""
    effect: dict[str, Any] = {}
    for part in ("ingest single", "ingest batch"):
        per = {
            label: [
                r["file_bytes_per_event"]
                for r in records
                if r["part"] == part and r["side"] == label and r.get("file_bytes_per_event")
            ]
            for label in "AB"
        }
        if not (per["A"] and per["B"]):
            continue
        off, on = statistics.median(per["A"]), statistics.median(per["B"])
        effect[part] = {
            "off": off,
            "on": on,
            "on_over_off": on / off,
            # zstd takes a ~4.7 KB event to well under a half; 0.9 is only "did it run".
            "compressed": on < 0.9 * off,
        }
    return effect


# -- projection: A against B (bench/ab.py's part) -----------------------------------------


def run_projection(cfg: Config, sides: dict[str, ab.Side], work: Path) -> dict[str, Any]:
    acfg = ab.Config(
        a=cfg.a,
        b=cfg.b,
        order=cfg.order,
        parts=("projection",),
        ingest_s=cfg.ingest_s,
        warmup_s=cfg.warmup_s,
        projection_events=cfg.events,
        scale=cfg.platform_scale,
        calls=0,
        quiet_wait_s=cfg.quiet_wait_s,
        out=cfg.out,
        workdir=cfg.workdir,
    )
    records = ab.run_projection(acfg, sides, work)
    return {"summary": ab.summarise(records, cfg.order), "records": records}


# -- reproject ------------------------------------------------------------------------


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
    cfg: Config, side: ab.Side, work: Path, log: Path, events: int, extra: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rounds of ``embrasure reproject`` on fresh copies of ``log``; the last copy is
    kept (projected) at ``work / "reprojected.db"``, its graph's row counts returned."""
    runs = []
    target = work / "reprojected.db"
    for round_ in range(cfg.reproject_rounds):
        projection.copy_db(log, target)
        run = timed(
            side,
            work,
            ["reproject", "--db", f"sqlite:///{target}", *extra],
            cfg.reproject_timeout_s,
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


def run_reproject(cfg: Config, sides: dict[str, ab.Side], work: Path) -> dict[str, Any]:
    events = cfg.reproject_events
    results: dict[str, Any] = {"events": events, "sides": {}}
    for label in cfg.sides:
        side = sides[label]
        log = work / f"reproject-log-{label}.db"
        print(f"  {label}: pre-filling {events:,} events (log only)", flush=True)
        fill = ab._child(side, "prefill", str(log), str(events))
        print(
            f"    {fill['seconds']:,.0f} s ({fill['events_per_s']:,.0f} events/s), "
            f"{fill['db_bytes'] / 2**30:,.2f} GiB",
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
    cfg: Config, side: ab.Side, work: Path, events: int, facts: dict[str, Any]
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
        retention = timed(side, work, args, cfg.reproject_timeout_s)
    except RuntimeError as error:  # reported, not raised: the log-only figures stand
        print(f"    {error}", flush=True)
        projection.remove_db(trimmed)
        return {"retention": {"error": str(error)[-2000:]}, "from_archive": None}
    verify = cli(side, work, "archive", "verify", "--archive", str(archive), "--db", url)
    retention |= {
        "db_bytes_before": before,
        "db_bytes_after": projection.db_size(trimmed),
        "archive_bytes": sum(p.stat().st_size for p in archive.rglob("*") if p.is_file()),
        "archive_verify": {"exit_code": verify.returncode, "output": verify.stdout[-1000:]},
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


# -- the run --------------------------------------------------------------------------


def _csv(
    value: str, allowed: Sequence[str], flag: str, p: argparse.ArgumentParser
) -> tuple[str, ...]:
    chosen = tuple(v for v in value.split(",") if v)
    if not chosen or not set(chosen) <= set(allowed):
        p.error(f"{flag}: choose among {', '.join(allowed)}")
    return chosen


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--a", default=BASELINE, help=f"side A: a git revision (default {BASELINE})")
    p.add_argument("--b", default="HEAD", help="side B: a git revision (default HEAD)")
    p.add_argument("--sides", default="A,B", help="sides the sizes and reproject parts measure")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated of {PARTS}")
    p.add_argument("--quick", action="store_true", help="small sizes, a 3-minute soak")
    p.add_argument("--rounds", type=int, default=1, help="repeats of A B A B B A B A")
    p.add_argument("--events", type=int, help="N: bench events (default 50,000; quick 5,000)")
    p.add_argument("--datasets", default=",".join(storage_sizes.DATASETS))
    p.add_argument("--backends", default=",".join(storage_sizes.BACKENDS))
    p.add_argument("--platform-scale", type=float, help="bench/query.py's scale (1; quick 0.05)")
    p.add_argument("--ingest-seconds", type=int, help="measured seconds per ingest run")
    p.add_argument("--reproject-events", type=int, help="default 1,000,000; quick 50,000")
    p.add_argument("--reproject-rounds", type=int, default=1)
    p.add_argument("--reproject-timeout", type=float, default=3600.0)
    storage_soak.add_arguments(p)
    p.add_argument("--quiet-wait", type=int, help="seconds to wait for an idle machine")
    p.add_argument("--out", type=Path, help="results path without suffix")
    p.add_argument("--workdir", type=Path, help="where the copies and databases go")
    args = p.parse_args(argv)
    quick = args.quick
    return Config(
        a=args.a,
        b=args.b,
        sides=_csv(args.sides, ("A", "B"), "--sides", p),
        parts=_csv(args.parts, PARTS, "--parts", p),
        quick=quick,
        order=QUICK_ORDER if quick else ORDER * args.rounds,
        events=args.events or (5_000 if quick else 50_000),
        datasets=_csv(args.datasets, storage_sizes.DATASETS, "--datasets", p),
        backends=_csv(args.backends, storage_sizes.BACKENDS, "--backends", p),
        platform_scale=args.platform_scale or (0.05 if quick else 1.0),
        ingest_s=args.ingest_seconds or (3 if quick else 10),
        warmup_s=1 if quick else 3,
        reproject_events=args.reproject_events or (50_000 if quick else 1_000_000),
        reproject_rounds=args.reproject_rounds,
        reproject_timeout_s=args.reproject_timeout,
        soak=storage_soak.soak_config(args, quick),
        quiet_wait_s=args.quiet_wait if args.quiet_wait is not None else (2 if quick else 8),
        out=args.out or (SCRATCH_DIR / "storage-quick" if quick else RESULTS_DIR / "storage"),
        workdir=args.workdir,
    )


def merged(path: Path, parts: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    """This run's parts over those already in ``path`` (each keeps its own date and
    commits), so that parts measured in separate runs share one report."""
    results: dict[str, Any] = {"parts": {}}
    if path.exists():
        results = json.loads(path.read_text())
    results["machine"] = machine
    results["parts"].update(parts)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    cfg = parse_args(argv)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="embrasure-storage-", dir=cfg.workdir))
    parts: dict[str, Any] = {}
    try:
        # The ingest and soak parts measure B alone, projection both sides.
        needed = set(cfg.sides) if {"sizes", "reproject"} & set(cfg.parts) else set()
        needed |= {"B"} if {"ingest", "soak"} & set(cfg.parts) else set()
        needed |= {"A", "B"} if "projection" in cfg.parts else set()
        sides = {}
        for label, rev in (("A", cfg.a), ("B", cfg.b)):
            if label in needed:
                source = work / f"src-{label}"
                sides[label] = ab.Side(label, rev, servers.copy_source(source, rev), source)
                print(f"{label} = {rev}: {sides[label].code}", flush=True)
        runs = {
            "sizes": lambda: run_sizes(cfg, sides, work),
            "ingest": lambda: run_ingest(cfg, sides["B"], work),
            "projection": lambda: run_projection(cfg, sides, work),
            "reproject": lambda: run_reproject(cfg, sides, work),
            "soak": lambda: storage_soak.run(cfg.soak, sides["B"], work),
        }
        for part in cfg.parts:
            print(part, flush=True)
            part_started = time.monotonic()
            result = runs[part]()
            # What the part ran, beside its figures: parts measured in separate runs
            # share one report, each with its own date, revisions and settings.
            parts[part] = result | {
                "run": {
                    "seconds": time.monotonic() - part_started,
                    "measured": servers.machine_facts("")["date"],
                    "sides": {k: {"rev": s.rev, "code": s.code} for k, s in sides.items()},
                    "config": {
                        k: str(v) if isinstance(v, Path) else v
                        for k, v in dataclasses.asdict(cfg).items()
                    },
                }
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    codes = ", ".join(f"{k} {s.code}" for k, s in sides.items())
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    results = merged(Path(f"{cfg.out}.json"), parts, servers.machine_facts(codes))
    Path(f"{cfg.out}.json").write_text(json.dumps(results, indent=1) + "\n")
    Path(f"{cfg.out}.md").write_text(storage_report.markdown(results))
    print(storage_report.markdown(results))
    print(f"{(time.monotonic() - started) / 60:.1f} minutes; wrote {cfg.out}.md and .json")


if __name__ == "__main__":
    main()
