"""Storage backends behind one interface (``base.Store``); SQL lives only in this package."""

from __future__ import annotations

from ..errors import EmbrasureError
from .base import Store


def open_store(url: str, *, upgrade: bool = False) -> Store:
    """Open the store named by ``url``: an empty database gets the schema, an older
    schema is upgraded only when ``upgrade`` is true (else SchemaError)."""
    if url.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        return SQLiteStore(url.removeprefix("sqlite:///"), upgrade=upgrade)
    if url.startswith(("postgresql://", "postgres://")):
        raise EmbrasureError(
            "the PostgreSQL backend is not built yet (issue 5); use sqlite:///PATH"
        )
    raise EmbrasureError(f"unsupported database URL {url!r}: use sqlite:///PATH")


__all__ = ["Store", "open_store"]
