"""SQLite: the projection transaction on one graph generation.

Rows are read and written generically from schema.COLUMNS, so this module knows
tables and keys but no projection rule. SQLite ≥ 3.24 understands ``ON CONFLICT``
(upserts); Python's bundled SQLite has it.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Sequence

from embrasure.store.base import Key, LogEntry, ProjectionTx, Record
from embrasure.store.compression import BodyCodec
from embrasure.store.interned import InternCache, Interner
from embrasure.store.log_sql import SQLITE_BODIES, decode_rejections, read_log
from embrasure.store.rows import table_of
from embrasure.store.run_retention import RunTrimming
from embrasure.store.schema import STORED_COLUMNS
from embrasure.store.sql import MAX_PARAMS, TxReads, select_where_in, serve_generation, table_sql

__all__ = ["SQLiteProjectionTx", "decode_rejections", "read_log", "select_where_in"]


def _sql(prefix: str, table: Record) -> dict[str, str]:
    return table_sql(prefix, table_of(table), "sqlite")


@functools.cache
def _insert_returning(prefix: str, table: str, rows: int) -> str:
    """``rows`` rows inserted unless their key is there, the keys inserted returned."""
    keys, values = STORED_COLUMNS[table]
    marks = "(" + ", ".join("?" for _ in keys + values) + ")"
    return (
        f"INSERT INTO {prefix}{table} ({', '.join(keys + values)})"
        f" VALUES {', '.join(marks for _ in range(rows))}"
        f" ON CONFLICT ({', '.join(keys)}) DO NOTHING RETURNING {', '.join(keys)}"
    )


class SQLiteProjectionTx(TxReads, RunTrimming, ProjectionTx):
    conn: sqlite3.Connection

    def __init__(
        self,
        conn: sqlite3.Connection,
        prefix: str,
        codec: BodyCodec,
        interned: InternCache | None = None,
    ) -> None:
        self.conn = conn
        self.prefix = prefix
        self.codec = codec
        self.interner = Interner(conn, prefix, MAX_PARAMS, interned)

    def insert_new(self, table: Record, rows: Sequence[Key]) -> list[bool]:
        # Many rows a statement, and the keys of those inserted back (RETURNING, SQLite
        # 3.35+): a statement per row, to read its rowcount, cost 20 µs an event in
        # run_io alone.
        name = table_of(table)
        keys, values = STORED_COLUMNS[name]
        width, columns = len(keys), len(keys) + len(values)
        stored = self.stored(table, rows)
        new: set[Key] = set()
        per_statement = max(1, MAX_PARAMS // columns)
        for start in range(0, len(stored), per_statement):
            chunk = stored[start : start + per_statement]
            sql = _insert_returning(self.prefix, name, len(chunk))
            new.update(self.conn.execute(sql, [x for row in chunk for x in row]).fetchall())
        inserted = []
        for row in stored:  # a key given twice was inserted once: by its first row
            inserted.append(row[:width] in new)
            new.discard(row[:width])
        return inserted

    def insert_missing(self, table: Record, rows: Sequence[Key]) -> None:
        # One executemany: SQLite's per-row counts are only needed by insert_new.
        missing = self.interner.unseen(table_of(table), self.stored(table, rows))
        self.conn.executemany(_sql(self.prefix, table)["insert_new"], missing)

    def save(self, table: Record, rows: Sequence[Key]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["save"], self.stored(table, rows))

    def merge(self, table: Record, rows: Sequence[Key]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["merge"], self.stored(table, rows))

    def delete(self, table: Record, keys: Iterable[Key]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["delete"], self.keys_as_stored(table, keys))

    def position(self) -> int:
        row = self.conn.execute(f"SELECT seq FROM {self.prefix}position").fetchone()
        return int(row[0])

    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        # The write lock (BEGIN IMMEDIATE) keeps every other projector out: the log after
        # the position is this transaction's to project.
        return read_log(
            self.conn, self.codec, SQLITE_BODIES, after_seq, limit, max_bytes, max_items
        )

    def hold_log(self) -> None:
        # Nothing to hold: this transaction holds the graph's write lock, so no other
        # projector moves it, and it reads the log in one snapshot (WAL), taken at its
        # first read; what is appended after that, the next transaction projects
        # (store/sqlite_files.py: the log's file has a write lock of its own).
        pass

    def serve_this_generation(self) -> int:
        return serve_generation(self.conn, self.prefix)

    def set_position(self, seq: int) -> None:
        self.conn.execute(f"UPDATE {self.prefix}position SET seq = ? WHERE id = 1", (seq,))
