"""`embrasure ingest` reads what openlineage-python's FileTransport writes (1.54.0,
openlineage/client/transport/file.py), in each of its modes:

- ``append: true``: every event appended to ``log_file_path`` as one line of JSON (JSONL,
  whatever the file is called: .json, .log, .jsonl);
- ``append: false`` (the default): one file per event, ``{log_file_path}-{%Y%m%d-%H%M%S.%f}.json``;
- ``debug_mode: true``: one pretty-printed file per event,
  ``{log_file_path}-{%y%m%dT%H%M%S.%f}-{job}-{eventType}.json``; with ``append: true``
  too, pretty-printed events one after another in one file (the client indents whenever
  debug_mode is on, whatever its docstring says).

Each mode, ingested into its own database, gives the same graph (the canonical export,
byte for byte) as the HTTP transport's events; one of them goes to a live server over
--url and is read back in full.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from openlineage.client.transport.file import FileConfig, FileTransport

from embrasure.cli.main import main

import olclient as ol
from conftest import MINIMAL_EVENT, ServerProcess

EVENTS = len(ol.pipeline_events())
# Where the transport writes (log_file_path), how, and what `embrasure ingest` is given.
MODES: dict[str, tuple[str, dict[str, Any], str]] = {
    "append, JSONL under .json": ("out/ol.json", {"append": True}, "out/ol.json"),
    # Read by what the file holds, not its name (issue 16: .jsonl was read line by line).
    "append, .jsonl": ("out/events.jsonl", {"append": True}, "out/events.jsonl"),
    "append, debug_mode, .jsonl": (
        "out/events.jsonl",
        {"append": True, "debug_mode": True},
        "out/events.jsonl",
    ),
    "append, a .log file named": ("out/openlineage.log", {"append": True}, "out/openlineage.log"),
    "a file per event": ("out/events", {}, "out"),
    "a file per event, debug_mode": ("out/events", {"debug_mode": True}, "out"),
    "append, debug_mode": ("out/ol.json", {"append": True, "debug_mode": True}, "out/ol.json"),
}


def _write(tmp_path: Path, log_file_path: str, options: dict[str, Any]) -> None:
    (tmp_path / "out").mkdir()
    config = FileConfig.from_dict({"log_file_path": str(tmp_path / log_file_path), **options})
    client = ol.client(FileTransport(config))
    for event in ol.pipeline_events():
        client.emit(event)


def _ingest(path: Path, *target: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["ingest", str(path), *target, "--json"])
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def _export(db: Path) -> bytes:
    result = CliRunner().invoke(main, ["export", "--db", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


@pytest.fixture(scope="module")
def http_export(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The export of the same events sent by the HttpTransport, to compare with."""
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    db = tmp_path_factory.mktemp("http") / "http.db"
    server = ServerProcess(db).start()
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            ol.clean_environment(monkeypatch, db.parent)
            client = ol.client(HttpTransport(HttpConfig(url=server.url)))
            for event in ol.pipeline_events():
                client.emit(event)
        with httpx.Client(base_url=server.url) as http:
            ol.wait_projected(http, EVENTS)
    finally:
        server.terminate()
    return _export(db)


@pytest.mark.parametrize("mode", list(MODES))
def test_ingest_reads_each_file_transport_mode(
    mode: str,
    http_export: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ol.clean_environment(monkeypatch, tmp_path)
    log_file_path, options, given = MODES[mode]
    _write(tmp_path, log_file_path, options)
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) == (1 if options.get("append") else EVENTS), files
    db = tmp_path / "ingested.db"
    summary = _ingest(tmp_path / given, "--db", f"sqlite:///{db}")
    assert (summary["events"], summary["accepted"], summary["invalid"]) == (EVENTS, EVENTS, 0)
    assert summary["problems"] == []
    assert summary["projection"] == {"projected": EVENTS, "quarantined": 0, "pending": 0}
    assert _export(db) == http_export


def test_appended_events_ingested_into_a_live_server_read_back_exactly(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual set-up (append: true, then `embrasure ingest FILE --url`), on both
    backends; ingesting the same file again stores nothing new."""
    ol.clean_environment(monkeypatch, tmp_path)
    _write(tmp_path, "out/ol.json", {"append": True})
    server = ServerProcess(db_url, log_dir=tmp_path).start()
    try:
        summary = _ingest(tmp_path / "out/ol.json", "--url", server.url)
        assert (summary["accepted"], summary["duplicate"], summary["invalid"]) == (EVENTS, 0, 0)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            ol.assert_pipeline_graph(http)
            again = _ingest(tmp_path / "out/ol.json", "--url", server.url)
            assert (again["accepted"], again["duplicate"]) == (0, EVENTS)
            ol.assert_pipeline_graph(http)
    finally:
        server.stop()


def test_concatenated_documents_are_read_one_by_one_and_a_bad_one_is_named() -> None:
    """Pretty-printed events one after another: each is checked alone with the
    receiver's strict rules; a bad one is reported by the line it starts on."""
    from embrasure.cli.event_files import Item, Unreadable, read_document

    good = json.dumps(MINIMAL_EVENT, indent=2)
    data = f'{good}\n{good}\n{{\n  "a": 1,\n  "a": 2\n}}\n'.encode()
    read = list(read_document("f.json", data))
    assert [type(r) for r in read] == [Item, Item, Unreadable]
    lines = good.count("\n") + 1
    assert [r.source for r in read] == [
        "f.json:1",
        f"f.json:{lines + 1}",
        f"f.json:{2 * lines + 1}",
    ]
    assert isinstance(read[2], Unreadable) and "duplicate" in read[2].reason.lower()
    assert isinstance(read[0], Item) and read[0].raw == good.encode()
    assert sum(r.weight for r in read) == len(data)
    # Not documents one after another: the parse error is reported as it was.
    (bad,) = read_document("g.json", good.encode() + b"\n}")
    assert isinstance(bad, Unreadable) and bad.source == "g.json"
