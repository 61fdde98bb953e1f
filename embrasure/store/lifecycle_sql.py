"""The retention pass's SQL (docs/operations.md#retention-and-the-archive), for both
backends: which bodies may leave, reading them, deleting them with the record of the
segment that holds them, and giving the space back.

Bodies leave in seq order, so "archived" is one number: every body up to the greatest
``log_segments.last_seq`` is in a recorded segment, every later one in the database. A
pass is a run of short transactions, each deleting at most one segment's bodies (≤ ~1,000
deliveries): the receiver's appends wait for none of them for long.

Shared statements are in SQLite's spelling (store/sql.py); what differs is how space is
given back: SQLite frees pages with an incremental vacuum, PostgreSQL drops the day
partitions of ``delivery_bodies`` whose every body is archived (a partition drop, not
millions of DELETEs) and deletes the rest.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence

import psycopg

from embrasure.errors import StoreError, StoreUnavailable
from embrasure.store import log_sql, schema
from embrasure.store.base import LogBody, LogTrimmer, SegmentRecord
from embrasure.store.compression import BodyCodec
from embrasure.store.connection import Connection
from embrasure.store.log_sql import dictionary_loader
from embrasure.store.pacing import Pacer, holding_the_lock, pause_after
from embrasure.store.postgres_conn import PgConnection, neutral
from embrasure.store.sql import MAX_PARAMS
from embrasure.store.sqlite_files import INCREMENTAL, free_pages
from embrasure.store.write_turns import WriteTurns

log = logging.getLogger("embrasure.retention")

# PostgreSQL: one retention pass at a time on a database (a session's advisory lock,
# beside postgres_graph's, in the same "embr" key space).
RETENTION_LOCK = 0x656D6272_00000005

# SQLite frees at most this many pages per write transaction (2 MiB of 4 KiB pages), so
# the vacuum never holds the write lock the receiver's group commit waits for for long.
VACUUM_PAGES = 512

# PostgreSQL: how long a partition drop waits for its lock on delivery_bodies (ACCESS
# EXCLUSIVE, for the few milliseconds of the DETACH and DROP). While it waits, every
# append queues behind it, so it waits little; one that times out is tried next pass.
DROP_LOCK_TIMEOUT = "200ms"


class SQLTrimmer(LogTrimmer):
    """The statements both backends share; a backend supplies its transactions and how
    space is given back."""

    conn: Connection
    codec: BodyCodec  # the store's: archived bodies are the bytes as received
    bodies: log_sql.BodySQL  # how the backend keys delivery_bodies

    @abc.abstractmethod
    def _tx(self, doing: str, write: bool = False) -> contextlib.AbstractContextManager[Connection]:
        """One transaction (``write``: one that deletes or records); each backend's."""

    def archived_through(self) -> int:
        with self._tx("reading the archived position") as conn:
            return _archived_through(conn)

    def trimmable_through(self, horizon: str) -> int:
        with self._tx("finding the bodies to archive") as conn:
            generation = int(conn.execute("SELECT generation FROM graph_meta").fetchone()[0])
            position = int(
                conn.execute(f"SELECT seq FROM {schema.prefix(generation)}position").fetchone()[0]
            )
            # The first delivery received at or after the horizon, looked for from the
            # archived position on (the deliveries_backlog index holds received_at in seq
            # order): everything before it was received before the horizon. A delivery
            # received just before the horizon but after a later seq stays a pass longer;
            # none ever leaves early.
            first_kept = conn.execute(
                "SELECT seq FROM deliveries WHERE seq > ? AND received_at >= ?"
                " ORDER BY seq LIMIT 1",
                (_archived_through(conn), horizon),
            ).fetchone()
            through = position if first_kept is None else min(position, int(first_kept[0]) - 1)
            self._plan(conn, horizon, through)
            return through

    def _plan(self, conn: Connection, horizon: str, through: int) -> None:
        """What a backend decides once per pass (PostgreSQL: the partitions to drop)."""

    def untrimmed(
        self, after_seq: int, through_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[LogBody]:
        with self._tx("reading bodies to archive") as conn:
            rows = conn.execute(
                "SELECT d.seq, d.delivery_id, d.provider_key, d.received_at, b.dict_id, b.body"
                " FROM delivery_bodies b CROSS JOIN deliveries d ON d.seq = b.seq"
                " WHERE b.seq > ? AND b.seq <= ? ORDER BY b.seq LIMIT ?",
                (after_seq, through_seq, limit),
            ).fetchall()  # compressed: small beside what they decompress to
            fetch = dictionary_loader(conn)
            out: list[LogBody] = []
            size = 0
            for seq, d_id, key, at, dict_id, body in rows:
                raw = self.codec.decompress(dict_id, bytes(body), fetch)
                out.append(LogBody(seq, d_id, key, at, raw))
                size += len(raw)
                if max_bytes is not None and size >= max_bytes:
                    break
            return out

    def delivery_ids(self, seqs: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(seqs))
        out: dict[int, str] = {}
        with self._tx("reading delivery ids") as conn:
            for start in range(0, len(wanted), MAX_PARAMS):
                chunk = wanted[start : start + MAX_PARAMS]
                marks = ", ".join("?" for _ in chunk)
                rows = conn.execute(
                    f"SELECT seq, delivery_id FROM deliveries WHERE seq IN ({marks})", chunk
                )
                out.update((int(seq), str(delivery_id)) for seq, delivery_id in rows)
        return out

    def trim(self, segment: SegmentRecord, seqs: Sequence[int]) -> int:
        with self._tx("trimming archived bodies", write=True) as conn:
            after = _archived_through(conn)
            if segment.first_seq <= after:
                raise StoreError(
                    f"segment {segment.name} starts at seq {segment.first_seq}, at or before"
                    f" the archived position {after}: it repeats archived deliveries"
                )
            stored = [
                (int(seq), int(size))
                for seq, size in conn.execute(
                    "SELECT seq, length(body) FROM delivery_bodies WHERE seq > ? AND seq <= ?",
                    (after, segment.last_seq),
                )
            ]
            missing = sorted({seq for seq, _ in stored} - set(seqs))
            if missing:
                # A body the segment does not hold would be lost: delete nothing.
                raise StoreError(
                    f"segment {segment.name} lacks {len(missing)} bodies stored between"
                    f" seq {after + 1} and {segment.last_seq} (first: {missing[0]})"
                )
            freed = self._delete(conn, after, segment.last_seq)
            conn.execute(
                "INSERT INTO log_segments (name, first_seq, last_seq, delivery_count, sha256,"
                " archived_at) VALUES (?, ?, ?, ?, ?, ?)",
                tuple(segment),
            )
            return freed if freed is not None else sum(size for _, size in stored)

    def trimmed(self, after_seq: int, limit: int) -> list[tuple[int, str]]:
        with self._tx("listing trimmed deliveries") as conn:
            rows = conn.execute(
                "SELECT d.seq, d.body_sha256 FROM deliveries d WHERE d.seq > ? AND d.seq <= ?"
                " AND NOT EXISTS (SELECT 1 FROM delivery_bodies b WHERE"
                f" {self.bodies.match}) ORDER BY d.seq LIMIT ?",
                (after_seq, _archived_through(conn), limit),
            )
            return [(int(seq), str(sha)) for seq, sha in rows]

    def _delete(self, conn: Connection, after: int, through: int) -> int | None:
        """Delete the bodies in (after, through]; the bytes deleted, or None for all of
        those counted."""
        conn.execute("DELETE FROM delivery_bodies WHERE seq > ? AND seq <= ?", (after, through))
        return None


def _archived_through(conn: Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(last_seq), 0) FROM log_segments").fetchone()[0])


# -- SQLite --------------------------------------------------------------------------------


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[bool]:
    """An exclusive lock on ``path`` (created beside the database) for as long as the
    block runs: True when this process got it, False when another holds it. The
    kernel drops it when the process dies, kill -9 included."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class SQLiteTrimmer(SQLTrimmer):
    bodies = log_sql.SQLITE_BODIES

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str,
        codec: BodyCodec,
        turns: WriteTurns,
        graph: tuple[sqlite3.Connection, WriteTurns] | None = None,
    ) -> None:
        self.conn = self.sqlite = conn
        self.path = path
        self.codec = codec
        self.turns = turns
        # The graph's file (store/sqlite_files.py), whose free pages (runs trimmed, a
        # generation a reprojection dropped) a pass gives back too, as it gives back the
        # log's.
        self.graph = graph

    @contextlib.contextmanager
    def _tx(
        self,
        doing: str,
        write: bool = False,
        on: tuple[sqlite3.Connection, WriteTurns] | None = None,
    ) -> Iterator[Connection]:
        conn, turns = on or (self.sqlite, self.turns)
        try:
            # A write takes the write lock at once, in its turn among the process's
            # writers (store/write_turns.py): a deferred transaction that reads, then
            # writes, can fail with SQLITE_BUSY instead of waiting its turn.
            with self._write_turn(turns) if write else contextlib.nullcontext():
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{doing} in {self.path}: {exc}") from exc

    @contextlib.contextmanager
    def _write_turn(self, turns: WriteTurns) -> Iterator[None]:
        """A write of this trimmer is a step of a retention pass: in its turn among the
        process's writers, with the GIL back quickly to the thread they all wait for
        (store/pacing.py HELD_SWITCH_INTERVAL_S)."""
        with holding_the_lock(), turns.turn():
            yield

    def give_back(self, horizon: str, free_at_start: int | None = None) -> int:
        # auto_vacuum=INCREMENTAL (docs/operations.md#retention-and-the-archive): the
        # pages of deleted bodies and runs go to the free list, and each step returns
        # up to VACUUM_PAGES of them (as many as a Pacer allows) to the OS in one write
        # transaction, then pauses (store/pacing.py). Python's sqlite3 runs a statement
        # that returns no rows for one sqlite3_step, and ``PRAGMA incremental_vacuum(N)``
        # frees one page a step: so a step is that many one-page statements inside
        # BEGIN ... COMMIT. (Run
        # alone, each statement was a transaction and an fsync of its own for one page,
        # thousands back to back: 10 s a pass in the soak, the receiver waiting behind.)
        # A pass returns at most the pages free when it began: the projector frees and
        # reuses pages all the time, and there is no end to chasing those.
        # A server's pass (``free_at_start`` given) keeps as many as it freed: the
        # writers of the next interval fill them instead of growing the file again, and
        # only pages left unused for a whole interval go back. The log's file, then the
        # graph's (store/sqlite_files.py): ``free_at_start`` counts both's
        # (SQLiteStore.free_pages), and bounds what both give back.
        given = self._give_back((self.sqlite, self.turns), free_at_start)
        if self.graph is not None:
            left = None if free_at_start is None else max(0, free_at_start - given)
            given += self._give_back(self.graph, left)
        page_size = int(self.sqlite.execute("PRAGMA page_size").fetchone()[0])
        return given * page_size

    def _give_back(
        self, on: tuple[sqlite3.Connection, WriteTurns], free_at_start: int | None
    ) -> int:
        """Pages of one file given back (``give_back``)."""
        conn = on[0]
        try:
            if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != INCREMENTAL:
                return 0  # an older database `embrasure db upgrade` has not converted
            before = free_pages(conn)
            goal = before if free_at_start is None else min(before, free_at_start)
            keep = before - goal
            left, given = goal, 0
            pacer = Pacer(start=64, low=8, high=VACUUM_PAGES)
            while left > 0:
                step = min(pacer.size, left)
                with self._tx("vacuuming", write=True, on=on):
                    started = time.monotonic()  # once the lock is ours, not in the queue
                    for _ in range(step):
                        conn.execute("PRAGMA incremental_vacuum(1)")
                held = time.monotonic() - started
                given += step
                pacer.held(held, step)
                now = free_pages(conn)
                left = min(left - step, now - keep)
                if left > 0:
                    pause_after(held, f"vacuum of {step} pages")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"vacuuming {self.path}: {exc}") from exc
        return given


# -- PostgreSQL ------------------------------------------------------------------------------

_UPPER_BOUND = re.compile(r"TO \('([^']*)'\)")


class PostgresTrimmer(SQLTrimmer):
    """``delivery_bodies`` is partitioned by day of received_at, with a DEFAULT
    partition. A day partition wholly before the horizon whose every body leaves in this
    pass is not DELETEd from, batch after batch: once its bodies are all archived, it is
    detached and dropped. Elsewhere (today's partition, the DEFAULT one) archived bodies
    are deleted."""

    bodies = log_sql.POSTGRES_BODIES

    def __init__(self, conn: PgConnection, name: str, codec: BodyCodec) -> None:
        self.conn = self.pg = conn
        self.name = name
        self.codec = codec
        self.dropped_whole: list[int] = []  # oids of the partitions this pass drops

    @contextlib.contextmanager
    def _tx(self, doing: str, write: bool = False) -> Iterator[Connection]:
        conn = self.pg
        try:
            conn.execute("BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.raw.execute("ROLLBACK")
                raise
        except psycopg.Error as exc:
            raise neutral(exc, f"{doing} on {self.name}") from exc

    def _partitions(self, conn: Connection) -> list[tuple[int, str, str | None]]:
        """(oid, name, upper bound or None for DEFAULT) of each partition, by bound."""
        rows = conn.execute(
            "SELECT c.oid, c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'delivery_bodies'::regclass"
        ).fetchall()
        out: list[tuple[int, str, str | None]] = []
        for oid, name, bound in rows:
            upper = _UPPER_BOUND.search(bound or "")
            out.append((int(oid), str(name), upper.group(1) if upper else None))
        return sorted(out, key=lambda p: (p[2] is None, p[2] or ""))

    @staticmethod
    def _max_seq(conn: Connection, partition: str) -> int | None:
        row = conn.execute(f'SELECT MAX(seq) FROM "{partition}"').fetchone()
        return None if row[0] is None else int(row[0])

    def _plan(self, conn: Connection, horizon: str, through: int) -> None:
        self.dropped_whole = []
        for oid, name, upper in self._partitions(conn):
            if upper is None or upper > horizon:
                continue  # DEFAULT, or a day that may still receive deliveries
            last = self._max_seq(conn, name)
            if last is not None and last <= through:
                self.dropped_whole.append(oid)

    def _delete(self, conn: Connection, after: int, through: int) -> int | None:
        # Counted before deleting: the bodies left in partitions dropped whole later
        # are freed then, and counted by give_back.
        row = conn.execute(
            "SELECT COALESCE(SUM(length(body)), 0) FROM delivery_bodies"
            " WHERE seq > ? AND seq <= ? AND tableoid <> ALL(?::oid[])",
            (after, through, self.dropped_whole),
        ).fetchone()
        conn.execute(
            "DELETE FROM delivery_bodies WHERE seq > ? AND seq <= ? AND tableoid <> ALL(?::oid[])",
            (after, through, self.dropped_whole),
        )
        return int(row[0])

    def give_back(self, horizon: str, free_at_start: int | None = None) -> int:
        freed = 0
        with self._tx("listing body partitions") as conn:
            archived = _archived_through(conn)
            partitions = self._partitions(conn)
        for _oid, name, upper in partitions:
            with self._tx(f"measuring {name}") as conn:
                last = self._max_seq(conn, name)
            if upper is not None and upper <= horizon and (last is None or last <= archived):
                try:
                    freed += self._drop(name)
                except StoreUnavailable as exc:  # its lock not had in time: next pass
                    log.warning("partition %s not dropped this pass: %s", name, exc)
                continue
            with self._tx(f"giving back the space of {name}", write=True) as conn:
                # Archived bodies a batch left for a drop that did not come (the pass
                # stopped: an archive failure, a kill -9), in a partition that still
                # holds unarchived ones: delete them.
                row = conn.execute(
                    f'SELECT COALESCE(SUM(length(body)), 0) FROM "{name}" WHERE seq <= ?',
                    (archived,),
                ).fetchone()
                if int(row[0]):
                    conn.execute(f'DELETE FROM "{name}" WHERE seq <= ?', (archived,))
                    freed += int(row[0])
        return freed

    def _drop(self, name: str) -> int:
        """Every body in the partition is archived and its day is over: detach and drop
        it; its size on disk."""
        with self._tx(f"dropping {name}", write=True) as conn:
            conn.execute(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
            size = int(
                conn.execute("SELECT pg_total_relation_size(?::regclass)", (name,)).fetchone()[0]
            )
            conn.execute(f'ALTER TABLE delivery_bodies DETACH PARTITION "{name}"')
            conn.execute(f'DROP TABLE "{name}"')
            return size
