"""The real openlineage-python client (pinned in pyproject's dev extras) against a live
server over real HTTP: its HttpTransport and its AsyncHttpTransport send RunEvents,
JobEvents and DatasetEvents built with the client's own facet classes, and the read API
answers with exactly the graph docs/projection.md and docs/queries.md describe. Its
``compression: gzip`` option gets a 415 the operator can act on; its retries (a proxy
that resets connections and answers late) store nothing twice."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import logging
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import requests
from click.testing import CliRunner
from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde
from openlineage.client.transport import Transport
from openlineage.client.transport.async_http import AsyncHttpConfig, AsyncHttpTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from embrasure.cli.main import main

import olclient as ol
from conftest import ServerProcess
from http_client import HTTP

pytestmark = pytest.mark.slow

# The client's retry settings as an operator writes them (openlineage.yml `retry:`), with
# short waits: urllib3 retries a POST on a reset or a read time-out because the client's
# default allowed_methods include POST.
RETRY = {
    "total": 5,
    "read": 5,
    "connect": 5,
    "backoff_factor": 0.05,
    "status_forcelist": [500, 502, 503, 504],
    "allowed_methods": ["HEAD", "POST"],
}
EVENTS = 9  # ol.pipeline_events()


def _transport(kind: str, url: str, **options: Any) -> Transport:
    """The transport as the client's own config loader builds it from a dict (what
    openlineage.yml or OPENLINEAGE__TRANSPORT__* hold)."""
    if kind == "sync":
        return HttpTransport(HttpConfig.from_dict({"type": "http", "url": url, **options}))
    return AsyncHttpTransport(
        AsyncHttpConfig.from_dict({"type": "async_http", "url": url, **options})
    )


def _emit_all(transport: Transport, events: list[ol.Event]) -> None:
    client = ol.client(transport)
    for event in events:
        client.emit(event)
    if isinstance(transport, AsyncHttpTransport):
        assert transport.wait_for_completion(timeout=60)
        stats = dict(transport.get_stats())
        transport.close(timeout=10)
        assert stats == {"pending": 0, "success": len(events), "failed": 0}
    else:
        transport.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_python_client_sends_every_event_kind_and_the_graph_is_exact(
    kind: str, server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ol.clean_environment(monkeypatch, tmp_path)
    _emit_all(_transport(kind, server.url), ol.pipeline_events())
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ol.wait_projected(http, EVENTS)
        deliveries = ol.get(http, "/api/v1/deliveries")["deliveries"]
        assert len(deliveries) == EVENTS  # one delivery per event, none a duplicate
        assert {d["state"] for d in deliveries} == {"projected"}
        ol.assert_pipeline_graph(http)


def test_gzip_compression_gets_a_415_that_names_the_setting(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ol.clean_environment(monkeypatch, tmp_path)
    event = ol.pipeline_events()[3]
    server = ServerProcess(db_path).start()
    try:
        # The sync transport raises, and the problem document is on the exception.
        sync = _transport("sync", server.url, compression="gzip")
        with pytest.raises(requests.HTTPError) as raised:
            ol.client(sync).emit(event)
        reply = raised.value.response
        assert reply is not None
        assert reply.status_code == 415
        assert reply.headers["content-type"] == "application/problem+json"
        assert "retry-after" not in reply.headers  # retrying cannot help
        problem = reply.json()
        assert problem["title"] == "Compressed bodies are not accepted"
        assert "remove `compression: gzip` from the http transport" in problem["detail"]

        # The async transport does not raise: it counts the event failed and logs the
        # status (its config cannot be fixed by retrying, 415 is not in status_forcelist).
        caplog.set_level(logging.ERROR, logger="openlineage.client.transport.async_http")
        asynchronous = _transport("async", server.url, compression="gzip")
        assert isinstance(asynchronous, AsyncHttpTransport)
        ol.client(asynchronous).emit(event)
        asynchronous.wait_for_completion(timeout=30)
        assert asynchronous.get_stats() == {"pending": 0, "success": 0, "failed": 1}
        asynchronous.close(timeout=5)
        assert any("status code: 415" in r.getMessage() for r in caplog.records)

        deliveries = HTTP.get(server.url + "/api/v1/deliveries").json()["deliveries"]
        assert deliveries == []  # nothing stored
    finally:
        server.stop()


class FlakyProxy:
    """An HTTP proxy in front of the server that fails each distinct request body the
    first time it sees it, after the server has already stored it: alternately it
    resets the connection instead of answering, or answers only after the client's read
    time-out. The second time it relays. So every event reaches the server at least
    twice, as under a retry storm. It records every status the server answered."""

    def __init__(self, upstream: str, late: float) -> None:
        self.upstream = upstream
        self.late = late
        self.seen: dict[bytes, int] = {}
        self.statuses: list[int] = []
        self.receipts: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "content-encoding", "authorization")
                }
                reply = HTTP.post(
                    proxy.upstream + self.path, content=body, headers=headers, timeout=30
                )
                digest = hashlib.sha256(body).digest()
                with proxy.lock:
                    proxy.statuses.append(reply.status_code)
                    if reply.status_code == 202:
                        proxy.receipts.append(reply.json())
                    order = len(proxy.seen)
                    first = digest not in proxy.seen
                    proxy.seen[digest] = proxy.seen.get(digest, 0) + 1
                if first and order % 2 == 0:
                    # RST instead of an answer: the client cannot know it was stored.
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    return
                if first:
                    time.sleep(proxy.late)  # the client has given up and sent it again
                with contextlib.suppress(OSError):
                    self.send_response(reply.status_code)
                    for name in ("content-type", "content-length"):
                        self.send_header(name, reply.headers[name])
                    self.end_headers()
                    self.wfile.write(reply.content)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def _proxy(upstream: str, late: float) -> Iterator[FlakyProxy]:
    with FlakyProxy(upstream, late) as proxy:
        yield proxy


def test_a_retry_storm_stores_each_event_once(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ol.clean_environment(monkeypatch, tmp_path)
    events = ol.pipeline_events()
    timeout = 0.5
    with _proxy(server.url, late=timeout * 2) as proxy:
        _emit_all(_transport("sync", proxy.url, timeout=timeout, retry=RETRY), events)
    # Every event reached the server at least twice, and every answer was a 202.
    assert len(proxy.seen) == EVENTS
    assert min(proxy.seen.values()) >= 2
    assert set(proxy.statuses) == {202}
    fresh = [r for r in proxy.receipts if not r["duplicate"]]
    assert len(fresh) == EVENTS
    assert len(proxy.receipts) - len(fresh) == sum(proxy.seen.values()) - EVENTS

    with httpx.Client(base_url=server.url, timeout=30) as http:
        ol.wait_projected(http, EVENTS)
        assert len(ol.get(http, "/api/v1/deliveries")["deliveries"]) == EVENTS
        ol.assert_pipeline_graph(http)  # run_count 2, two runs, no duplicate children
        before = http.get("/api/v1/export").content

        # The async transport through a new storm, then the sync one straight to the
        # server again: the same bodies, all duplicates; the graph does not move.
        with _proxy(server.url, late=timeout * 2) as again:
            _emit_all(_transport("async", again.url, timeout=timeout, retry=RETRY), events)
        assert set(again.statuses) == {202}
        assert min(again.seen.values()) >= 2
        assert {r["duplicate"] for r in again.receipts} == {True}
        _emit_all(_transport("sync", server.url), events)
        time.sleep(0.3)  # nothing new to project; a stray projection would show below
        assert len(ol.get(http, "/api/v1/deliveries")["deliveries"]) == EVENTS
        assert http.get("/api/v1/export").content == before
        assert len(orjson.loads(before)["runs"]) == 3


def _token(db: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["tokens", "create", "--db", db, *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def test_configured_from_the_environment_with_a_token_and_a_provider_key(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/producers/python-client.md tells an operator to set: OPENLINEAGE_URL,
    OPENLINEAGE_ENDPOINT with the provider_key in its query, OPENLINEAGE_API_KEY (sent
    as Authorization: Bearer)."""
    ol.clean_environment(monkeypatch, tmp_path)
    db = f"sqlite:///{db_path}"
    ingest = _token(db, "--scope", "ingest")
    reader = _token(db, "--scope", "read")
    server = ServerProcess(db_path).start()
    try:
        monkeypatch.setenv("OPENLINEAGE_URL", server.url)
        monkeypatch.setenv("OPENLINEAGE_ENDPOINT", "api/v1/lineage?provider_key=etl-scheduler")
        event = ol.pipeline_events()[2]
        with pytest.raises(requests.HTTPError) as refused:
            OpenLineageClient().emit(event)  # no token yet
        assert refused.value.response is not None
        assert refused.value.response.status_code == 401

        monkeypatch.setenv("OPENLINEAGE_API_KEY", ingest)
        client = OpenLineageClient()
        assert isinstance(client.transport, HttpTransport)
        for e in ol.pipeline_events():
            client.emit(e)
        auth = {"Authorization": f"Bearer {reader}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as http:
            ol.wait_projected(http, EVENTS)
            deliveries = ol.get(http, "/api/v1/deliveries")["deliveries"]
            assert {d["provider_key"] for d in deliveries} == {"etl-scheduler"}
            assert len(deliveries) == EVENTS
            ol.assert_pipeline_graph(http)
    finally:
        server.stop()


def test_a_429_is_retried_after_its_retry_after_when_the_client_is_told_to(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advice of docs/producers/: the client's default status_forcelist leaves 429
    out, so an event refused while the backlog is over its bound is lost; with 429 added
    the client waits the Retry-After and sends it again, and it lands once a projector
    has caught up."""
    ol.clean_environment(monkeypatch, tmp_path)
    server = ServerProcess(db_path, "--no-projector", "--max-backlog-items", "1").start()
    projector: subprocess.Popen[bytes] | None = None
    try:
        events = [ol.completed_run(f"01943c00-0000-7000-8000-0000000b{n:04x}") for n in range(40)]
        bodies = iter(Serde.to_json(e).encode() for e in events)
        headers = {"Content-Type": "application/json"}
        deadline = time.monotonic() + 30
        while True:  # fill the backlog until the server says so (it looks once a second)
            reply = HTTP.post(server.url + "/api/v1/lineage", content=next(bodies), headers=headers)
            if reply.status_code == 429:
                break
            assert reply.status_code == 202 and time.monotonic() < deadline
            time.sleep(0.2)
        assert reply.headers["retry-after"] == "1"

        with pytest.raises(requests.HTTPError) as refused:
            ol.client(_transport("sync", server.url)).emit(events[-1])  # the default retries
        assert refused.value.response is not None
        assert refused.value.response.status_code == 429

        def drain() -> None:
            nonlocal projector
            time.sleep(0.5)  # after the emit below has been refused at least once
            projector = subprocess.Popen(
                [sys.executable, "-m", "embrasure", "project", "--db", f"sqlite:///{db_path}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        threading.Thread(target=drain, daemon=True).start()
        retry = {**RETRY, "total": 20, "status_forcelist": [429, 500, 502, 503, 504]}
        transport = _transport("sync", server.url, retry=retry)
        assert isinstance(transport, HttpTransport)
        answer = transport.emit(events[-2])
        assert answer.status_code == 202
        statuses = [h.status for h in answer.raw.retries.history]
        assert statuses and set(statuses) == {429}  # refused, waited, sent again
    finally:
        if projector is not None:
            projector.terminate()
            projector.wait(30)
        server.stop()
