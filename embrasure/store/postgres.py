"""The PostgreSQL backend: psycopg 3 with a connection pool, for several receivers and
projectors on one database (docs/postgres.md).

Connections are in autocommit mode and every transaction is spelled out (BEGIN …
COMMIT), as in sqlite.py: a read is one REPEATABLE READ snapshot; an append and a
projection are READ COMMITTED.

**The log's ordering hazard.** ``deliveries.seq`` comes from an identity sequence, and
PostgreSQL hands out sequence values when a row is inserted, not when its transaction
commits: receiver A takes seq 10, receiver B takes 11 and commits first, and a reader
tailing ``seq > cursor`` sees 11, moves its cursor past 10, and never sees 10 once A
commits. Every append here therefore runs under one transaction-level advisory lock
(``LOG_LOCK``), taken before its first statement and released by its COMMIT, so seq
values are handed out in commit order: whatever a reader sees, every smaller seq it
will ever see is already committed. The lock serializes only the appends' few
statements and their commit; receivers parse, check and group deliveries in parallel
(group commit makes one append of many deliveries). Chosen over reading only below
``pg_snapshot_xmin``, which any long transaction on the database (a backup, a long
report) would hold back, stalling projection; and over a per-delivery "projected" mark
alone, which cannot tell when a projector may move its watermark. Projectors also keep
such a mark (a generation's ``deliveries`` rows): see postgres_graph.py for how several
of them share the log. ``tests/store/test_postgres.py`` shows the hazard on raw SQL and that
appends do not have it.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from embrasure.errors import ReadTooLong, StoreConflict, StoreError, StoreUnavailable
from embrasure.model import DeliveryDraft, DeliveryIds, Grant, Token, utc_now
from embrasure.store import log_sql, migrations, redact, schema, sql
from embrasure.store.base import (
    AppendResult,
    GraphReader,
    LogEntry,
    LogTrimmer,
    ProjectionTx,
    Store,
)
from embrasure.store.compression import BodyCodec
from embrasure.store.interned import InternCaches
from embrasure.store.postgres_conn import PgConnection, neutral, one_line
from embrasure.store.postgres_graph import (
    LOG_LOCK,
    MIGRATION_LOCK,
    REPROJECT_LOCK,
    ColumnTypes,
    PostgresProjectionTx,
    column_types,
)
from embrasure.store.reads import SQLReader

log = logging.getLogger("embrasure.log")
T = TypeVar("T")

CONNECT_TIMEOUT = 10  # seconds to reach the server
PARTITION_DAYS_AHEAD = 2  # body partitions made before their day comes
POOL_TIMEOUT = 5.0  # seconds a request waits for a free connection before a 503
DROP_RETRY_WAITS = (0.2, 0.5, 1.0, 2.0, None)  # seconds between tries of a drop; None: give up


class PostgresStore(Store):
    dialect = "postgresql"
    concurrent_projectors = True
    # No write lock to share (store/pacing.py): a step as long as a projection batch,
    # and as many runs as one DELETE's parameters take (three a run, store/sql.py).
    step_hold_s = 0.1
    step_runs = sql.MAX_PARAMS // 3

    def __init__(
        self, url: str, *, upgrade: bool = False, pool_size: int = 10, compress: bool = True
    ) -> None:
        self.url = url
        self.name = redact(url)  # for messages
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                applied = self._migrate(PgConnection(conn), upgrade)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {self.name}: {one_line(exc)}") from exc
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
            timeout=POOL_TIMEOUT,
            name="embrasure",
            open=True,
        )
        self.migrations_applied = applied
        self._ids = DeliveryIds()
        self.codec = BodyCodec(compress)
        with self._transaction("BEGIN READ ONLY", "reading the log's dictionaries") as conn:
            self.codec.load(log_sql.dictionaries(conn))
        self.codec.train_with(self._save_dictionary, self._compress_bodies)
        self._days_made: str = ""  # the last UTC day with a body partition made
        self._make_partitions(utc_now())
        if migrations.BODIES_MOVED in applied:
            self._compress_bodies()
        self._types: ColumnTypes | None = None  # read once, at the first projection
        self._reproject_lock: psycopg.Connection[Any] | None = None
        self._interned = InternCaches()

    # -- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, begin: str, doing: str) -> Iterator[PgConnection]:
        """One transaction on a pooled connection: committed on a clean exit, rolled
        back otherwise; driver errors become the store's neutral ones."""
        try:
            with self._pool.connection() as raw:
                conn = PgConnection(raw)
                conn.execute(begin)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        with contextlib.suppress(psycopg.Error):
                            raw.execute("ROLLBACK")
                    raise
        except psycopg.Error as exc:
            raise neutral(exc, f"{doing} on {self.name}") from exc

    def _migrate(self, conn: PgConnection, upgrade: bool) -> list[int]:
        conn.execute("BEGIN")
        try:
            # The migration lock: one process at a time, the others wait, then find
            # nothing to do (docs/architecture.md#storage).
            conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            applied = migrations.upgrade(conn.execute, "postgresql", self.name, upgrade, utc_now())
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            raise
        return applied

    def schema_version(self) -> int:
        with self._transaction("BEGIN READ ONLY", "reading the schema version") as conn:
            return int(conn.execute("SELECT MAX(version) FROM embrasure_schema").fetchone()[0])

    # -- the log ----------------------------------------------------------------------------

    def _make_partitions(self, now: str) -> None:
        """Make the body partitions of today and the next PARTITION_DAYS_AHEAD days
        (once a day: the appender calls this before each append). A day whose bodies
        are in the DEFAULT partition already (a database upgraded that day) stays there."""
        today = now[:10]
        if self._days_made > today:
            return
        days = [
            (datetime.date.fromisoformat(today) + datetime.timedelta(days=n))
            for n in range(PARTITION_DAYS_AHEAD + 1)
        ]
        for day in days:
            try:
                with self._transaction("BEGIN", "making a body partition") as conn:
                    log_sql.make_body_partition(conn, day)
            except StoreError as exc:
                log.warning("bodies of %s stay in the default partition: %s", day, exc)
        self._days_made = days[-1].isoformat()

    def _save_dictionary(self, content: bytes, samples: int) -> int:
        with self._transaction("BEGIN", "storing a zstd dictionary") as conn:
            return log_sql.save_dictionary(conn, content, samples, utc_now())

    def _compress_bodies(self) -> None:
        """Compress again the bodies stored without a dictionary (as received by a
        version before migration 6, or before the first dictionary), a transaction per
        thousand: log_sql.compress_again."""
        seq = 0
        while True:
            with self._transaction("BEGIN", "compressing the log's bodies") as conn:
                seq = log_sql.compress_again(conn, self.codec, log_sql.POSTGRES_BODIES, seq, 1000)
            if not seq:
                return

    def append(self, drafts: Sequence[DeliveryDraft]) -> list[AppendResult]:
        self._make_partitions(drafts[0].received_at if drafts else utc_now())
        # Compressed before the log's lock, which serializes every receiver's appends.
        packed = [self.codec.compress(d.body) for d in drafts]
        try:
            with self._transaction("BEGIN", "the delivery log could not commit") as conn:
                # Durable before the receipt, whatever the server's default; and seq
                # values handed out in commit order (the module's docstring).
                conn.execute(
                    "SELECT set_config('synchronous_commit', 'on', true), pg_advisory_xact_lock(?)",
                    (LOG_LOCK,),
                )
                results = log_sql.append(
                    conn, log_sql.POSTGRES_BODIES, drafts, packed, self._ids.new
                )
        except StoreUnavailable:
            raise
        except StoreError as exc:
            raise StoreUnavailable(str(exc)) from exc
        self.codec.appended(packed)
        return results

    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        with self._transaction("BEGIN READ ONLY", "reading the log") as conn:
            return log_sql.read_log(
                conn, self.codec, log_sql.POSTGRES_BODIES, after_seq, limit, max_bytes, max_items
            )

    # -- the graph --------------------------------------------------------------------------

    @staticmethod
    def _generation(conn: PgConnection) -> int:
        return int(conn.execute("SELECT generation FROM graph_meta WHERE id = 1").fetchone()[0])

    def generation(self) -> int:
        """The served graph generation."""
        with self._transaction("BEGIN READ ONLY", "reading the generation") as conn:
            return self._generation(conn)

    def position(self, generation: int | None = None) -> int:
        with self._transaction("BEGIN READ ONLY", "reading the position") as conn:
            gen = self._generation(conn) if generation is None else generation
            prefix = schema.prefix(gen)
            return int(conn.execute(f"SELECT seq FROM {prefix}position").fetchone()[0])

    @contextlib.contextmanager
    def projection(self, generation: int | None = None) -> Iterator[ProjectionTx]:
        with self._transaction("BEGIN", "projection could not commit") as conn:
            # The graph is derived from the log, and a projection commits with its record
            # of what is projected: a projection lost in a crash of the server is
            # projected again (like SQLite's synchronous=NORMAL for the projector).
            conn.execute("SET LOCAL synchronous_commit = off")
            gen = self._generation(conn) if generation is None else generation
            tx = self._projection_tx(conn, schema.prefix(gen))
            yield tx
        tx.interner.committed()

    @contextlib.contextmanager
    def projection_snapshot(self, generation: int | None = None) -> Iterator[ProjectionTx]:
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        with self._transaction(begin, "reading the graph") as conn:
            gen = self._generation(conn) if generation is None else generation
            yield self._projection_tx(conn, schema.prefix(gen))

    def _projection_tx(self, conn: PgConnection, prefix: str) -> PostgresProjectionTx:
        if self._types is None:
            self._types = column_types(conn, prefix)
        interned = self._interned.of(prefix)
        return PostgresProjectionTx(conn, prefix, self._types, self.codec, interned)

    def graph_version(self) -> int:
        with self._transaction("BEGIN READ ONLY", "reading the graph version") as conn:
            return int(conn.execute("SELECT graph_version FROM graph_meta").fetchone()[0])

    def create_generation(self) -> int:
        # One reproject at a time on the database: a second one (projectors starting
        # together on a graph an older version built each reproject it) waits here,
        # rather than dropping the tables the first is building as a crash's leftovers.
        # The lock is a session's, held on a connection of its own until the reproject
        # drops the old generation (or the store closes).
        if self._reproject_lock is None:
            try:
                lock = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
                lock.execute("SELECT pg_advisory_lock(%s)", (REPROJECT_LOCK,))
            except psycopg.Error as exc:
                raise neutral(exc, f"waiting for another reproject on {self.name}") from exc
            self._reproject_lock = lock
        with self._transaction("BEGIN", "creating a graph generation") as conn:
            served = self._generation(conn)
            new = served + 1
            prefix = schema.prefix(new)
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
            for leftover in sql.other_generations((t for (t,) in tables), served):
                self._drop(conn, leftover)  # a killed reproject's
            tables, _deferred = self._generation_sql(new)
            for statement in tables:
                conn.execute(statement)
            conn.execute(f"INSERT INTO {prefix}position (id, seq) VALUES (1, 0)")
            self._interned.keep_only(schema.prefix(served))
        return new

    def index_generation(self, generation: int) -> None:
        _tables, deferred = self._generation_sql(generation)
        for statement in deferred:
            with self._transaction("BEGIN", "indexing a graph generation") as conn:
                conn.execute(statement)
        # Statistics before the generation is served: a table filled in bulk has none
        # until autovacuum gets to it (a minute or more), and the planner meanwhile
        # guesses its rows' distribution (the PostgreSQL docs, "Populating a Database").
        with self._transaction("BEGIN", "analyzing a graph generation") as conn:
            conn.execute(f"ANALYZE {', '.join(self._generation_tables(conn, generation))}")

    @staticmethod
    def _generation_sql(generation: int) -> tuple[list[str], list[str]]:
        prefix = schema.prefix(generation)
        statements = migrations.render(schema.GRAPH_TABLES, "postgresql", g=prefix)
        return schema.deferred_split(statements, prefix)

    def drop_generation(self, generation: int) -> None:
        # A reader still in the old generation holds a share lock on one of its tables
        # and may ask for another that the drop holds by then: PostgreSQL breaks the
        # deadlock by failing one side. The reader finishes and leaves; the drop tries
        # again.
        for wait in DROP_RETRY_WAITS:
            try:
                with self._transaction("BEGIN", "dropping a graph generation") as conn:
                    if generation == self._generation(conn):
                        raise StoreError(f"generation {generation} is the served graph")
                    self._drop(conn, generation)
                break
            except StoreConflict:
                if wait is None:
                    raise
                time.sleep(wait)
        self._interned.forget(schema.prefix(generation))
        self._release_reproject_lock()

    def _release_reproject_lock(self) -> None:
        if self._reproject_lock is not None:
            self._reproject_lock.close()  # a session's advisory lock ends with it
            self._reproject_lock = None

    @staticmethod
    def _drop(conn: PgConnection, generation: int) -> None:
        # Every table of the generation the catalog lists, not schema.TABLES: one built
        # by an older GRAPH_VERSION may have tables this version no longer has.
        names = PostgresStore._generation_tables(conn, generation)
        if names:
            conn.execute(f"DROP TABLE IF EXISTS {', '.join(names)}")

    @staticmethod
    def _generation_tables(conn: PgConnection, generation: int) -> list[str]:
        prefix = schema.prefix(generation)
        names = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            " AND substr(tablename, 1, ?) = ? ORDER BY tablename",
            (len(prefix), prefix),
        ).fetchall()
        return [str(n) for (n,) in names]

    @contextlib.contextmanager
    def reader(self, timeout: float | None = None) -> Iterator[GraphReader]:
        # One snapshot for every query of the request.
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "read") as conn:
            if timeout is not None:
                # Each statement's own bound, for this transaction: the server cancels a
                # query past it (a read runs a few queries; each gets the whole bound).
                conn.execute(f"SET LOCAL statement_timeout = {max(1, round(timeout * 1000))}")
            try:
                yield SQLReader(conn, schema.prefix(self._generation(conn)), self.codec)
            except psycopg.errors.QueryCanceled as exc:
                if timeout is None:
                    raise
                raise ReadTooLong(
                    f"the read was stopped after {timeout:g} s (--read-timeout-seconds):"
                    " ask for less (a smaller depth or limit)"
                ) from exc

    # -- tokens -------------------------------------------------------------------------

    def _read_only(self, what: str, read: Callable[[PgConnection], T]) -> T:
        """A short read of its own (the guard's tokens and grants, ping): any failure
        is the store being unavailable."""
        try:
            with self._transaction("BEGIN READ ONLY", what) as conn:
                return read(conn)
        except StoreError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def tokens(self) -> list[Token]:
        return self._read_only("reading the tokens", sql.tokens)

    def add_token(self, token: Token) -> None:
        with self._transaction("BEGIN", "storing a token") as conn:
            sql.add_token(conn, token)

    def revoke_token(self, token_id: str, at: str) -> bool:
        with self._transaction("BEGIN", "revoking a token") as conn:
            return sql.revoke_token(conn, token_id, at)

    def grants(self) -> list[Grant]:
        return self._read_only("reading the grants", sql.grants)

    def add_grant(self, grant: Grant) -> None:
        with self._transaction("BEGIN", "storing a grant") as conn:
            sql.add_grant(conn, grant)

    def remove_grant(self, grant_id: str) -> bool:
        with self._transaction("BEGIN", "removing a grant") as conn:
            return sql.remove_grant(conn, grant_id)

    def _side_table(
        self, what: str, work: Callable[[Any], T], write: bool = True, *, log: bool = False
    ) -> T:
        if not write:
            return self._read_only(what, work)
        with self._transaction("BEGIN", what) as conn:
            return work(conn)

    def server_secret(self, name: str) -> bytes:
        with self._transaction("BEGIN", "reading a server secret") as conn:
            return sql.server_secret(conn, name, secrets.token_hex(32), utc_now())

    def free_disk_bytes(self) -> int | None:
        return None  # the database server's disk, not this machine's

    def ping(self) -> None:
        self._read_only("ping", lambda c: c.execute("SELECT 1 FROM deliveries LIMIT 1").fetchall())

    def backup(self, path: str) -> None:
        raise StoreError(
            "embrasure backup copies SQLite files; back up PostgreSQL with its own tools "
            "(pg_dump, or a base backup with WAL archiving)"
        )

    @contextlib.contextmanager
    def log_trimmer(self) -> Iterator[LogTrimmer | None]:
        from embrasure.store.lifecycle_sql import RETENTION_LOCK, PostgresTrimmer

        # A connection of its own, outside the pool, holding a session's advisory lock
        # between the pass's short transactions; closing it (or a kill -9) releases it.
        try:
            raw = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise neutral(exc, f"opening a retention pass on {self.name}") from exc
        with raw:
            conn = PgConnection(raw)
            try:
                held = conn.execute("SELECT pg_try_advisory_lock(?)", (RETENTION_LOCK,))
                got = bool(held.fetchone()[0])
            except psycopg.Error as exc:
                raise neutral(exc, f"taking the retention lock on {self.name}") from exc
            yield PostgresTrimmer(conn, self.name, self.codec) if got else None

    def close(self) -> None:
        self._release_reproject_lock()
        self._pool.close()
