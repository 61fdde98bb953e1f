"""What the store's shared SQL needs of a connection: sqlite3's and the PostgreSQL
adapter's (store/postgres_conn.py) both have it. A module of its own so that sql.py and
interned.py, which sql.py imports, both name it without importing each other."""

from __future__ import annotations

from typing import Any, Protocol


class Connection(Protocol):
    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...
