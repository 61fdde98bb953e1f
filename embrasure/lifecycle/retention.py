"""The retention pass (docs/operations.md#retention-and-the-archive): the bodies of
projected deliveries received before now - ``--retain-log`` move to the archive.

One pass repeats, in seq order: take at most BATCH bodies that may leave → write them as
one archive segment (``Archive.write_segment`` returns once the segment is durable, read
back and its hash checked, and its manifest entry written) → one short transaction that
records the segment and deletes those bodies. Then it gives the space back (an
incremental vacuum; on PostgreSQL, day partitions dropped whole).

Crash-safe: a body leaves the database only in the transaction that records a segment
holding it, after that segment is durable; so after a kill -9 at any instant each body is
in the database, in a verified segment, or both. "Both" is the one segment a pass wrote
and did not record: the next pass *adopts* it (reads it back, checks its hash and that
its deliveries are this log's, then records it and deletes its bodies) before archiving
anything else, so no delivery is ever archived in two segments. An archive that cannot
be written stops the pass with ArchiveUnavailable before anything is deleted.

A delivery's row (id, receipt, dedupe key, state, item outcomes) stays for good: status
lookups and duplicate detection never read a body.
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import cast

from embrasure.errors import ArchiveCorrupt, ArchiveError, EmbrasureError, StoreError
from embrasure.lifecycle.archive import Archive, ArchivedDelivery, Segment
from embrasure.lifecycle.run_retention import horizon_key, trim_runs
from embrasure.lifecycle.segments import deliveries
from embrasure.model import utc_now
from embrasure.store import Store
from embrasure.store.base import LogTrimmer, SegmentRecord
from embrasure.store.pacing import pause_after, sharing_the_cpu

log = logging.getLogger("embrasure.retention")

# Deliveries per segment, and so per deleting transaction: small enough that the
# receiver's appends never wait long behind one (docs/operations.md).
BATCH = 1000
# And at most this many bytes of bodies (as received) per segment: a pass holds a
# segment's bodies several times over while it writes and reads it back (the bodies,
# their JSON Lines, the decompressed read-back), and 1,000 batch bodies of 230 KB made
# that ~700 MB, which the allocator kept (bench/storage_soak.py's RSS). And each
# segment's copies, compressions and writes come in one burst beside the receiver: at 16
# MiB, 17 of the soak's 49 slowest receipts during passes came in the segments' part,
# at 4 MiB 1 (bench/README.md "The pass's share of the CPU").
SEGMENT_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class PassReport:
    """What one pass did. ``error`` is why it stopped early (nothing it had not
    archived was deleted); ``skipped`` says another pass held the lock."""

    started_at: str
    horizon: str
    segments: int = 0
    adopted: int = 0  # segments a stopped pass wrote and this one recorded
    bodies: int = 0  # deliveries archived (adopted ones included)
    bytes_archived: int = 0  # their bodies' original bytes
    bytes_trimmed: int = 0  # stored (compressed) bytes deleted from the database
    bytes_given_back: int = 0  # file pages, or dropped partitions, returned
    seconds: float = 0.0
    skipped: bool = False
    error: str | None = None

    def summary(self) -> str:
        if self.skipped:
            return "another retention pass is running on this database: nothing done"
        segments = f"{self.segments} segment" + ("" if self.segments == 1 else "s")
        text = (
            f"archived {deliveries(self.bodies)} ({self.bytes_archived} bytes) received"
            f" before {self.horizon} in {segments}"
            + (f" ({self.adopted} adopted from a stopped pass)" if self.adopted else "")
            + f"; deleted {self.bytes_trimmed} stored bytes, gave back"
            f" {self.bytes_given_back} bytes; {self.seconds:.1f} s"
        )
        return text + (f"; stopped: {self.error}" if self.error else "")


def horizon_of(retain: datetime.timedelta, now: datetime.datetime | None = None) -> str:
    """now - retain, spelled as received_at is (model.utc_now), so the two compare as text."""
    moment = (now or datetime.datetime.now(datetime.UTC)) - retain
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run_pass(
    store: Store,
    archive: Archive,
    retain: datetime.timedelta,
    *,
    batch: int = BATCH,
    segment_bytes: int = SEGMENT_BYTES,
    stop: threading.Event | None = None,
    free_at_start: int | None = None,
) -> PassReport:
    """One pass (``stop``, when set, ends it between two segments). Archive and store
    failures do not raise: the report says why the pass stopped, and it is logged. Only
    failing to reach the database at all raises StoreError. ``free_at_start``: see
    ``LogTrimmer.give_back`` (a server's passes keep the pages they free)."""
    started = time.monotonic()
    report = PassReport(started_at=utc_now(), horizon=horizon_of(retain))
    with store.log_trimmer() as trimmer:
        if trimmer is None:
            return dataclasses.replace(report, skipped=True)
        work = _Pass(trimmer, archive, report, batch, segment_bytes, stop or threading.Event())
        log.info("retention pass started: bodies received before %s", report.horizon)
        try:
            work.adopt()
            work.archive()
        except (ArchiveError, StoreError) as exc:
            work.fail(exc)
        try:
            work.give_back(free_at_start)
        except StoreError as exc:
            work.fail(exc)
    report = dataclasses.replace(work.report, seconds=time.monotonic() - started)
    if report.error is None:
        # ``seconds`` as a field too: a log pipeline (and bench/storage_soak.py) can
        # tell what happened while a pass ran.
        log.info("retention pass: %s", report.summary(), extra={"seconds": report.seconds})
    return report


class _Pass:
    def __init__(
        self,
        trimmer: LogTrimmer,
        archive: Archive,
        report: PassReport,
        batch: int,
        segment_bytes: int,
        stop: threading.Event,
    ) -> None:
        self.trimmer = trimmer
        self.store_archive = archive
        self.report = report
        self.batch = batch
        self.segment_bytes = segment_bytes
        self.stop = stop
        self.archived = 0

    def _count(self, segment: Segment, deliveries: list[ArchivedDelivery], trimmed: int) -> None:
        r = self.report
        self.report = dataclasses.replace(
            r,
            segments=r.segments + 1,
            bodies=r.bodies + segment.count,
            bytes_archived=r.bytes_archived + sum(len(d.body) for d in deliveries),
            bytes_trimmed=r.bytes_trimmed + trimmed,
        )
        self.archived = segment.last_seq

    def _trim(self, segment: Segment) -> int:
        record = SegmentRecord(
            segment.name,
            segment.first_seq,
            segment.last_seq,
            segment.count,
            segment.sha256,
            utc_now(),
        )
        started = time.monotonic()
        trimmed = self.trimmer.trim(record, segment.seqs)
        # The receiver's turn (store/pacing.py).
        pause_after(time.monotonic() - started, f"trim of segment {segment.name}")
        return trimmed

    def adopt(self) -> None:
        """Record the segments the manifest lists past the archived position: written by
        a pass that stopped before its transaction committed. Each is read back (hash
        checked) and its deliveries matched to this log's before any body is deleted."""
        self.archived = self.trimmer.archived_through()
        for segment in self.store_archive.segments():
            if segment.last_seq <= self.archived:
                continue
            if segment.first_seq <= self.archived:
                raise ArchiveCorrupt(
                    f"segment {segment.name} (seq {segment.first_seq} to {segment.last_seq})"
                    f" overlaps deliveries archived already (up to seq {self.archived}):"
                    " another database's archive, or a second writer? Run `embrasure"
                    " archive verify`"
                )
            deliveries = self.store_archive.read_segment(segment)
            ids = self.trimmer.delivery_ids(d.seq for d in deliveries)
            strangers = [d.seq for d in deliveries if ids.get(d.seq) != d.delivery_id]
            if strangers:
                raise ArchiveCorrupt(
                    f"segment {segment.name} holds deliveries this database does not"
                    f" (seq {strangers[0]} and {len(strangers) - 1} more): is the archive"
                    " another database's?"
                )
            trimmed = self._trim(segment)
            self._count(segment, deliveries, trimmed)
            self.report = dataclasses.replace(self.report, adopted=self.report.adopted + 1)
            log.warning(
                "adopted segment %s, written by a retention pass that stopped before recording it",
                segment.name,
            )

    def archive(self) -> None:
        through = self.trimmer.trimmable_through(self.report.horizon)
        while not self.stop.is_set() and (
            bodies := self.trimmer.untrimmed(self.archived, through, self.batch, self.segment_bytes)
        ):
            deliveries = [ArchivedDelivery(*b) for b in bodies]
            segment = self.store_archive.write_segment(deliveries)
            self._count(segment, deliveries, self._trim(segment))

    def give_back(self, free_at_start: int | None) -> None:
        freed = self.trimmer.give_back(self.report.horizon, free_at_start)
        self.report = dataclasses.replace(self.report, bytes_given_back=freed)

    def fail(self, exc: EmbrasureError) -> None:
        self.report = dataclasses.replace(self.report, error=str(exc))
        log.error("retention pass stopped, no unarchived body deleted: %s", exc)


def trimmed_deliveries(store: Store, page: int = 10_000) -> Iterator[tuple[int, str]]:
    """(seq, body_sha256) of every delivery whose body retention moved out of the
    database, in seq order: each must be in the archive with that SHA-256
    (``Archive.verify(expected=…)``, `embrasure archive verify --db`). Read while no
    pass runs (the retention lock held), so none is half done."""
    with store.log_trimmer() as trimmer:
        if trimmer is None:
            raise StoreError("a retention pass is running on this database: verify after it")
        after = 0
        while rows := trimmer.trimmed(after, page):
            yield from rows
            after = rows[-1][0]


# -- every --retention-interval, in serve and project -----------------------------------


def _libc_trim() -> Callable[[int], int] | None:
    try:
        return cast(Callable[[int], int], ctypes.CDLL(None).malloc_trim)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to call
        return None


_MALLOC_TRIM = _libc_trim()


def _return_freed_memory() -> None:
    """Hand the memory a pass freed back to the OS. glibc keeps freed blocks in its
    arenas: in the soak (bench/storage_soak.py) they held 170 to 200 MB free after the
    passes' segments had come and gone, and the server's RSS rose with them.
    ``malloc_trim`` releases the free pages of every arena (a few ms)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


@dataclasses.dataclass
class RetentionState:
    """What /metrics and /readyz report of this process's passes (web/metrics.py,
    web/health.py)."""

    passes: int = 0
    failures: int = 0
    bodies_archived: int = 0
    bytes_freed: int = 0  # stored bytes deleted, and bytes given back
    last: PassReport | None = None
    last_finished: float | None = None  # time.time() at the end of the last pass
    last_error: str | None = None  # the last pass's, None once one succeeds
    runs_removed: int = 0  # by --retain-runs


class RetentionLoop:
    """Runs ``run_pass`` every ``interval`` seconds in a thread, the first pass at
    start; ``state`` is what the passes did so far."""

    def __init__(
        self,
        store: Store,
        location: str,
        retain: datetime.timedelta | None,
        interval: float,
        open_archive: Callable[[str], Archive] = Archive,
        retain_runs: datetime.timedelta | None = None,
    ) -> None:
        self.store = store
        self.location = location
        self.retain = retain
        self.retain_runs = retain_runs
        self.interval = interval
        self.open_archive = open_archive
        self.state = RetentionState()
        self._archive: Archive | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> PassReport:
        # Pages free now went unused for an interval and go back; the pages this pass
        # frees are left for the next interval's writes (LogTrimmer.give_back), so that
        # the file does not shrink at each pass only to grow again.
        free_at_start = self.store.free_pages()
        if self.retain_runs is not None:
            self._trim_runs(self.retain_runs)
        if self.retain is None:
            return PassReport(utc_now(), "")
        try:
            # Opened at the first pass, not at start-up: the server takes deliveries
            # while the archive is unreachable, and reports why (/readyz, /metrics).
            if self._archive is None:
                self._archive = self.open_archive(self.location)
            report = run_pass(
                self.store, self._archive, self.retain, stop=self._stop, free_at_start=free_at_start
            )
        except EmbrasureError as exc:
            log.error("retention pass could not run: %s", exc)
            report = PassReport(utc_now(), horizon_of(self.retain), error=str(exc))
        _return_freed_memory()
        with self._lock:
            s = self.state
            s.passes += 1
            s.bodies_archived += report.bodies
            s.bytes_freed += report.bytes_trimmed + report.bytes_given_back
            s.failures += report.error is not None
            s.last, s.last_finished, s.last_error = report, time.time(), report.error
        return report

    def _trim_runs(self, retain: datetime.timedelta) -> None:
        try:
            report = trim_runs(self.store, horizon_key(retain))
        except EmbrasureError as exc:
            log.error("run retention could not run: %s", exc)
            with self._lock:
                self.state.failures += 1
                self.state.last_error = str(exc)
            return
        with self._lock:
            self.state.runs_removed += report.runs

    def snapshot(self) -> RetentionState:
        with self._lock:
            return dataclasses.replace(self.state)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="embrasure-retention", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Beside the receiver and the projector, on their GIL: at most a share of the
        # CPU (store/pacing.py).
        with sharing_the_cpu():
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    self.run_once()
                except Exception:
                    log.exception("retention pass failed")
                # A pass starts every interval, however long the last one took (one
                # longer than the interval is followed by the next at once).
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
