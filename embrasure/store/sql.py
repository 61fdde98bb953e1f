"""SQL both backends share, written once in SQLite's spelling.

Statements use ``?`` (and ``:name``) placeholders and SQLite's ``CROSS JOIN … ON`` (an
inner join whose written order is the loop order: SQLite's planner hint). A PostgreSQL
connection runs the same text through ``postgres_conn.translate``, the one place where
the paramstyle and that spelling differ. Everything here takes any connection with
``execute(sql, params)`` returning rows: a ``sqlite3.Connection`` or a
``postgres_conn.PgConnection``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from embrasure.model import Grant, Notification, Subscription, Token
from embrasure.store import outbox_sql
from embrasure.store.base import Key, Record
from embrasure.store.connection import Connection
from embrasure.store.interned import Interner, select_named
from embrasure.store.migrations import DIALECT_TOKENS
from embrasure.store.rows import INTERNED, LinkRow, R, maker, table_of
from embrasure.store.schema import COLUMNS, GRAPH_VERSION, MERGES, STORED_COLUMNS

T = TypeVar("T")

# SQLite's default limit on host parameters is 32,766 (since 3.32); PostgreSQL's is
# 65,535. Stay well below both: a few hundred keys a query is plenty.
MAX_PARAMS = 900


# -- keyed rows of any table ------------------------------------------------------------


def select_where_in(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    match: Sequence[str],
    values: Iterable[Sequence[object]],
    where: str = "",
) -> list[Key]:
    """``columns`` of the rows of ``table`` whose ``match`` columns equal one of
    ``values`` (each value at most once in the result per matching row).

    Written as a join from a VALUES list, not as ``(a, b) IN (VALUES …)``: SQLite 3.40
    plans a multi-column row-value IN as a full table scan, while ``CROSS JOIN`` (which
    keeps the VALUES list as the outer loop) searches the index for every value.
    """
    return _select_where_in(conn, table, columns, match, values, where, tuple)


def select_records(
    conn: Connection, prefix: str, table: type[R], match: Sequence[str], values: Iterable[Key]
) -> list[R]:
    """Whole rows of a graph table (of generation ``prefix``), as ``select_where_in``
    finds them, as records (an interned table's by name: store/interned.py)."""
    name = table_of(table)
    keys, rest = COLUMNS[name]
    make = maker(table)
    if name in INTERNED:
        return select_named(conn, prefix, name, keys + rest, match, values, make, MAX_PARAMS)
    return _select_where_in(conn, prefix + name, keys + rest, match, values, "", make)


def _select_where_in(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    match: Sequence[str],
    values: Iterable[Sequence[object]],
    where: str,
    make: Callable[[Any], T],
) -> list[T]:
    wanted = list(dict.fromkeys(tuple(v) for v in values))
    width = len(match)
    row_marks = "(" + ", ".join("?" for _ in match) + ")"
    on = " AND ".join(f"t.{c} = v.column{i + 1}" for i, c in enumerate(match))
    picked = ", ".join(f"t.{c}" for c in columns)
    out: list[T] = []
    per_query = max(1, MAX_PARAMS // width)
    for start in range(0, len(wanted), per_query):
        chunk = wanted[start : start + per_query]
        sql = (
            f"SELECT {picked} FROM (VALUES {', '.join(row_marks for _ in chunk)}) AS v"
            f" CROSS JOIN {table} AS t ON {on}" + (f" WHERE {where}" if where else "")
        )
        out.extend(make(r) for r in conn.execute(sql, [x for key in chunk for x in key]))
    return out


_QUOTED = re.compile(r"('(?:[^']|'')*')")


def _qualified(rule: str, table: str, columns: Sequence[str]) -> str:
    """A merge rule with the stored row's columns named ``table.column``: SQLite reads a
    bare name in an upsert's SET list as the stored row, PostgreSQL refuses it as
    ambiguous (it could be ``excluded``'s). String literals are left alone."""
    bare = re.compile(r"(?<![.\w])(" + "|".join(columns) + r")\b")
    parts = _QUOTED.split(rule)
    return "".join(p if i % 2 else bare.sub(rf"{table}.\1", p) for i, p in enumerate(parts))


@functools.cache
def table_sql(prefix: str, table: str, dialect: str, source: str = "") -> dict[str, str]:
    """The generic statements on one graph table (schema.STORED_COLUMNS): rows are
    tuples, key columns first. ``merge``'s SET list is the table's merge rule (MERGES).
    The rows come from ``VALUES (?, …)``, one row a statement, unless ``source`` (a
    query giving every column in order) says otherwise."""
    keys, values = STORED_COLUMNS[table]
    columns = keys + values
    name = prefix + table
    source = source or f"VALUES ({', '.join('?' for _ in columns)})"
    insert = f"INSERT INTO {name} ({', '.join(columns)}) {source}"
    conflict = f" ON CONFLICT ({', '.join(keys)})"
    replace = ", ".join(f"{c} = excluded.{c}" for c in values)
    rules = MERGES.get(table, {})
    tokens = DIALECT_TOKENS[dialect]
    merge = ", ".join(
        f"{c} = {_qualified(rule.format(**tokens), name, columns)}" for c, rule in rules.items()
    )
    return {
        "insert_new": insert + conflict + " DO NOTHING",
        "save": insert + conflict + (f" DO UPDATE SET {replace}" if values else " DO NOTHING"),
        "delete": f"DELETE FROM {name} WHERE " + " AND ".join(f"{k} = ?" for k in keys),
        "merge": insert + conflict + (f" DO UPDATE SET {merge}" if merge else " DO NOTHING"),
    }


class TxReads:
    """The reads of a projection transaction (base.ProjectionTx), one SQL text for both
    backends, the translation of interned tables' rows (``stored``), and the one write
    both spell alike (``sync_run_keys``); a backend's ProjectionTx lists this class first
    among its bases and sets ``interner``."""

    conn: Connection
    prefix: str
    interner: Interner

    def stored(self, table: type[tuple[Any, ...]], rows: Sequence[Key]) -> Sequence[Key]:
        """Rows to write as the table stores them: an interned table's names become
        ids (interned now when new); any other table's rows as they are."""
        name = table_of(table)
        return self.interner.stored(name, rows) if name in INTERNED else rows

    def keys_as_stored(self, table: type[tuple[Any, ...]], keys: Iterable[Key]) -> list[Key]:
        """Keys to delete, as stored; an interned key naming something never interned
        is left out (no row has it)."""
        name = table_of(table)
        listed = list(keys)
        return self.interner.stored(name, listed, create=False) if name in INTERNED else listed

    def any_subscription(self) -> bool:
        return outbox_sql.any_subscription(self.conn)

    def subscriptions(self) -> list[Subscription]:
        return outbox_sql.subscriptions(self.conn)

    def cause_decided(self, prefix: str) -> bool:
        return outbox_sql.cause_decided(self.conn, prefix)

    def add_notifications(self, rows: Sequence[Notification]) -> None:
        outbox_sql.add_notifications(self.conn, rows)

    def load(self, table: type[R], keys: Iterable[Key]) -> dict[Key, R]:
        key_columns = COLUMNS[table_of(table)][0]
        width = len(key_columns)
        rows = select_records(self.conn, self.prefix, table, key_columns, keys)
        return {row[:width]: row for row in rows}

    def select_by(self, table: type[R], columns: Sequence[str], values: Iterable[Key]) -> list[R]:
        return select_records(self.conn, self.prefix, table, columns, values)

    def stored_keys(self, table: Record, keys: Iterable[Key]) -> set[Key]:
        key_columns = COLUMNS[table_of(table)][0]
        name = self.prefix + table_of(table)
        return set(select_where_in(self.conn, name, key_columns, key_columns, keys))

    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[LinkRow]:
        ids = list(identities)
        rows = set(select_records(self.conn, self.prefix, LinkRow, ("a_ns", "a_name"), ids))
        rows.update(select_records(self.conn, self.prefix, LinkRow, ("b_ns", "b_name"), ids))
        return sorted(rows)

    def sync_run_keys(self, run_ids: Sequence[str]) -> None:
        # One statement per MAX_PARAMS runs, each run's rows found by the key's first
        # column; rows already equal are not rewritten (a PostgreSQL update writes a
        # new row version even when nothing changes).
        g = self.prefix
        latest = f"(SELECT r.latest_key FROM {g}runs r WHERE r.run_id = {g}run_io.run_id)"
        for start in range(0, len(run_ids), MAX_PARAMS):
            chunk = list(run_ids[start : start + MAX_PARAMS])
            marks = ", ".join("?" for _ in chunk)
            self.conn.execute(
                f"UPDATE {g}run_io SET run_key = {latest}"
                f" WHERE run_id IN ({marks}) AND run_key <> {latest}",
                chunk,
            )


_GENERATION_TABLE = re.compile(r"g(\d+)_")


def other_generations(table_names: Iterable[str], served: int) -> set[int]:
    """The graph generations other than ``served`` that have tables among
    ``table_names``: what a reproject killed while building, or while dropping the old
    generation after its swap, left behind."""
    found = {int(m.group(1)) for n in table_names if (m := _GENERATION_TABLE.match(n))}
    return found - {served}


def serve_generation(conn: Connection, prefix: str) -> int:
    """Make the generation of ``prefix`` the served one; return the one served until now."""
    old = int(conn.execute("SELECT generation FROM graph_meta").fetchone()[0])
    new = int(prefix.removeprefix("g").removesuffix("_"))
    conn.execute("UPDATE graph_meta SET generation = ?, graph_version = ?", (new, GRAPH_VERSION))
    return old


# -- bearer tokens (web/auth.py) -----------------------------------------------------------------

TOKEN_COLUMNS = "token_id, digest, scopes, provider_key, name, created_at, revoked_at"


def token_row(t: Token) -> Key:
    """A token as its tokens row (TOKEN_COLUMNS), scopes space-separated (RFC 6749 §3.3)."""
    scopes = " ".join(sorted(t.scopes))
    return (t.token_id, t.digest, scopes, t.provider_key, t.name, t.created_at, t.revoked_at)


def token_of(row: Key) -> Token:
    return Token(row[0], row[1], frozenset(row[2].split()), row[3], row[4], row[5], row[6])


def tokens(conn: Connection) -> list[Token]:
    return [token_of(r) for r in conn.execute(f"SELECT {TOKEN_COLUMNS} FROM tokens").fetchall()]


def add_token(conn: Connection, token: Token) -> None:
    conn.execute(
        f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", token_row(token)
    )


def revoke_token(conn: Connection, token_id: str, at: str) -> bool:
    cursor = conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
        (at, token_id),
    )
    return bool(cursor.rowcount == 1)


# -- grants (docs/security.md#grants) ---------------------------------------------------

GRANT_COLUMNS = "grant_id, who, scope, namespaces, created_at, created_by"


def grants(conn: Connection) -> list[Grant]:
    rows = conn.execute(f"SELECT {GRANT_COLUMNS} FROM grants ORDER BY created_at, grant_id")
    return [Grant(*row) for row in rows.fetchall()]


def add_grant(conn: Connection, grant: Grant) -> None:
    conn.execute(
        f"INSERT INTO grants ({GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        dataclasses.astuple(grant),
    )


def remove_grant(conn: Connection, grant_id: str) -> bool:
    cursor = conn.execute("DELETE FROM grants WHERE grant_id = ?", (grant_id,))
    return bool(cursor.rowcount == 1)


def server_secret(conn: Connection, name: str, fresh: str, at: str) -> bytes:
    """The secret called ``name``; ``fresh`` (hex) becomes it when there is none yet.
    Two processes asking at once both read the one that was inserted first."""
    conn.execute(
        "INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO NOTHING",
        (name, fresh, at),
    )
    row = conn.execute("SELECT value FROM server_secrets WHERE name = ?", (name,)).fetchone()
    return bytes.fromhex(row[0])
