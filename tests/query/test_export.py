"""The export is written in pieces (embrasure/export.py): the pieces make the canonical
document whatever their size, and a client that goes away stops the export thread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.query import export
from embrasure.store import open_store

from graph_api import Api, export_events


@pytest.fixture
def loaded(client: TestClient) -> Api:
    api = Api(client)
    api.ingest(*export_events())
    return api


def test_pieces_make_the_same_canonical_document_at_any_size(
    loaded: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = loaded.export()
    doc = orjson.loads(whole)
    assert all(doc[part] for part in ("column_edges", "datasets", "edges", "jobs", "runs"))
    # Canonical: compact, keys sorted at every level (what orjson writes for the whole).
    assert whole == orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    for size in (1, 2, 3):
        monkeypatch.setattr(export, "CHUNK", size)
        with loaded.store.reader() as reader:
            pieces = list(export.export_chunks(reader))
        assert len(pieces) > 10  # really in pieces
        assert b"".join(pieces) == whole


def test_edges_are_sorted_by_source_then_target(loaded: Api) -> None:
    edges = orjson.loads(loaded.export())["edges"]
    keys = [(e["source"], e["target"], e["static"]) for e in edges]
    assert keys == sorted(keys)
    assert any(e["source"].startswith("dataset:") for e in edges)
    assert any(e["target"].startswith("dataset:") for e in edges)


def test_an_abandoned_export_releases_the_export_thread(
    loaded: Api, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export thread is single: if a client that stopped reading left it blocked,
    every later export would hang (here: time out)."""
    monkeypatch.setattr(export, "CHUNK", 1)  # many more pieces than the queue holds
    store = open_store(db_url)

    async def abandon_then_export() -> bytes:
        pieces = await export.open_export(store)
        assert await anext(pieces)
        await pieces.aclose()
        again = await export.open_export(store)
        return b"".join([p async for p in again])

    try:
        whole = asyncio.run(asyncio.wait_for(abandon_then_export(), timeout=30))
    finally:
        store.close()
    assert whole == loaded.export()


def test_export_cli_writes_a_file_whole(loaded: Api, db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "graph.json"
    subprocess.run(
        [sys.executable, "-m", "embrasure", "export", "--db", db_url, "-o", out],
        check=True,
        timeout=60,
    )
    assert out.read_bytes() == loaded.export() + b"\n"
    assert not (tmp_path / "graph.json.partial").exists()
