"""--retain-runs (docs/operations.md#retention-and-the-archive): runs whose latest
eventTime is before now - DURATION leave the graph with their per-run rows (the run, its
io rows, its events, its run/input/output facets); the lineage stays (datasets, jobs,
edges with their first/last seen and run counts, column edges, current facets, and each
job's latest run). The horizon is recorded beside the log: asOf before it answers 422
(query/as_of.py), and a reprojection trims again the runs the log brings back
(projector/worker.py).

A late event of a removed run projects it anew (with what that event says); the next
pass removes it again. Transactions of BATCH runs keep the log's appends moving.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time

from embrasure.model import utc_now
from embrasure.store import Store

log = logging.getLogger("embrasure.retention")

BATCH = 1000  # runs per transaction


@dataclasses.dataclass(frozen=True)
class RunsReport:
    horizon: str  # the eventTime key runs before it were removed
    runs: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        plural = "" if self.runs == 1 else "s"
        return (
            f"removed {self.runs} run{plural} whose latest eventTime is before"
            f" {self.horizon} (each job's latest run kept); {self.seconds:.1f} s"
        )


def horizon_key(retain: datetime.timedelta, now: datetime.datetime | None = None) -> str:
    """now - retain as an eventTime key (projector/times.py: UTC, nine fraction digits)."""
    moment = (now or datetime.datetime.now(datetime.UTC)) - retain
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}000Z"


def trim_runs(
    store: Store, horizon: str, *, generation: int | None = None, batch: int = BATCH
) -> RunsReport:
    """Record ``horizon`` (it only moves up) and remove the runs before it from the
    served graph, or from ``generation`` (one reproject is building)."""
    started = time.monotonic()
    removed = 0
    with store.projection(generation) as tx:
        horizon = tx.record_run_horizon(horizon, utc_now())
    while True:
        with store.projection(generation) as tx:
            runs = tx.trimmable_runs(horizon, batch)
            tx.delete_runs(runs)
        removed += len(runs)
        if len(runs) < batch:
            break
    report = RunsReport(horizon, removed, time.monotonic() - started)
    log.info("run retention: %s", report.summary())
    return report
