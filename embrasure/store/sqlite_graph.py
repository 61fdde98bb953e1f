"""SQLite: the projection transaction on one graph generation.

Rows are read and written generically from schema.COLUMNS, so this module knows
tables and keys but no projection rule. SQLite ≥ 3.24 understands ``ON CONFLICT``
(upserts); Python's bundled SQLite has it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from embrasure.store.base import Key, LogEntry, ProjectionTx, Record
from embrasure.store.compression import BodyCodec
from embrasure.store.interned import InternCache, Interner
from embrasure.store.log_sql import SQLITE_BODIES, decode_rejections, read_log
from embrasure.store.rows import table_of
from embrasure.store.run_retention import RunTrimming
from embrasure.store.sql import MAX_PARAMS, TxReads, select_where_in, serve_generation, table_sql

__all__ = ["SQLiteProjectionTx", "decode_rejections", "read_log", "select_where_in"]


def _sql(prefix: str, table: Record) -> dict[str, str]:
    return table_sql(prefix, table_of(table), "sqlite")


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
        sql = _sql(self.prefix, table)["insert_new"]
        cursor = self.conn.cursor()
        inserted = []
        for row in self.stored(table, rows):
            cursor.execute(sql, row)
            inserted.append(cursor.rowcount == 1)
        return inserted

    def insert_missing(self, table: Record, rows: Sequence[Key]) -> None:
        # One executemany: SQLite's per-row counts are only needed by insert_new.
        self.conn.executemany(_sql(self.prefix, table)["insert_new"], self.stored(table, rows))

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
        pass  # BEGIN IMMEDIATE holds SQLite's only write lock: the log waits already

    def serve_this_generation(self) -> int:
        return serve_generation(self.conn, self.prefix)

    def set_position(self, seq: int) -> None:
        self.conn.execute(f"UPDATE {self.prefix}position SET seq = ? WHERE id = 1", (seq,))
