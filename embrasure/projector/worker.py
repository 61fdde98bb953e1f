"""The projector loop: read the log after the position → pipeline → one transaction.

Each transaction projects a few deliveries whole and records the new position with them
(docs/architecture.md#one-transaction-projection-and-log-position), so a crash re-projects
from the last committed position with the same result. Merged rows (edges, jobs, runs,
facets, column edges) are folded within the batch by the order-independent rules of
``graph_rows``/``facets``/``runs``/``symlinks``, then joined into the stored rows by the
store's matching SQL rules (store/schema.py MERGES) without being read first; everything
else is insert-only. This module is the only one in the projector that touches the store.

A delivery the projector fails on is retried alone; after MAX_ATTEMPTS failures it is
quarantined whole as a projector error (retriable), so one poison delivery never blocks
the log.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

import orjson

from embrasure import logs
from embrasure.errors import (
    ArchiveError,
    NoSuchDelivery,
    NoSuchItem,
    NotQuarantined,
    NotReplayable,
    StoreConflict,
    StoreUnavailable,
)
from embrasure.lifecycle.run_retention import trim_runs
from embrasure.lifecycle.trimmed import NO_ARCHIVE, ArchivedBodies
from embrasure.model import Quarantined
from embrasure.projector import admin, causes, collector, turns
from embrasure.projector.apply import apply, apply_events, commit, item_row, prepare, split_items
from embrasure.projector.pipeline import project_event
from embrasure.projector.turns import Turn, TurnLost
from embrasure.store import open_store
from embrasure.store.base import LogEntry, ProjectionTx, Store
from embrasure.store.rows import (
    DeliveryOutcome,
    FailureRow,
    ItemRow,
    decode_kinds,
    encode_kinds,
)
from embrasure.store.schema import GRAPH_VERSION

log = logging.getLogger("embrasure.projector")

MAX_ATTEMPTS = 3
PAIR_AGAIN_S = 30.0  # after a broken pair, alone for this long before another partner


@dataclasses.dataclass(frozen=True)
class ProjectorLimits:
    """How much one projection transaction takes on (a delivery is never split). A step
    takes what the log holds, up to these: when the projector keeps up, a few events;
    behind, as many as fold into rows once per job for many of its runs. On SQLite the
    receiver's appends do not wait for it (the graph has a file and a write lock of its
    own: store/sqlite_files.py), so the bound is the projector's own: memory, and how
    long the graph stays a step behind. Measured on bench/projection.py's events in one
    process (docs/projection.md#what-makes-it-fast-enough): 2,000 events a transaction
    328 µs an event, 5,000 241, 10,000 206, 20,000 182."""

    batch_deliveries: int = 10_000  # deliveries per transaction (single events: one each)
    batch_events: int = 10_000  # items per transaction (at least one delivery)
    batch_bytes: int = 64 * 1024 * 1024  # bodies per transaction
    idle_seconds: float = 0.05  # how long to sleep when the log has nothing new
    notify_settle: timedelta = causes.SETTLE  # docs/notifications.md#order
    # A rebuild's transactions (``reproject``): nobody reads its generation until the
    # swap, so they fold more of the log at once. A job's row, its edges and column edges
    # are merged once per transaction whatever its runs in it: on 200,000 bench platform
    # events, 2,758 → 4,023 events/s from 2,000 to 20,000 events a transaction, for
    # ~165 MiB more memory and the graph's write lock held up to 1.41 s instead of 0.69 s
    # (bench/README.md, "Reproject as a bulk load"; docs/operations.md, "Rebuilding the
    # graph"). On SQLite the receiver no longer waits for that lock: the log has its own.
    rebuild_events: int = 20_000
    rebuild_bytes: int = 128 * 1024 * 1024  # bodies (as received) per rebuild transaction
    # Two: on a store with one projection transaction at a time (SQLite), a second
    # process folds the next step while this one writes (turns.py). `embrasure
    # project`, `serve` and `reproject` take it from settings.projector_processes.
    processes: int = 1

    def for_rebuild(self) -> ProjectorLimits:
        n = self.rebuild_events
        return dataclasses.replace(
            self, batch_deliveries=n, batch_events=n, batch_bytes=self.rebuild_bytes
        )


def replay_item(
    store: Store, delivery_id: str, index: int, archived: ArchivedBodies = NO_ARCHIVE
) -> dict[str, Any]:
    """Replay (docs/projection.md#replay): re-validate a quarantined item's stored bytes
    (from the archive when retention trimmed them) under the current rules and project it
    if it passes; the delivery's counts are recomputed. Raises a ReplayError (errors.py)
    when there is no such item or it is not one to replay, an ArchiveError when its body
    is archived and cannot be read."""
    with store.reader() as reader:
        row = reader.delivery(delivery_id)
        if row is None:
            raise NoSuchDelivery(f"No delivery {delivery_id!r} is stored.")
        seq, route, item_count = row.seq, row.route, row.item_count
        if not 0 <= index < item_count:
            raise NoSuchItem(f"Delivery {delivery_id} has items 0 to {item_count - 1}.")
        if route == admin.ROUTE:
            raise NotReplayable(
                "An administrative entry (hide or unhide) is not replayed: hide or unhide "
                "again instead."
            )
        if any(i == index for i, _kind, _reason in orjson.loads(row.rejections)):
            raise NotReplayable(
                "The item was rejected at the transport boundary (a receiver "
                "bound): its bytes are kept for audit but are never projected."
            )
        current = {r.idx: r for r in reader.items(seq)}.get(index)
        if current is None or current.outcome != "quarantined":
            if current is not None:
                state = current.outcome
            else:  # no row: a plain item of a projected delivery, or one not yet projected
                state = "pending" if row.kinds is None else "projected"
            raise NotQuarantined(f"Item {index} of delivery {delivery_id} is {state}.")
        kept = reader.body(seq)
    body = archived.body(seq, kept)
    entry = LogEntry(seq, delivery_id, route, body, item_count, ())
    result = project_event(split_items(entry)[index])
    with store.projection() as tx:
        if not isinstance(result, Quarantined):
            apply_events(tx, [(result, seq, index)])
        outcome = item_row(seq, index, result)
        tx.save(ItemRow, [outcome])
        # The counts again, from the items' rows and the plain items (no row, replay
        # never makes one: the replayed item keeps its row).
        items = tx.select_by(ItemRow, ("seq",), [(seq,)])
        stored = tx.load(DeliveryOutcome, [(seq,)]).get((seq,))
        edges, kinds = (stored.edges_created, stored.kinds) if stored else (0, encode_kinds(()))
        projected = sum(1 for i in items if i.outcome == "projected")
        plain = len(decode_kinds(kinds))
        outcome_row = DeliveryOutcome(seq, plain + projected, len(items) - projected, edges, kinds)
        tx.save(DeliveryOutcome, [outcome_row])
    return {
        "delivery_id": delivery_id,
        "index": index,
        "outcome": outcome.outcome,
        "reason": outcome.reason,
    }


def reproject(
    store: Store, limits: ProjectorLimits | None = None, archived: ArchivedBodies = NO_ARCHIVE
) -> int:
    """docs/architecture.md#reprojection-a-new-generation-then-a-swap: build the graph again
    from the whole log beside the served one, then swap. Readers see the old graph until the
    swap's commit, the new one after; the live projector follows the swap (it reads the
    served generation in each transaction). Bodies retention trimmed are read from
    ``archived``, so the rebuild covers all of history. Returns the new generation."""
    new = store.create_generation()
    limits = (limits or ProjectorLimits()).for_rebuild()
    builder = Projector(store, limits, generation=new, archived=archived)
    builder.run_until_caught_up()
    store.index_generation(new)  # before run retention and the swap, which read by them
    with store.reader() as reader:
        horizon = reader.run_horizon()
    if horizon is not None:
        # The runs --retain-runs removed, the log brings back: remove them again (the
        # few the swap's transaction still projects go at the next pass).
        trim_runs(store, horizon, generation=new)
    with store.projection(new) as tx:
        # Holding the log, nothing new reaches it (and on PostgreSQL, deliveries other
        # projectors hold are waited for, not skipped): finish, then swap.
        tx.hold_log()
        while entries := builder.read(tx.read_log, tx.position()):
            apply(tx, entries)
        old = tx.serve_this_generation()
    store.drop_generation(old)
    return new


class Projector:
    """Runs ``apply`` over the log until stopped (in a thread of ``embrasure serve``, or
    alone as ``embrasure project``)."""

    def __init__(
        self,
        store: Store,
        limits: ProjectorLimits | None = None,
        generation: int | None = None,
        archived: ArchivedBodies = NO_ARCHIVE,
    ) -> None:
        self.store = store
        self.limits = limits or ProjectorLimits()
        self.generation = generation  # None: whichever generation is served
        # A rebuild decides no notification: what it replays was decided when it happened.
        self._settle = self.limits.notify_settle if generation is None else None
        # Where trimmed bodies are read: only a rebuild meets them (retention trims
        # projected deliveries only), and a reproject started by the loop (_run).
        self.archived = archived
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.partner: turns.Partner | None = None  # the latest, when taking turns

    def read(
        self, read_log: Callable[[int, int, int, int], list[LogEntry]], position: int
    ) -> list[LogEntry]:
        """The next deliveries after ``position``, within the transaction limits, with
        any body retention trimmed read back from the archive."""
        limits = self.limits
        entries = read_log(
            position, limits.batch_deliveries, limits.batch_bytes, limits.batch_events
        )
        return self.archived.fill(entries)

    def step(self, turn: Turn | None = None) -> int:
        """Project the next deliveries in one transaction; return how many (0 when caught
        up). A batch that fails is retried one delivery at a time. With ``turn`` (two
        processes taking turns: turns.py), the deliveries start at its position, and no
        write lock is taken before the partner's turn has ended."""
        entries: list[LogEntry] = []
        try:
            with collector.paused():  # a batch is freed whole when it ends: collector.py
                if self.store.concurrent_projectors:
                    self._claim_then_validate(entries)
                else:
                    self._validate_then_lock(entries, turn)
        except StoreConflict as exc:  # rolled back, claims released: go again at once
            log.info("projection conflicted with another projector, retrying: %s", exc)
        except (StoreUnavailable, ArchiveError, TurnLost):
            # Not the deliveries' fault: no retrying them one by one, no quarantine (an
            # archived body that cannot be read now stops a rebuild, saying why; a turn
            # lost starts the pair over from the stored position).
            raise
        except Exception:
            seqs = {"first_seq": entries[0].seq, "last_seq": entries[-1].seq} if entries else {}
            log.exception(
                "projection of %d deliveries failed; retrying one by one", len(entries), extra=seqs
            )
            if turn is not None:
                turn.wait()  # one by one, in order too: after the partner's deliveries
            for entry in entries:
                self._project_alone(entry)
        else:
            if entries:
                log.debug(
                    "projected %d deliveries, seq %d to %d",
                    len(entries),
                    entries[0].seq,
                    entries[-1].seq,
                    extra={"first_seq": entries[0].seq, "last_seq": entries[-1].seq},
                )
        return len(entries)

    def _validate_then_lock(self, entries: list[LogEntry], turn: Turn | None) -> None:
        """One projector at a time (SQLite): validation and folding happen before the
        write lock is taken; inside it, the position is checked again (another
        projector, or a reproject's swap, may have moved it: then nothing is applied,
        ``entries`` is emptied, and the next step starts over; in turns, the pair does)."""
        position = self.store.position(self.generation) if turn is None else turn.start
        entries += self.read(self.store.read_log, position)
        if turn is not None:
            turn.read(entries)  # the partner folds what comes after these meanwhile
        if not entries:
            return
        prepared = prepare(entries)
        if turn is not None:
            turn.wait()
        with self.store.projection(self.generation) as tx:
            if tx.position() != position:
                entries.clear()
                if turn is not None:
                    raise TurnLost(f"the graph's position is {tx.position()}, not {position}")
                return
            commit(tx, prepared, notify=self._settle)

    def _claim_then_validate(self, entries: list[LogEntry]) -> None:
        """Several projectors at once (PostgreSQL): the transaction claims its
        deliveries first (the others skip them), then validates and applies them.
        Validating inside the transaction holds no lock anyone else waits for: only the
        claimed log rows are locked until the commit."""
        with self.store.projection(self.generation) as tx:
            entries += self.read(tx.read_log, tx.position())
            if entries:
                commit(tx, prepare(entries), notify=self._settle)

    def _ours(self, tx: ProjectionTx, entry: LogEntry) -> bool:
        """Whether ``entry`` is this transaction's to project: not projected yet, and
        claimed by it (not held by another projector). With one projector at a time it
        must also be the next delivery after the position: positions move in log order
        only, never past a delivery not yet projected (a partner's, turns.py)."""
        if not self.store.concurrent_projectors:
            return [e.seq for e in tx.read_log(tx.position(), 1, 1)] == [entry.seq]
        if tx.position() >= entry.seq:
            return False
        return [e.seq for e in tx.read_log(entry.seq - 1, 1, 1)] == [entry.seq]

    def _project_alone(self, entry: LogEntry) -> None:
        error = ""
        for _attempt in range(MAX_ATTEMPTS):
            try:
                with self.store.projection(self.generation) as tx:
                    if not self._ours(tx, entry):
                        return  # another projector got there first
                    apply(tx, [entry], notify=self._settle)
                return
            except StoreUnavailable:
                raise
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.exception(
                    "projection of delivery %s failed",
                    entry.delivery_id,
                    extra={"delivery_id": entry.delivery_id, "seq": entry.seq},
                )
        log.error(
            "delivery %s quarantined after %d failed projections: %s",
            entry.delivery_id,
            MAX_ATTEMPTS,
            error,
            extra={"delivery_id": entry.delivery_id, "seq": entry.seq},
        )
        with self.store.projection(self.generation) as tx:
            if not self._ours(tx, entry):
                return
            tx.save(FailureRow, [FailureRow(entry.seq, MAX_ATTEMPTS, error)])
            reason = f"projector error: {error}"
            tx.save(
                ItemRow,
                [
                    ItemRow.quarantined(entry.seq, idx, None, reason, retriable=True)
                    for idx in range(entry.item_count)
                ],
            )
            outcome = DeliveryOutcome(entry.seq, 0, entry.item_count, 0, encode_kinds(()))
            tx.save(DeliveryOutcome, [outcome])
            tx.set_position(entry.seq)

    def run_until_caught_up(self) -> int:
        total = self._take_turns(until_caught_up=True) if self._in_turns() else 0
        while (n := self.step()) > 0:  # alone: all of it, or what a broken pair left
            total += n
        return total

    def _in_turns(self) -> bool:
        """Whether this projector runs as a pair of processes (turns.py): asked for,
        and a store that writes one projection transaction at a time."""
        return self.limits.processes > 1 and not self.store.concurrent_projectors

    def _take_turns(self, until_caught_up: bool) -> int:
        """Project with a partner process taking every other step, until caught up
        (both found nothing) or stopped; return how many deliveries the pair read. The
        partner is stopped before this returns, whatever happens (when stopped, at
        once: a step it has in hand is projected again at the next start). A broken
        pair (a partner gone, the position moved under a turn: turns.TurnLost) is
        logged and ends this early; nothing it had in hand was committed out of order."""
        where = (self.store.url, self.generation, self.archived.location)
        partner = turns.Partner(
            "embrasure.projector.partner", (*where, self.limits, logs.configured())
        )
        self.partner, total = partner, 0
        try:
            # The first turn at once: where the partner's step starts waits in the pipe
            # while it starts, and it folds that step while this one is committed.
            start, first = self.store.position(self.generation), True
            while True:
                turn = turns.Turn(partner.conn, start, first)
                mine = self.step(turn)
                turn.done()
                start, theirs = partner.next(self._stop)
                first, total = False, total + mine + theirs
                idle = mine == 0 and theirs == 0
                if self._stop.is_set():  # now: what the partner has in hand rolls back
                    return total
                if until_caught_up and idle:
                    partner.finish()
                    return total
                if idle:
                    self._stop.wait(self.limits.idle_seconds)
        except turns.TurnLost as exc:
            if not self._stop.is_set():  # else stop() ended it
                log.warning("the projector's partner process is lost, starting over: %s", exc)
            return total
        finally:
            partner.kill()

    def start(self) -> None:
        self._stop.clear()  # started again after a stop (an app's lifespan run twice)
        self._thread = threading.Thread(target=self._run, name="embrasure-projector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self.generation is None and self.store.graph_version() != GRAPH_VERSION:
            # Built by another version of the projection: rebuild it beside the served
            # one (readers keep the old graph until the swap), then go on from there.
            log.warning("the graph was built by an older Embrasure; reprojecting the log")
            reproject(self.store, self.limits, self.archived)
            log.warning("reprojection done")
        pair_again = 0.0  # time.monotonic() after which a pair may start
        while not self._stop.is_set():
            try:
                if self._in_turns() and time.monotonic() >= pair_again:
                    # Until stopped, or broken (a partner gone, the store failing): then
                    # alone for a while, so a partner that cannot start or keeps dying is
                    # not started again every second beside the receiver.
                    pair_again = time.monotonic() + PAIR_AGAIN_S
                    self._take_turns(until_caught_up=False)
                elif self.step() == 0:
                    self._stop.wait(self.limits.idle_seconds)
            except StoreUnavailable as exc:
                log.warning("projector waiting for the store: %s", exc)
                self._stop.wait(1.0)
            except Exception:
                log.exception("projector loop error")
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        if self.partner is not None:  # at once: a step it has in hand rolls back
            self.partner.terminate()
        if self._thread is not None:
            self._thread.join()


def follow(conn: Connection) -> None:
    """The partner process of a projector taking turns (turns.py): steps from where the
    leader's end, until it says stop or is gone. Its first message says what to open."""
    url, generation, archive, limits, log_setup = turns.recv_args(conn)
    logs.configure(*log_setup)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the leader stops the pair, in order
    collector.tune_gc()
    store = open_store(url, create=False)
    try:
        turns.follow(conn, Projector(store, limits, generation, ArchivedBodies(archive)).step)
    except TurnLost as exc:  # the leader starts a new pair
        log.info("projector partner exits: %s", exc)
    finally:
        store.close()
