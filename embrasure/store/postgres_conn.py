"""PostgreSQL: running the SQL both backends share (store/sql.py), and driver errors.

The shared SQL is written in SQLite's spelling. ``translate`` is the one place where the
dialects' spelling of the *same* statement differs: placeholders (``?`` and ``:name`` →
psycopg's ``%s`` and ``%(name)s``, a literal ``%`` doubled) and SQLite's ``CROSS JOIN …
ON`` (an inner join in written order, a planner hint) → ``JOIN``. What differs in
meaning (upserts' merge rules, collation, ``instr``) is in the schema's dialect tokens
(migrations.DIALECT_TOKENS), not here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from embrasure.errors import StoreConflict, StoreError, StoreUnavailable

_QUOTED = re.compile(r"('(?:[^']|'')*')")
_TOKEN = re.compile(r"\?|(?<![:\w]):([A-Za-z_]\w*)|%|\bCROSS JOIN\b")


def _token(match: re.Match[str]) -> str:
    text = match.group(0)
    if text == "?":
        return "%s"
    if text == "%":
        return "%%"
    if text == "CROSS JOIN":
        return "JOIN"
    return f"%({match.group(1)})s"


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """SQLite-spelled SQL → psycopg's; string literals are left alone."""
    parts = _QUOTED.split(sql)
    return "".join(p if i % 2 else _TOKEN.sub(_token, p) for i, p in enumerate(parts))


class PgConnection:
    """A psycopg connection that speaks the shared SQL: ``execute`` and ``executemany``
    as sqlite3's, with the statement translated."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Any = ()) -> Any:  # a psycopg.Cursor
        # Always with parameters (maybe empty): psycopg then reads the placeholders and
        # the doubled '%' that translate wrote.
        return self.raw.execute(translate(sql), parameters)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:  # pipelined by psycopg: one round trip for the lot
            self.raw.cursor().executemany(translate(sql), rows)

    def execute_arrays(self, sql: str, arrays: Sequence[list[Any]]) -> Any:
        """``execute`` with every parameter an array, sent in binary: the text format
        escapes each element (a regex over every facet value, measured as most of a
        projection's driver time)."""
        return self.raw.execute(translate(sql).replace("%s", "%b"), arrays)


def one_line(exc: BaseException) -> str:
    """libpq's messages run over several lines (a hint, the query's position): errors
    here are one line (docs/cli.md)."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def neutral(exc: psycopg.Error, doing: str) -> StoreError:
    """A driver error → the store's neutral tree (errors.py)."""
    message = f"{doing}: {one_line(exc)}"
    if isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return StoreConflict(message)
    if isinstance(exc, psycopg.OperationalError):
        # Connection lost, server shutting down, disk full, too many connections, a pool
        # with no free connection in time (psycopg_pool.PoolTimeout): retry later.
        return StoreUnavailable(message)
    return StoreError(message)
