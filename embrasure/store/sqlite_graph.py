"""SQLite: the projection transaction on one graph generation.

Rows are read and written generically from graph_schema.COLUMNS, so this module knows
tables and keys but no projection rule. SQLite ≥ 3.24 understands ``ON CONFLICT``
(upserts); Python's bundled SQLite has it.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Sequence

from ..model import Rejection
from .base import LogEntry, ProjectionTx, Row
from .graph_schema import COLUMNS, GRAPH_VERSION, MERGES
from .migrations import DIALECT_TOKENS

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
        "delete": f"DELETE FROM {name} WHERE " + " AND ".join(f"{k} = ?" for k in keys),
        "merge": f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({marks})"
        f" ON CONFLICT ({key_list}) DO UPDATE SET "
        + ", ".join(
            f"{column} = {rule.format(**DIALECT_TOKENS['sqlite'])}"
            for column, rule in MERGES.get(table, {}).items()
        ),
    }


def select_where_in(
    conn: sqlite3.Connection,
    table: str,
    columns: Sequence[str],
    match: Sequence[str],
    values: Iterable[Sequence[object]],
    where: str = "",
) -> list[Row]:
    """``columns`` of the rows of ``table`` whose ``match`` columns equal one of
    ``values`` (each value at most once in the result per matching row).

    Written as a join from a VALUES list, not as ``(a, b) IN (VALUES …)``: SQLite 3.40
    plans a multi-column row-value IN as a full table scan, while ``CROSS JOIN`` (which
    keeps the VALUES list as the outer loop) searches the index for every value.
    """
    wanted = list(dict.fromkeys(tuple(v) for v in values))
    width = len(match)
    row_marks = "(" + ", ".join("?" for _ in match) + ")"
    on = " AND ".join(f"t.{c} = v.column{i + 1}" for i, c in enumerate(match))
    picked = ", ".join(f"t.{c}" for c in columns)
    out: list[Row] = []
    per_query = max(1, MAX_PARAMS // width)
    for start in range(0, len(wanted), per_query):
        chunk = wanted[start : start + per_query]
        sql = (
            f"SELECT {picked} FROM (VALUES {', '.join(row_marks for _ in chunk)}) AS v"
            f" CROSS JOIN {table} AS t ON {on}" + (f" WHERE {where}" if where else "")
        )
        out.extend(tuple(r) for r in conn.execute(sql, [x for key in chunk for x in key]))
    return out


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

    def insert_missing(self, table: str, rows: Sequence[Row]) -> None:
        # One executemany: SQLite's per-row counts are only needed by insert_new.
        self.conn.executemany(_sql(self.prefix, table)["insert_new"], rows)

    def load(self, table: str, keys: Iterable[Row]) -> dict[Row, Row]:
        key_columns, value_columns = COLUMNS[table]
        width = len(key_columns)
        rows = select_where_in(
            self.conn, self.prefix + table, key_columns + value_columns, key_columns, keys
        )
        return {row[:width]: row[width:] for row in rows}

    def select_by(self, table: str, columns: Sequence[str], values: Iterable[Row]) -> list[Row]:
        keys, rest = COLUMNS[table]
        return select_where_in(self.conn, self.prefix + table, keys + rest, columns, values)

    def save(self, table: str, rows: Sequence[Row]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["save"], rows)

    def merge(self, table: str, rows: Sequence[Row]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["merge"], rows)

    def delete(self, table: str, keys: Iterable[Row]) -> None:
        self.conn.executemany(_sql(self.prefix, table)["delete"], list(keys))

    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[Row]:
        ids = list(identities)
        columns = ("a_ns", "a_name", "b_ns", "b_name", "kind", "type")
        table = self.prefix + "links"
        rows = set(select_where_in(self.conn, table, columns, ("a_ns", "a_name"), ids))
        rows.update(select_where_in(self.conn, table, columns, ("b_ns", "b_name"), ids))
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
