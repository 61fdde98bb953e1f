"""The embedded SQLite backend: two files (the log, and the graph beside it:
store/sqlite_files.py), WAL mode, ``synchronous=FULL``.

One writer connection to the log, used only by the group-commit thread
(``group_commit.GroupCommitter``) and by migrations; one projector connection to the
graph; readers get a connection per thread, to the graph with the log attached. In WAL
mode with ``synchronous=FULL`` SQLite syncs the WAL before COMMIT returns, so a returned
``append`` is durable (https://www.sqlite.org/pragma.html#pragma_synchronous).
"""

from __future__ import annotations

import _sqlite3
import contextlib
import ctypes
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

from embrasure.errors import ReadTooLong, StoreError, StoreUnavailable
from embrasure.model import DeliveryDraft, DeliveryIds, Grant, Token, utc_now
from embrasure.store import log_sql, migrations, schema, sql, sqlite_files
from embrasure.store.base import (
    AppendResult,
    GraphReader,
    LogEntry,
    LogTrimmer,
    ProjectionTx,
    Store,
)
from embrasure.store.checkpoints import Checkpointer
from embrasure.store.compression import BodyCodec
from embrasure.store.interned import InternCaches
from embrasure.store.reads import SQLReader
from embrasure.store.sqlite_graph import SQLiteProjectionTx
from embrasure.store.write_turns import WriteTurns

T = TypeVar("T")
BUSY_TIMEOUT_MS = sqlite_files.BUSY_TIMEOUT_MS
PROJECTOR_CACHE_KIB = 128 * 1024
# SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN (primary result
# codes): a full disk can fail a read too (a reader opening its connection), a 503.
UNAVAILABLE_CODES = frozenset({5, 6, 10, 13, 14})
INCREMENTAL = sqlite_files.INCREMENTAL
SQLITE_INTERRUPT = 9  # https://www.sqlite.org/rescode.html#interrupt
# VM steps between two looks at a read's deadline: ~1 ms of a query's work, a clock read.
PROGRESS_STEPS = 50_000


def _memory_used_function() -> Callable[[], int] | None:
    """sqlite3_memory_used() of the library the sqlite3 module is linked with: every
    byte SQLite's allocator holds in this process, every connection's page cache
    included (the projector's grows up to PROJECTOR_CACHE_KIB)."""
    try:
        used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):  # a build that does not export it
        return None
    used.restype, used.argtypes = ctypes.c_int64, []
    return cast(Callable[[], int], used)


_MEMORY_USED = _memory_used_function()


