"""SQLite: the projection transaction on one graph generation.

Rows are read and written generically from graph_schema.COLUMNS, so this module knows
tables and keys but no projection rule. SQLite ≥ 3.24 understands ``ON CONFLICT``
(upserts) and ≥ 3.15 row values (``(a, b) IN (VALUES …)``); Python's bundled SQLite has
both.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Sequence

from ..model import Rejection
from .base import LogEntry, ProjectionTx, Row
from .graph_schema import COLUMNS, GRAPH_VERSION

# SQLite's default limit on host parameters is 32,766 (since 3.32); stay well below.
MAX_PARAMS = 900


@functools.cache
def _sql(prefix: str, table: str) -> dict[str, str]:
    keys, values = COLUMNS[table]
    columns = keys + values
    name = prefix + table
    marks = ", ".join("?" for _ in columns)
    key_list = ", ".join(keys)
    return {
        "insert_new": f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({marks})"
        f" ON CONFLICT ({key_list}) DO NOTHING",
        "save": f"INSERT OR REPLACE INTO {name} ({', '.join(columns)}) VALUES ({marks})",
        "select": f"SELECT {', '.join(columns)} FROM {name} WHERE ({key_list}) IN ",
        "delete": f"DELETE FROM {name} WHERE " + " AND ".join(f"{k} = ?" for k in keys),
    }


def decode_rejections(text: str) -> tuple[Rejection, ...]:
    return tuple(Rejection(index, kind, reason) for index, kind, reason in json.loads(text))


def read_log(
    conn: sqlite3.Connection, after_seq: int, limit: int, max_bytes: int
) -> list[LogEntry]:
    entries: list[LogEntry] = []
    size = 0
    rows = conn.execute(
        "SELECT seq, delivery_id, route, body, item_count, rejections FROM deliveries"
        " WHERE seq > ? ORDER BY seq LIMIT ?",
        (after_seq, limit),
    )
    for seq, delivery_id, route, body, item_count, rejections in rows:
        entries.append(
            LogEntry(
                seq, delivery_id, route, bytes(body), item_count, decode_rejections(rejections)
            )
        )
        size += len(body)
        if size >= max_bytes:
            break
    return entries


class SQLiteProjectionTx(ProjectionTx):
    def __init__(self, conn: sqlite3.Connection, prefix: str) -> None:
        self.conn = conn
        self.prefix = prefix

    def insert_new(self, table: str, rows: Sequence[Row]) -> list[bool]:
        sql = _sql(self.prefix, table)["insert_new"]
        cursor = self.conn.cursor()
        inserted = []
        for row in rows:
            cursor.execute(sql, row)
            inserted.append(cursor.rowcount == 1)
        return inserted

    def load(self, table: str, keys: Iterable[Row]) -> dict[Row, Row]:
        key_width = len(COLUMNS[table][0])
        wanted = list(dict.fromkeys(keys))
        found: dict[Row, Row] = {}
        per_query = max(1, MAX_PARAMS // key_width)
        select = _sql(self.prefix, table)["select"]
        row_marks = "(" + ", ".join("?" for _ in range(key_width)) + ")"
        for start in range(0, len(wanted), per_query):
            chunk = wanted[start : start + per_query]
            sql = select + "(VALUES " + ", ".join(row_marks for _ in chunk) + ")"
            params = [value for key in chunk for value in key]
            for row in self.conn.execute(sql, params):
                found[tuple(row[:key_width])] = tuple(row[key_width:])
        return found

    def select_by(self, table: str, columns: Sequence[str], values: Iterable[Row]) -> list[Row]:
        keys, rest = COLUMNS[table]
        wanted = list(dict.fromkeys(values))
        width = len(columns)
        marks = "(" + ", ".join("?" for _ in columns) + ")"
        head = (
            f"SELECT {', '.join(keys + rest)} FROM {self.prefix}{table}"
            f" WHERE ({', '.join(columns)}) IN "
        )
        rows: list[Row] = []
        per_query = max(1, MAX_PARAMS // width)
        for start in range(0, len(wanted), per_query):
            chunk = wanted[start : start + per_query]
            sql = head + "(VALUES " + ", ".join(marks for _ in chunk) + ")"
            rows.extend(tuple(r) for r in self.conn.execute(sql, [v for k in chunk for v in k]))
        return rows

    def save(self, table: str, rows: Sequence[Row]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["save"], rows)

    def delete(self, table: str, keys: Iterable[Row]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["delete"], list(keys))

    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[Row]:
        ids = list(dict.fromkeys(identities))
        rows: set[Row] = set()
        table = self.prefix + "links"
        for start in range(0, len(ids), MAX_PARAMS // 2):
            chunk = ids[start : start + MAX_PARAMS // 2]
            values = "(VALUES " + ", ".join("(?, ?)" for _ in chunk) + ")"
            params = [v for pair in chunk for v in pair]
            for end in ("a", "b"):
                sql = (
                    f"SELECT a_ns, a_name, b_ns, b_name, kind, type FROM {table}"
                    f" WHERE ({end}_ns, {end}_name) IN {values}"
                )
                rows.update(tuple(r) for r in self.conn.execute(sql, params))
        return sorted(rows)

    def position(self) -> int:
        row = self.conn.execute(f"SELECT seq FROM {self.prefix}position").fetchone()
        return int(row[0])

    def read_log(self, after_seq: int, limit: int, max_bytes: int) -> list[LogEntry]:
        return read_log(self.conn, after_seq, limit, max_bytes)

    def serve_this_generation(self) -> int:
        old = int(self.conn.execute("SELECT generation FROM graph_meta").fetchone()[0])
        new = int(self.prefix.removeprefix("g").removesuffix("_"))
        self.conn.execute(
            "UPDATE graph_meta SET generation = ?, graph_version = ?", (new, GRAPH_VERSION)
        )
        return old

    def set_position(self, seq: int) -> None:
        self.conn.execute(f"UPDATE {self.prefix}position SET seq = ? WHERE id = 1", (seq,))
