"""--retain-runs (docs/operations.md#retention-and-the-archive): runs whose latest
eventTime is before now - DURATION leave the graph with their per-run rows (the run, its
io rows, its events, its run/input/output facets); the lineage stays (datasets, jobs,
edges with their first/last seen and run counts, column edges, current facets, and each
job's latest run). The horizon is recorded beside the log: asOf before it answers 422
(query/as_of.py), and a reprojection trims again the runs the log brings back
(projector/worker.py).

What the removed runs gave each edge (first and last seen, run count, the last run and
its state) is kept, folded, in ``trimmed_edges``: asOf at or after the horizon adds it to
what the events left give, so its answers stay those of the whole history.

A shape or a facet value that only removed rows named goes after them (shapes first: the
facet sets they leave name values too), in transactions of their own.

A late event of a removed run projects it anew (with what that event says); the next
pass removes it again. Transactions of at most ``Store.step_runs`` runs, as many as take
about ``Store.step_hold_s`` (SQLite: as hold its write lock 8 ms), each followed by a
pause (store/pacing.py), keep the log's appends moving. Each step reads the runs it
removes, and what their rows name, in a snapshot that takes no lock (during the last
step's pause), and only deletes under the lock; a late event of one of them in between
changes their events count, and the step then reads again under the lock.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Iterable, Iterator, Mapping

from embrasure.model import utc_now
from embrasure.store import Store
from embrasure.store.base import ProjectionTx
from embrasure.store.pacing import Pacer, holding_the_lock, pause_after
from embrasure.store.rows import EventRow, IoSetRow, RunRow, ShapeRow, TrimmedEdgeRow
from embrasure.store.run_retention import UNNAMED_PER_STATEMENT, RunCursor

log = logging.getLogger("embrasure.retention")

EdgeKey = tuple[str, str, str, str, str]  # job ns, job name, dataset ns, name, direction


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


@dataclasses.dataclass(frozen=True)
class TrimStep:
    """What one step of a pass removes, read before it takes the write lock."""

    prefix: str  # of the generation it was read from
    cursor: RunCursor | None  # where the step after it reads from
    runs: list[str]
    events: int  # the runs' events rows: under the lock, the same count means no late event
    edges: list[TrimmedEdgeRow]  # what the runs gave each edge (``removed_edges``)
    values: frozenset[bytes]  # the facet values the runs' facets name
    shapes: frozenset[bytes]  # the shapes their events name


def plan_step(tx: ProjectionTx, horizon: str, size: int, cursor: RunCursor | None) -> TrimStep:
    """The next ``size`` runs before ``horizon`` from ``cursor`` on, and what their rows
    name: read in a snapshot (``Store.projection_snapshot``) or, when something changed
    since, under the write lock."""
    runs, after = tx.trimmable_runs(horizon, size, cursor)
    keys = [(r,) for r in runs]
    events = tx.select_by(EventRow, ("run_id",), keys) if runs else []
    shapes = tx.load(ShapeRow, {(e.shape_key,) for e in events})
    io_keys = {(s.io_key,) for s in shapes.values() if s.io_key is not None}
    io = tx.select_by(IoSetRow, ("io_key",), io_keys) if io_keys else []
    states = {r.run_id: r.state for r in tx.load(RunRow, keys).values()}
    edges = removed_edges(events, {k[0]: s for k, s in shapes.items()}, io, states)
    return TrimStep(
        tx.prefix,
        after,
        runs,
        len(events),
        edges,
        tx.run_facet_values(runs),
        frozenset(e.shape_key for e in events),
    )


def trim_runs(store: Store, horizon: str, *, generation: int | None = None) -> RunsReport:
    """Record ``horizon`` (it only moves up) and remove the runs before it from the
    served graph, or from ``generation`` (one reproject is building)."""
    started = time.monotonic()
    removed = 0
    with store.projection(generation) as tx:
        horizon = tx.record_run_horizon(horizon, utc_now())  # once: no step
    pacer = Pacer(start=min(store.step_runs, 16), low=1, high=store.step_runs,
                  target_s=store.step_hold_s)  # fmt: skip
    named: set[bytes] = set()  # values the removed runs' facets named
    shapes: set[bytes] = set()  # shapes their events named
    # Each step reads what it removes in a snapshot, which takes no lock, and only
    # deletes under the write lock. The sqlite3 module lets the GIL go around every
    # statement and every row it steps, and beside a busy thread each time costs up to
    # a switch interval (store/pacing.py): read under the lock, a one-run step made 27
    # such calls and held the lock 17.5 ms beside a busy thread (bench/run_trims.py).
    cursor: RunCursor | None = None
    size = pacer.size
    with store.projection_snapshot(generation) as snapshot:
        step = plan_step(snapshot, horizon, size, cursor)
    while step.runs:
        with holding_the_lock(), store.projection(generation) as tx:
            # Held from here, once the lock is ours, to the commit: the wait for this
            # process's turn (store/write_turns.py) behind the projector and the
            # receiver is not a hold. Counted in, it was most of what the soak's
            # steps measured (py-spy: the pass's thread waited for its turn 44% of
            # the time, and ran SQLite 10%), so the pacer kept steps of ~8 runs.
            held = time.monotonic()
            if tx.prefix != step.prefix or tx.count_events(step.runs) != step.events:
                # A late event of one of the runs, or a reproject's swap, since the
                # snapshot: read again, under the lock.
                step = plan_step(tx, horizon, size, cursor)
            tx.merge(TrimmedEdgeRow, step.edges)
            tx.delete_runs(step.runs)
        named |= step.values
        shapes |= step.shapes
        removed += len(step.runs)
        if len(step.runs) < size:
            break
        held = time.monotonic() - held
        pacer.held(held, len(step.runs))
        # The next step's reads take no lock, so they fill this step's pause.
        reading = time.monotonic()
        cursor, size, done = step.cursor, pacer.size, len(step.runs)
        with store.projection_snapshot(generation) as snapshot:
            step = plan_step(snapshot, horizon, size, cursor)
        pause_after(held, f"trim of {done} runs", spent_s=time.monotonic() - reading)
    # The shapes and values only those runs named, once they are gone; the shapes first,
    # since the facet sets they leave name values too. The value deletion scans the
    # facet tables whatever its number of candidates: done per trim, that scan was most
    # of every trim's hold on the write lock (16.9 ms p50 for steps of a run or two).
    for chunk in _chunks(shapes):
        with holding_the_lock(), store.projection(generation) as tx:
            held = time.monotonic()  # once the lock is ours (see above)
            named |= tx.delete_unnamed_shapes(chunk)
        pause_after(time.monotonic() - held, f"deletion of {len(chunk)} unnamed shapes")
    for chunk in _chunks(named):
        with holding_the_lock(), store.projection(generation) as tx:
            held = time.monotonic()  # once the lock is ours (see above)
            tx.delete_unnamed_values(chunk)
        pause_after(time.monotonic() - held, f"deletion of {len(chunk)} unnamed facet values")
    report = RunsReport(horizon, removed, time.monotonic() - started)
    log.info("run retention: %s", report.summary(), extra={"seconds": report.seconds})
    return report


def _chunks(keys: set[bytes]) -> Iterator[list[bytes]]:
    ordered = sorted(keys)
    for start in range(0, len(ordered), UNNAMED_PER_STATEMENT):
        yield ordered[start : start + UNNAMED_PER_STATEMENT]


def removed_edges(
    events: Iterable[EventRow],
    shapes: Mapping[bytes, ShapeRow],
    io_rows: Iterable[IoSetRow],
    states: Mapping[str, str | None],
) -> list[TrimmedEdgeRow]:
    """What the removed runs' ``events`` gave each edge their shapes name (as
    query/as_of.py folds events into edges), one row per edge, in key order. Static
    edges (JobEvents) have no run and are never removed."""
    by_io: dict[bytes, list[IoSetRow]] = {}
    for row in io_rows:
        if not row.static:
            by_io.setdefault(row.io_key, []).append(row)
    spans: dict[EdgeKey, list[tuple[str, str]]] = {}
    runs: dict[EdgeKey, set[str]] = {}
    last: dict[EdgeKey, tuple[str, str]] = {}
    for event in events:
        io_key = shapes[event.shape_key].io_key
        if io_key is None or event.run_id is None:
            continue
        for io in by_io.get(io_key, ()):
            key: EdgeKey = (io.job_ns, io.job_name, io.ds_ns, io.ds_name, io.direction)
            if event.time_key and event.time_text is not None:  # '' and NULL: unknown
                spans.setdefault(key, []).append((event.time_key, event.time_text))
            runs.setdefault(key, set()).add(event.run_id)
            last[key] = max(last.get(key, ("", "")), (event.time_key, event.run_id))
    out = []
    for key in sorted(runs):
        known = spans.get(key)
        first: tuple[str | None, str | None] = min(known) if known else (None, None)
        latest: tuple[str | None, str | None] = max(known) if known else (None, None)
        last_key, last_run = last[key]
        job_ns, job_name, ds_ns, ds_name, direction = key
        out.append(
            TrimmedEdgeRow(
                job_ns,
                job_name,
                ds_ns,
                ds_name,
                direction,
                first[0],
                first[1],
                latest[0],
                latest[1],
                len(runs[key]),
                last_key,
                last_run,
                states.get(last_run),
            )
        )
    return out
