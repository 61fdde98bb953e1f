"""PostgreSQL: the projection transaction on one graph generation, with several
projectors (in several processes) at once.

How projectors share the log. Each transaction *claims* the deliveries it projects:
``read_log`` locks their log rows (``SELECT … FOR UPDATE SKIP LOCKED``), so another
projector's claim skips them, and takes only deliveries with no row yet in this
generation's ``deliveries`` table (the per-delivery record of what is projected, written
in the same transaction as the projection). The position is a *watermark*: every delivery
up to it is projected; it only bounds the search, and moves up as far as the projected
deliveries reach without a gap (``set_position``). Claimed deliveries that fail roll
back with their transaction and are claimed again.

Why the graph is the same as one projector's: every graph merge is an order-independent
UPSERT join (schema.MERGES), so deliveries applied by several transactions in any
order join to the same rows; PostgreSQL serializes concurrent upserts of one key. Two
things are not a plain join and are serialized here: run_count counts a run once (the
run_io insert that finds the key taken, even a key another transaction inserted
meanwhile, adds nothing), and symlink groups, resolved by reading the links table,
are resolved under one advisory lock (``links_touching``), so the last transaction to
resolve a group sees every link committed before it. Rows are written in key order, so
two transactions touching the same rows lock them in the same order (no deadlock
between upserts); a deadlock that happens anyway is a StoreConflict, and the projector
retries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from embrasure.store.base import Key, LogEntry, ProjectionTx, Record
from embrasure.store.compression import BodyCodec
from embrasure.store.interned import InternCache, Interner
from embrasure.store.log_sql import LOG_COLUMNS, POSTGRES_BODIES, dictionary_loader, log_entries
from embrasure.store.postgres_conn import PgConnection
from embrasure.store.rows import FacetValueRow, LinkRow, R, ShapeRow, table_of
from embrasure.store.run_retention import UNNAMED_PER_STATEMENT, RunTrimming
from embrasure.store.schema import STORED_COLUMNS
from embrasure.store.sql import MAX_PARAMS, TxReads, serve_generation, table_sql

# pg_advisory_xact_lock keys (one 64-bit space per database): "embr" then a number.
LOG_LOCK = 0x656D6272_00000001  # appends to the log: seq order is commit order
IDENTITY_LOCK = 0x656D6272_00000002  # symlink group resolution
MIGRATION_LOCK = 0x656D6272_00000003  # schema upgrades
REPROJECT_LOCK = 0x656D6272_00000004  # one reproject at a time (a session's lock)
# Facet values: shared by projections that find a value stored, exclusive by a run trim
# that deletes the values nothing names (store/run_retention.py).
CONTENT_LOCK = 0x656D6272_00000006  # facet values and shapes (run trims delete them)


ColumnTypes = dict[str, dict[str, str]]  # table → column → its PostgreSQL type


def column_types(conn: PgConnection, prefix: str) -> ColumnTypes:
    """The graph tables' column types (the same in every generation), as the catalog
    has them: the casts of the arrays rows are sent as."""
    types: ColumnTypes = {}
    for table, column, kind in conn.execute(
        "SELECT c.relname, a.attname, format_type(a.atttypid, NULL) FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(?)"
        " AND a.attnum > 0 AND NOT a.attisdropped",
        ([prefix + t for t in STORED_COLUMNS],),
    ):
        types.setdefault(table.removeprefix(prefix), {})[column] = kind
    return types


def _key_order(table: str, rows: Sequence[Key]) -> list[Key]:
    width = len(STORED_COLUMNS[table][0])
    return sorted(rows, key=lambda row: row[:width])


def _columns(rows: Sequence[Key], width: int) -> list[list[Any]]:
    """Rows → one list per column: the arrays ``unnest`` turns back into rows."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


