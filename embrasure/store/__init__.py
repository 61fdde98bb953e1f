"""Storage backends behind one interface (``base.Store``); SQL lives only in this package."""

from __future__ import annotations

import os
import re

from embrasure.errors import EmbrasureError
from embrasure.store.base import Store


def redact(url: str) -> str:
    """A database URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


COMPRESSION = ("zstd", "off")


def open_store(
    url: str,
    *,
    upgrade: bool = False,
    pool_size: int = 10,
    compression: str = "zstd",
    create: bool = True,
) -> Store:
    """Open the store named by ``url``: an empty database gets the schema, an older
    schema is upgraded only when ``upgrade`` is true (else SchemaError). ``pool_size``:
    most connections a PostgreSQL store opens (settings.db_pool_size); ``compression``:
    how new bodies are stored (settings.log_compression). Without ``create``, a SQLite
    file that does not exist is an error rather than a new database: commands that only
    read, or work on a database that has a log, never create one (docs/cli.md)."""
    if compression not in COMPRESSION:
        raise EmbrasureError(f"log compression {compression!r} is not one of zstd, off")
    compress = compression == "zstd"
    if url.startswith("sqlite:///"):
        from embrasure.store.sqlite import SQLiteStore

        path = url.removeprefix("sqlite:///")
        if not create and not os.path.exists(path):
            raise EmbrasureError(
                f"no database at {os.path.abspath(path)} (`embrasure serve` or"
                " `embrasure db upgrade` creates one there)"
            )
        return SQLiteStore(path, upgrade=upgrade, compress=compress)
    if url.startswith(("postgresql://", "postgres://")):
        from embrasure.store.postgres import PostgresStore

        return PostgresStore(url, upgrade=upgrade, pool_size=pool_size, compress=compress)
    raise EmbrasureError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql://…")


__all__ = ["Store", "open_store", "redact"]
