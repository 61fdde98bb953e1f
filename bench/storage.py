"""Storage benchmark (issue 15, "Years of events"): disk, ingest, projection, rebuilds and a
retention soak, side by side with an older revision in one run.

Parts (``--parts``, comma-separated; all by default):

- ``sizes``: each data set (bench/storage_sizes.py: ``bench`` — N of bench/projection.py's
  events, ``corpus`` — the shared OpenLineage corpus, ``platform`` — bench/query.py's
  column-heavy platform) POSTed to a fresh ``embrasure serve`` of side A and of side B on
  each backend, projected, then the bytes of every table and index, the body storage and
  the whole log (every table that is not the graph's) over the raw JSON bytes, the whole
  database over the raw bytes.
- ``ingest``: ``ingest.measure`` (wrk, single events and 500-event batches, a fresh
  ``serve --no-projector`` per run) of side B with ``EMBRASURE_LOG_COMPRESSION=off``
  (labelled A) and ``zstd`` (B), in the order A B A B B A B A: compression on over off.
- ``projection``: bench/ab.py's projection part, side A against side B (each side's log
  pre-filled through its own ``SQLiteStore.append``, N events projected in a child that
  imports that side).
- ``reproject`` (bench/storage_reproject.py): a log of ``--reproject-events`` pre-filled
  (log only, never projected), then ``embrasure reproject`` timed from outside; on a side
  that has ``embrasure retention``, again after ``retention --retain-log 0s --archive
  DIR`` moved every body to the archive (the rebuild reads archive + log), and the
  graphs' row counts compared.
- ``soak`` (bench/storage_soak.py): side B's ``serve`` with ``--retain-log``,
  ``--retain-runs``, ``--retention-interval`` and ``--archive``, fed a steady load, open
  loop; the database's size, the server's RSS, receipt latency inside and outside
  retention passes.

Targets (the issue's): log (the body storage) ≤ 0.15x raw (bench) and ≤ 0.25x (corpus);
the SQLite database ≤ 0.6x raw (bench) and ≤ 2x (platform); ingest with compression ≥
0.95x without; projection ≥ 1.5x side A; reproject of 1,000,000 events ≤ 6 minutes, from
the log and from archive + log; soak: size slope over the last third ≤ 2% of the size per
10 minutes, receipt p99 during passes ≤ 2x between them, RSS flat.

Every timed figure is a median of repeated runs; each records the CPU the rest of the
machine used meanwhile (``others busy``, from /proc): run it on a quiet machine. Both
sides are copied with ``git archive`` (``servers.copy_source``) and every process that
measures a side imports its copy.

Run ``python bench/storage.py`` (the full run, about 1.5 hours: sizes 16 min, ingest 5,
projection 4, measured 2026-12-01; reproject of 1,000,000 events on both sides ~25,
estimated from results/projection.md's 12.3 minutes at A; the soak 31; writes
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
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ab
import ingest
import servers
import storage_report
import storage_reproject
import storage_sizes
import storage_soak
from ingest_load import BATCH, SINGLE

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
    reproject: storage_reproject.ReprojectConfig
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
                    f"bodies {r['body_ratio']:.3f}x, log {r['log_ratio']:.3f}x, database "
                    f"{r['db_ratio']:.3f}x "
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
    setup = ab.ingest_setup(side.source, work, cfg.ingest_s, cfg.warmup_s, cfg.quiet_wait_s)
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
    sides = _csv(args.sides, ("A", "B"), "--sides", p)
    return Config(
        a=args.a,
        b=args.b,
        sides=sides,
        parts=_csv(args.parts, PARTS, "--parts", p),
        quick=quick,
        order=QUICK_ORDER if quick else ORDER * args.rounds,
        events=args.events or (5_000 if quick else 50_000),
        datasets=_csv(args.datasets, storage_sizes.DATASETS, "--datasets", p),
        backends=_csv(args.backends, storage_sizes.BACKENDS, "--backends", p),
        platform_scale=args.platform_scale or (0.05 if quick else 1.0),
        ingest_s=args.ingest_seconds or (3 if quick else 10),
        warmup_s=1 if quick else 3,
        reproject=storage_reproject.ReprojectConfig(
            events=args.reproject_events or (50_000 if quick else 1_000_000),
            rounds=args.reproject_rounds,
            timeout_s=args.reproject_timeout,
            sides=sides,
        ),
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


def save(cfg: Config, part: str, result: dict[str, Any], sides: dict[str, ab.Side]) -> None:
    """Merge one part into the results files at once: a later part that fails (the soak,
    on a revision without the retention flags) loses nothing measured before it."""
    codes = ", ".join(f"{k} {s.code}" for k, s in sides.items())
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    results = merged(Path(f"{cfg.out}.json"), {part: result}, servers.machine_facts(codes))
    Path(f"{cfg.out}.json").write_text(json.dumps(results, indent=1) + "\n")
    Path(f"{cfg.out}.md").write_text(storage_report.markdown(results, f"{cfg.out.name}.json"))


def main(argv: Sequence[str] | None = None) -> None:
    cfg = parse_args(argv)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="embrasure-storage-", dir=cfg.workdir))
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
            "reproject": lambda: storage_reproject.run(cfg.reproject, sides, work),
            "soak": lambda: storage_soak.run(cfg.soak, sides["B"], work),
        }
        for part in cfg.parts:
            print(part, flush=True)
            part_started, began = time.monotonic(), servers.machine_facts("")["date"]
            result = runs[part]()
            # What the part ran, beside its figures: parts measured in separate runs
            # share one report, each with its own date, revisions and settings.
            result["run"] = {
                "seconds": time.monotonic() - part_started,
                "began": began,
                "measured": servers.machine_facts("")["date"],  # when it ended
                "sides": {k: {"rev": s.rev, "code": s.code} for k, s in sides.items()},
                "config": {
                    k: str(v) if isinstance(v, Path) else v
                    for k, v in dataclasses.asdict(cfg).items()
                },
            }
            save(cfg, part, result, sides)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(Path(f"{cfg.out}.md").read_text())
    print(f"{(time.monotonic() - started) / 60:.1f} minutes; wrote {cfg.out}.md and .json")


if __name__ == "__main__":
    main()