class SQLiteStore(Store):
    dialect = "sqlite"

    def __init__(self, path: str, *, upgrade: bool = False, compress: bool = True) -> None:
        self.path = path
        self.url = "sqlite:///" + path
        self.graph_path = sqlite_files.graph_path_of(path)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreError(f"cannot open {path}: directory {parent} does not exist")
        # Each file's writers in this process take turns at its write lock
        # (store/write_turns.py), and its WAL is checkpointed after each turn, outside
        # it (store/checkpoints.py).
        self._turns = WriteTurns(
            after=lambda: self._checkpoints.wrote(), lock_path=path + "-writelock"
        )
        self._checkpoints = Checkpointer(lambda: self._log_conn(), self._turns.turn)
        self._graph_turns = WriteTurns(
            after=lambda: self._graph_checkpoints.wrote(),
            lock_path=self.graph_path + "-writelock",
        )
        self._graph_checkpoints = Checkpointer(
            lambda: sqlite_files.connect(self.graph_path), self._graph_turns.turn
        )
        try:
            self._writer = self._log_conn()
            applied = self._migrate(upgrade)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from exc
        self.migrations_applied = applied
        self._ids = DeliveryIds()
        self.codec = BodyCodec(compress)
        self.codec.load(log_sql.dictionaries(self._writer))
        self.codec.train_with(self._save_dictionary, self._compress_bodies)
        self._local = threading.local()
        if migrations.BODIES_MOVED in applied:
            self._compress_bodies()
        if migrations.BODIES_MOVED in applied or migrations.GRAPH_FILE in applied:
            self.give_space_back()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._projector: sqlite3.Connection | None = None
        self._projector_lock = threading.Lock()
        self._interned = InternCaches()

    def _log_conn(self) -> sqlite3.Connection:
        return sqlite_files.connect(self.path)

    def _graph_conn(self) -> sqlite3.Connection:
        """The graph, with the log attached read-only (store/sqlite_files.py)."""
        return sqlite_files.connect(self.graph_path, log_path=self.path)

    # -- schema ---------------------------------------------------------------------

    def _migrate(self, upgrade: bool) -> list[int]:
        conn = self._writer
        name = f"sqlite:///{self.path}"
        conn.execute("BEGIN IMMEDIATE")  # the migration lock: one process at a time
        try:
            applied = migrations.upgrade(conn.execute, "sqlite", name, upgrade, utc_now())
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        # Migration 17, which ``upgrade`` leaves to the store: the graph leaves the log's
        # file (an empty one, for a database made just now), in two transactions, the
        # copy committed before the tables leave (sqlite_files.py): SQLite commits a
        # transaction over two WAL files one file after the other.
        moved = sqlite_files.has_graph(conn)
        with contextlib.closing(self._graph_conn()) as graph:
            if moved:
                sqlite_files.copy_graph(graph)
            elif not sqlite_files.has_graph(graph):
                sqlite_files.new_graph(graph)
        if moved or migrations.GRAPH_FILE not in self._versions():
            sqlite_files.drop_moved_graph(conn, record=True, now=utc_now())
            applied.append(migrations.GRAPH_FILE)
        # The steps after 17, which ``upgrade`` stopped before (a new database, or one
        # upgraded from before 17).
        current = max(self._versions())
        if migrations.pending(current):
            conn.execute("BEGIN IMMEDIATE")
            try:
                applied += migrations.apply(conn.execute, "sqlite", current, utc_now())
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return applied

    def _versions(self) -> set[int]:
        return {v for (v,) in self._writer.execute("SELECT version FROM embrasure_schema")}

    def _compress_bodies(self, batch: int = 1000) -> None:
        """Compress again the bodies stored without a dictionary (as received by a
        version before migration 6, or before the first dictionary), ``batch`` a
        transaction: log_sql.compress_again."""
        seq = 0
        while True:
            with self._short_write() as conn:
                seq = log_sql.compress_again(conn, self.codec, log_sql.SQLITE_BODIES, seq, batch)
            if not seq:
                return

    def give_space_back(self) -> None:
        """Return the file's free pages to the filesystem. A database created before
        migration 6 has auto_vacuum off, which only a rewrite of the whole file changes
        (https://www.sqlite.org/pragma.html#pragma_auto_vacuum): VACUUM it once."""
        conn = self._writer
        if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != INCREMENTAL:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("VACUUM")
        else:
            # One page per statement from Python's sqlite3 (lifecycle_sql.py give_back):
            # the free pages' count of them, in one transaction.
            (free,) = conn.execute("PRAGMA freelist_count").fetchone()
            conn.execute("BEGIN IMMEDIATE")
            for _ in range(int(free)):
                conn.execute("PRAGMA incremental_vacuum(1)")
            conn.execute("COMMIT")

    def schema_version(self) -> int:
        row = self._read().execute("SELECT MAX(version) FROM embrasure_schema").fetchone()
        return int(row[0])

    # -- the log ----------------------------------------------------------------------

    def append(self, drafts: Sequence[DeliveryDraft]) -> list[AppendResult]:
        # A handful of statements per group, whatever its size: the group-commit thread
        # takes the GIL back after each one, and the event loop holds it most of the time.
        conn = self._writer
        packed = [self.codec.compress(d.body) for d in drafts]
        try:
            with self._turns.turn():
                conn.execute("BEGIN IMMEDIATE")
                results = log_sql.append(conn, log_sql.SQLITE_BODIES, drafts, packed, self._ids.new)
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have rolled back
                    conn.execute("ROLLBACK")
            raise StoreUnavailable(f"the delivery log could not commit: {exc}") from exc
        self.codec.appended(packed)
        return results

    # -- reads ------------------------------------------------------------------------

    def _read(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._graph_conn()
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    # -- the projector's side -----------------------------------------------------------

    def generation(self, conn: sqlite3.Connection | None = None) -> int:
        row = (
            (conn or self._read())
            .execute("SELECT generation FROM graph_meta WHERE id = 1")
            .fetchone()
        )
        return int(row[0])

    def position(self, generation: int | None = None) -> int:
        conn = self._read()
        prefix = schema.prefix(self.generation(conn) if generation is None else generation)
        return int(conn.execute(f"SELECT seq FROM {prefix}position").fetchone()[0])

    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        return log_sql.read_log(
            self._read(), self.codec, log_sql.SQLITE_BODIES, after_seq, limit, max_bytes, max_items
        )

    def free_disk_bytes(self) -> int | None:
        stat = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        return stat.f_bavail * stat.f_frsize  # what an unprivileged writer may still use

    def free_pages(self) -> int | None:
        try:  # both files' (a retention pass gives back both's: SQLiteTrimmer.give_back)
            conn = self._read()
            return sqlite_files.free_pages(conn) + sqlite_files.free_pages(conn, "log")
        except sqlite3.Error:
            return None

    def engine_memory_bytes(self) -> int | None:
        return None if _MEMORY_USED is None else _MEMORY_USED()

    @contextlib.contextmanager
    def projection(self, generation: int | None = None) -> Iterator[ProjectionTx]:
        # One projector connection, one projection at a time in this process, in its
        # turn among the process's writers of the graph's file; other processes wait on
        # SQLite's write lock (busy_timeout). The log's writers never wait for it.
        with self._projector_lock, self._graph_turns.turn():
            if self._projector is None:
                self._projector = self._graph_conn()
                # The projector touches index pages all over the graph in every
                # transaction; SQLite's default 2 MiB page cache re-reads them from the
                # OS each time.
                self._projector.execute(f"PRAGMA cache_size = -{PROJECTOR_CACHE_KIB}")
                # The graph is derived from the log and its position commits with it, so
                # a projection transaction need not reach the disk before the next one
                # starts: after a power loss the graph is as of an earlier position (WAL
                # frames are checksummed and replayed in order) and the projector
                # re-projects the rest. The receiver's connection keeps FULL: a receipt
                # means the delivery is on disk.
                self._projector.execute("PRAGMA synchronous = NORMAL")
            conn = self._projector
            try:
                conn.execute("BEGIN IMMEDIATE")
                gen = self.generation(conn) if generation is None else generation
                prefix = schema.prefix(gen)
                tx = SQLiteProjectionTx(conn, prefix, self.codec, self._interned.of(prefix))
                yield tx
                conn.execute("COMMIT")
                tx.interner.committed()
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreUnavailable(f"projection could not commit: {exc}") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def graph_version(self) -> int:
        row = self._read().execute("SELECT graph_version FROM graph_meta WHERE id = 1").fetchone()
        return int(row[0])

    def create_generation(self) -> int:
        with self.projection() as tx:
            assert isinstance(tx, SQLiteProjectionTx)
            conn = tx.conn
            served = self.generation(conn)
            new = served + 1
            tables = [
                n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            for leftover in sql.other_generations(tables, served):  # a killed reproject's
                self._drop(conn, leftover)
            tables, _deferred = self._generation_sql(new)
            for statement in tables:
                conn.execute(statement)
            conn.execute(f"INSERT INTO {schema.prefix(new)}position (id, seq) VALUES (1, 0)")
            self._interned.keep_only(schema.prefix(served))
        return new

    def index_generation(self, generation: int) -> None:
        _tables, deferred = self._generation_sql(generation)
        for statement in deferred:
            # One index a transaction: the write lock is let go between them.
            with self.projection(generation) as tx:
                assert isinstance(tx, SQLiteProjectionTx)
                tx.conn.execute(statement)

    @staticmethod
    def _generation_sql(generation: int) -> tuple[list[str], list[str]]:
        prefix = schema.prefix(generation)
        return schema.deferred_split(
            migrations.render(schema.GRAPH_TABLES, "sqlite", g=prefix), prefix
        )

    def drop_generation(self, generation: int) -> None:
        with self.projection() as tx:
            assert isinstance(tx, SQLiteProjectionTx)
            conn = tx.conn
            if generation == self.generation(conn):
                raise StoreError(f"generation {generation} is the served graph")
            self._drop(conn, generation)
            self._interned.forget(schema.prefix(generation))

    @staticmethod
    def _drop(conn: sqlite3.Connection, generation: int) -> None:
        # Every table of the generation the catalog lists, not schema.TABLES: one built
        # by an older GRAPH_VERSION may have tables this version no longer has.
        prefix = schema.prefix(generation)
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
            (len(prefix), prefix),
        ).fetchall()
        for (name,) in names:
            conn.execute(f"DROP TABLE IF EXISTS {name}")

    @contextlib.contextmanager
    def reader(self, timeout: float | None = None) -> Iterator[GraphReader]:
        with self._snapshot(timeout) as conn:
            yield SQLReader(conn, schema.prefix(self.generation(conn)), self.codec)

    @contextlib.contextmanager
    def projection_snapshot(self, generation: int | None = None) -> Iterator[ProjectionTx]:
        with self._snapshot() as conn:
            gen = self.generation(conn) if generation is None else generation
            prefix = schema.prefix(gen)
            yield SQLiteProjectionTx(conn, prefix, self.codec, self._interned.of(prefix))

    @contextlib.contextmanager
    def _snapshot(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """This thread's reader connection (query_only) in one read transaction: one
        snapshot for every query in it (WAL), and no lock a writer waits for. With
        ``timeout``, a query still running that long after the start is interrupted
        (a progress handler: https://www.sqlite.org/c3ref/progress_handler.html)."""
        try:
            conn = self._read()
            if timeout is not None:
                deadline = time.monotonic() + timeout
                conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
            conn.execute("BEGIN")
            # Each file's snapshot is taken at its first read: the graph's here, so the
            # log's, if the read reads it, is later and holds every delivery the graph
            # has projected. A read of the graph alone (a walk, the export) takes none of
            # the log's: a snapshot held for seconds keeps a checkpoint from starting
            # the WAL over, and the receiver's appends from the log's.
            self.generation(conn)
            try:
                yield conn
            finally:
                conn.set_progress_handler(None, 0)
                conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            code = exc.sqlite_errorcode & 0xFF
            if code == SQLITE_INTERRUPT and timeout is not None:
                raise ReadTooLong(
                    f"the read was stopped after {timeout:g} s (--read-timeout-seconds):"
                    " ask for less (a smaller depth or limit)"
                ) from exc
            # Locked past the busy timeout, a disk error, a file that cannot be opened:
            # the store's trouble, not the request's (a 503 with Retry-After, not a 500).
            # Anything else (a bad query) stays a bug.
            if code not in UNAVAILABLE_CODES:
                raise
            raise StoreUnavailable(f"SQLite at {self.path} could not be read: {exc}") from exc

    # -- tokens ---------------------------------------------------------------------

    def _read_table(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """A read of the guard's tables (tokens, grants) on this thread's connection."""
        try:
            return read(self._read())
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite at {self.path} could not be read: {exc}") from exc

    def tokens(self) -> list[Token]:
        return self._read_table(sql.tokens)

    def add_token(self, token: Token) -> None:
        with self._short_write() as conn:
            sql.add_token(conn, token)

    def revoke_token(self, token_id: str, at: str) -> bool:
        with self._short_write() as conn:
            return sql.revoke_token(conn, token_id, at)

    def grants(self) -> list[Grant]:
        return self._read_table(sql.grants)

    def add_grant(self, grant: Grant) -> None:
        with self._short_write() as conn:
            sql.add_grant(conn, grant)

    def remove_grant(self, grant_id: str) -> bool:
        with self._short_write() as conn:
            return sql.remove_grant(conn, grant_id)

    def _side_table(
        self, what: str, work: Callable[[Any], T], write: bool = True, *, log: bool = False
    ) -> T:
        if not write:
            return self._read_table(work)
        with self._short_write(graph=not log) as conn:
            return work(conn)

    def server_secret(self, name: str) -> bytes:
        with self._short_write() as conn:
            return sql.server_secret(conn, name, secrets.token_hex(32), utc_now())

    @contextlib.contextmanager
    def _short_write(self, graph: bool = False) -> Iterator[sqlite3.Connection]:
        """A transaction on a connection of its own, to the log's file (the writer
        belongs to group commit) or, with ``graph``, the graph's (the outbox)."""
        connect, turns = (
            (self._graph_conn, self._graph_turns) if graph else (self._log_conn, self._turns)
        )
        with contextlib.closing(connect()) as conn, turns.turn():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _save_dictionary(self, content: bytes, samples: int) -> int:
        with self._short_write() as conn:
            return log_sql.save_dictionary(conn, content, samples, utc_now())

    def ping(self) -> None:
        try:
            self._read().execute("SELECT 1 FROM deliveries LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite at {self.path} does not answer: {exc}") from exc

    def backup(self, path: str) -> None:
        # Both files (store/sqlite_files.py): ``path`` the log's copy, ``path``-graph the
        # graph's, the graph's copied first so that the log's copy holds every delivery
        # the graph's has projected (the projector goes on from there). Restored without
        # its graph's copy, a log's gets its graph rebuilt.
        sqlite_files.backup_file(self.graph_path, sqlite_files.graph_path_of(path))
        sqlite_files.backup_file(self.path, path)

    @contextlib.contextmanager
    def log_trimmer(self) -> Iterator[LogTrimmer | None]:
        from embrasure.store.lifecycle_sql import SQLiteTrimmer, file_lock

        # A lock file beside the database: SQLite has no lock a session can hold across
        # transactions, and the pass must not hold the write lock between them.
        with file_lock(self.path + ".retention-lock") as held:
            if not held:
                yield None
                return
            # The log's file, with the graph's attached read-only (the position: only
            # projected bodies leave); and the graph's, whose free pages a pass gives back
            # too (SQLiteTrimmer.give_back).
            log = sqlite_files.connect(self.path, graph_path=self.graph_path)
            graph = sqlite_files.connect(self.graph_path)
            with contextlib.closing(log), contextlib.closing(graph):
                # A pass's commits need not reach the disk before the next write: its
                # deletes come after the segment is durable, so a commit a power loss
                # takes leaves bodies both stored and archived, which the next pass
                # adopts; a vacuum step lost is space given back later. Without the
                # fsync each of its write transactions holds the lock the receiver
                # waits for a much shorter time. The receiver's connection keeps FULL.
                for conn in (log, graph):
                    conn.execute("PRAGMA synchronous = NORMAL")
                graph_turn = (graph, self._graph_turns)
                yield SQLiteTrimmer(log, self.path, self.codec, self._turns, graph_turn)

    def close(self) -> None:
        self._checkpoints.close()
        self._graph_checkpoints.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._projector_lock:
            if self._projector is not None:
                self._projector.close()
        self._writer.close()
        self._turns.close()
        self._graph_turns.close()
