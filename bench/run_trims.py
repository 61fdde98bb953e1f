"""One run-retention pass, alone or beside a busy thread (bench/README.md, "Run trims and
the GIL"): prefill ``--events`` platform events (bench/projection.py), project them, then
one ``trim_runs`` to now (every run but each job's latest) with the pauses between steps
removed, so the figures are the lock the pass holds (and, since 2026-12-03, the reads of the
next step that fill a pause in a server). ``--busy`` runs a thread spinning in
pure Python beside it, as the projector's folds do in a server; ``--switch`` sets the
GIL's switch interval first (a server running retention uses store/pacing.py's).

    .venv/bin/python bench/run_trims.py --events 20000 --busy --switch 0.005
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import projection

import embrasure.lifecycle.run_retention as run_retention
from embrasure.projector.worker import Projector, ProjectorLimits
from embrasure.store.sqlite import SQLiteStore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--busy", action="store_true", help="a thread spinning beside the pass")
    p.add_argument("--switch", type=float, help="sys.setswitchinterval before the pass")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="embrasure-run-trims-") as work:
        db = Path(work) / "trims.db"
        projection.prefill(db, args.events)
        store = SQLiteStore(str(db))
        try:
            Projector(store, ProjectorLimits()).run_until_caught_up()
            holds: list[tuple[str, float]] = []

            # The pass's own pauses would only add sleep to the figure.
            def record(held_s: float, step: str, spent_s: float = 0.0) -> None:
                holds.append((step, held_s))

            vars(run_retention)["pause_after"] = record  # its module imported it by name
            if args.switch:
                sys.setswitchinterval(args.switch)
            stop = threading.Event()

            def spin() -> None:
                while not stop.is_set():
                    sum(range(2000))

            if args.busy:
                threading.Thread(target=spin, daemon=True).start()
            started = time.perf_counter()
            report = run_retention.trim_runs(
                store, run_retention.horizon_key(datetime.timedelta(0))
            )
            seconds = time.perf_counter() - started
            stop.set()
        finally:
            store.close()
    trims = [(int(s.split()[2]), h) for s, h in holds if s.startswith("trim of")]
    trimmed = sum(n for n, _ in trims)
    locked_ms = sum(h for _, h in trims) * 1000 / max(1, trimmed)
    others = [f"{s}: {h * 1000:.1f} ms" for s, h in holds if not s.startswith("trim of")]
    print(
        f"busy={args.busy} switch={sys.getswitchinterval()}: {report.runs} runs in"
        f" {seconds:.2f} s ({report.runs / seconds:,.0f} runs/s), {len(trims)} steps of"
        f" {statistics.median(n for n, _ in trims):g} runs at p50, holding"
        f" {statistics.median(h for _, h in trims) * 1000:.1f} ms at p50, the lock"
        f" {sum(h for _, h in trims):.2f} s in all ({locked_ms:.2f} ms a run);"
        f" {'; '.join(others)}"
    )


if __name__ == "__main__":
    main()