class PostgresProjectionTx(TxReads, RunTrimming, ProjectionTx):
    """Rows go to the server as arrays, one per column, and one statement a table
    (``INSERT … SELECT * FROM unnest(…) ON CONFLICT …``): a statement per row costs
    ~20 µs of driver work each, which at ~27 rows an event was most of a projection.
    Keys are distinct within one call (ProjectionTx.merge), as an upsert of several rows
    in one statement requires."""

    conn: PgConnection

    def __init__(
        self,
        conn: PgConnection,
        prefix: str,
        types: ColumnTypes,
        codec: BodyCodec,
        interned: InternCache | None = None,
    ) -> None:
        self.conn = conn
        self.prefix = prefix
        self.types = types
        self.codec = codec
        self._holding = False
        self._identity_locked = False
        self._content_locked = False
        self.interner = Interner(conn, prefix, MAX_PARAMS, interned)

    def _sql(self, table: str) -> dict[str, str]:
        keys, values = STORED_COLUMNS[table]
        arrays = ", ".join(f"?::{self.types[table][c]}[]" for c in keys + values)
        return table_sql(self.prefix, table, "postgresql", f"SELECT * FROM unnest({arrays})")

    def _run(self, table: str, statement: str, rows: Sequence[Key]) -> None:
        if rows:
            width = len(STORED_COLUMNS[table][0]) + len(STORED_COLUMNS[table][1])
            self.conn.execute_arrays(self._sql(table)[statement], _columns(rows, width))

    # -- rows ----------------------------------------------------------------------------

    def insert_new(self, table: Record, rows: Sequence[Key]) -> list[bool]:
        if not rows:
            return []
        name = table_of(table)
        keys = STORED_COLUMNS[name][0]
        width = len(keys)
        rows = self.stored(table, rows)
        ordered = _key_order(name, rows)
        returned = self.conn.execute_arrays(
            self._sql(name)["insert_new"] + " RETURNING " + ", ".join(keys),
            _columns(ordered, width + len(STORED_COLUMNS[name][1])),
        )
        new = {tuple(r) for r in returned}
        inserted = []
        for row in rows:  # a key given twice was inserted once: by its first row
            inserted.append(row[:width] in new)
            new.discard(row[:width])
        return inserted

    def insert_missing(self, table: Record, rows: Sequence[Key]) -> None:
        name = table_of(table)
        missing = self.interner.unseen(name, self.stored(table, rows))
        self._run(name, "insert_new", _key_order(name, missing))

    def save(self, table: Record, rows: Sequence[Key]) -> None:
        # The last row of a key wins, as SQLite's row-by-row upserts have it (one
        # statement may not upsert a key twice).
        name = table_of(table)
        width = len(STORED_COLUMNS[name][0])
        last = {row[:width]: row for row in self.stored(table, rows)}
        self._run(name, "save", _key_order(name, list(last.values())))

    def merge(self, table: Record, rows: Sequence[Key]) -> None:
        name = table_of(table)
        self._run(name, "merge", _key_order(name, self.stored(table, rows)))

    def delete(self, table: Record, keys: Iterable[Key]) -> None:
        name = table_of(table)
        ordered = _key_order(name, self.keys_as_stored(table, keys))
        if ordered:
            columns = STORED_COLUMNS[name][0]
            arrays = ", ".join(f"?::{self.types[name][c]}[]" for c in columns)
            self.conn.execute_arrays(
                f"DELETE FROM {self.prefix}{name} WHERE ({', '.join(columns)})"
                f" IN (SELECT * FROM unnest({arrays}))",
                _columns(ordered, len(columns)),
            )

    def _read_content(self, table: Record) -> None:
        if table in (FacetValueRow, ShapeRow) and not self._content_locked:
            # Held until commit: a run trim deletes a value or a shape only when no
            # transaction that found it stored (and so will name it without storing it)
            # is still open.
            self.conn.execute("SELECT pg_advisory_xact_lock_shared(?)", (CONTENT_LOCK,))
            self._content_locked = True

    def stored_keys(self, table: Record, keys: Iterable[Key]) -> set[Key]:
        self._read_content(table)
        return super().stored_keys(table, keys)

    def load(self, table: type[R], keys: Iterable[Key]) -> dict[Key, R]:
        self._read_content(table)
        return super().load(table, keys)

    def exclude_content_readers(self) -> None:
        # Before any row is deleted, so the trim holds no row lock a waiting projection
        # could need; each later statement (READ COMMITTED) sees what those committed.
        self.conn.execute("SELECT pg_advisory_xact_lock(?)", (CONTENT_LOCK,))

    def delete_unnamed_values(self, hashes: Sequence[bytes]) -> None:
        # The candidates as one array (its length is the planner's estimate, and the
        # primary key finds them) and NOT EXISTS, an anti-join, where the shared SQL has
        # NOT IN a subquery: PostgreSQL hashes that subquery only when its result fits
        # in work_mem, and otherwise runs it again for every candidate, a scan of the
        # facets each. In the first soak (bench/results/storage-soak-postgres.md) such a
        # deletion held the content lock 79.5 s and the projector fell 347 s behind;
        # with work_mem at 64 kB, EXPLAIN shows the per-row SubPlan for NOT IN and a hash
        # anti-join for this. Not soaked yet.
        if not hashes:
            return
        if len(hashes) > UNNAMED_PER_STATEMENT:
            raise ValueError(f"{len(hashes)} candidates: a statement takes {UNNAMED_PER_STATEMENT}")
        g = self.prefix
        self.exclude_content_readers()
        self.conn.execute_arrays(
            f"DELETE FROM {g}facet_values v WHERE v.hash = ANY(?::bytea[])"
            f" AND NOT EXISTS (SELECT 1 FROM {g}facets n WHERE n.value_hash = v.hash)"
            f" AND NOT EXISTS (SELECT 1 FROM {g}facet_sets n WHERE n.value_hash = v.hash)",
            [list(hashes)],
        )

    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[LinkRow]:
        if not self._identity_locked:
            # Held until commit: resolutions of symlink groups run one at a time, each
            # seeing the links of every transaction that resolved before it.
            self.conn.execute("SELECT pg_advisory_xact_lock(?)", (IDENTITY_LOCK,))
            self._identity_locked = True
        return super().links_touching(identities)

    # -- the log and the position -----------------------------------------------------------

    def position(self) -> int:
        return int(self.conn.execute(f"SELECT seq FROM {self.prefix}position").fetchone()[0])

    def _unprojected(self, columns: str, source: str = "deliveries d") -> str:
        return (
            f"SELECT {columns} FROM {source} WHERE d.seq > ? AND NOT EXISTS"
            f" (SELECT 1 FROM {self.prefix}deliveries p WHERE p.seq = d.seq) ORDER BY d.seq"
        )

    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        # How many of the next unprojected deliveries fit the limits (a peek without
        # locks, sizes only): claiming more would hold back deliveries this transaction
        # will not project.
        count = size = items = 0
        for item_count, length in self.conn.execute(
            self._unprojected("d.item_count, COALESCE(b.size, 0)", POSTGRES_BODIES.with_bodies)
            + " LIMIT ?",
            (after_seq, limit),
        ):
            count, size, items = count + 1, size + length, items + item_count
            if size >= max_bytes or (max_items is not None and items >= max_items):
                break
        if count == 0:
            self._advance()  # caught up: bring the watermark along
            return []
        skip = "" if self._holding else " SKIP LOCKED"
        rows = self.conn.execute(
            self._unprojected(LOG_COLUMNS, POSTGRES_BODIES.with_bodies)
            + f" LIMIT ? FOR UPDATE OF d{skip}",
            (after_seq, count),
        ).fetchall()
        if not rows:
            return []
        # A delivery whose lock was released between this statement's snapshot and its
        # locking was projected by the transaction that held it: look again with a new
        # snapshot (READ COMMITTED), which sees that commit.
        done = {
            seq
            for (seq,) in self.conn.execute(
                f"SELECT seq FROM {self.prefix}deliveries WHERE seq = ANY(?)",
                ([r[0] for r in rows],),
            )
        }
        fresh = [r for r in rows if r[0] not in done]
        return log_entries(fresh, self.codec, dictionary_loader(self.conn), max_bytes, max_items)

    def set_position(self, seq: int) -> None:
        self._advance()

    def _advance(self) -> None:
        """Move the watermark up to just below the first delivery not projected, or to
        the end of the log. Projectors commit out of log order, and each sees the others'
        uncommitted work as not projected, so it never moves too far; but the last two
        to commit may each leave it short of the other's work: a claim that finds
        nothing to do moves it again (``read_log``). Only a move up writes: a transaction
        that waited for this row lock keeps the higher value another one wrote meanwhile.
        Appends commit in seq order (LOG_LOCK), so no delivery can appear later below
        the end of the log seen here."""
        first_gap = self._unprojected("d.seq - 1").replace(
            "ORDER BY d.seq", "ORDER BY d.seq LIMIT 1"
        )
        self.conn.execute(
            f"UPDATE {self.prefix}position AS w SET seq = n.seq FROM (SELECT COALESCE(("
            f"{first_gap}), (SELECT max(seq) FROM deliveries), 0) AS seq) AS n"
            " WHERE n.seq > w.seq",
            (self.position(),),
        )

    def hold_log(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(?)", (LOG_LOCK,))
        self._holding = True

    def serve_this_generation(self) -> int:
        return serve_generation(self.conn, self.prefix)
