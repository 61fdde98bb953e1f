"""What a read may cost (web/read_bounds.py, docs/operations.md#reads-under-load): a query
past the read's time bound is stopped in the database (503 read-too-long), heavy reads
past --heavy-reads are refused at once (429 with Retry-After), on both backends; and
under `serve` the reads are answered by a read process of their own, at a lower CPU
priority."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from embrasure.errors import ReadTooLong
from embrasure.store import open_store
from embrasure.store.base import GraphReader
from embrasure.web import read_bounds, responses

from conftest import ServerProcess
from graph_api import REPORT, Api, daily_run

# A query that runs for minutes unless stopped: SQLite's recursive CTE, PostgreSQL's sleep.
SLOW = {
    "sqlite": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
    " SELECT COUNT(*) FROM n WHERE i < 0",
    "postgresql": "SELECT pg_sleep(300)",
}


def _slow(db_url: str) -> str:
    return SLOW["sqlite" if db_url.startswith("sqlite") else "postgresql"]


def test_a_query_past_the_reads_bound_is_stopped_in_the_database(db_url: str) -> None:
    store = open_store(db_url)
    try:
        started = time.monotonic()
        with (
            pytest.raises(ReadTooLong, match="read-timeout-seconds"),
            store.reader(timeout=0.2) as reader,
        ):
            reader.conn.execute(_slow(db_url)).fetchall()  # type: ignore[attr-defined]
        assert time.monotonic() - started < 10  # stopped, not run to its end
        with store.reader() as reader:  # the connection serves the next read as usual
            assert reader.backlog() is not None
    finally:
        store.close()


def test_a_read_past_its_bound_answers_503_read_too_long(db_url: str) -> None:
    store = open_store(db_url)
    bounds = read_bounds.ReadBounds(timeout=0.2, heavy=2)

    def work(reader: GraphReader) -> object:
        return reader.conn.execute(_slow(db_url)).fetchall()  # type: ignore[attr-defined]

    async def read() -> object:
        read_bounds.CURRENT.set(bounds)  # as web/auth.py's requires sets it
        return await responses.read(store, work)

    try:
        with pytest.raises(ReadTooLong) as raised:
            asyncio.run(read())
        problem = responses.read_too_long(raised.value)
        assert (problem.status, problem.slug) == (503, "read-too-long")
        assert problem.retry_after is None  # asking again for the same will not help
    finally:
        store.close()


def test_heavy_reads_past_the_bound_are_refused_with_retry_after(client: TestClient) -> None:
    api = Api(client)
    api.ingest(daily_run(1))
    bounds: read_bounds.ReadBounds = client.app.state.read_bounds  # type: ignore[attr-defined]
    lineage = f"/api/v1/lineage?namespace={REPORT[0]}&name={REPORT[1]}"
    assert client.get(lineage).status_code == 200
    taken = [asyncio.run(bounds.take()) for _ in range(bounds.heavy)]  # every place held
    assert all(taken)
    bounds.wait, bounds.queue = 0.2, 1
    try:
        refused = client.get(lineage)  # waited its turn 0.2 s, and was refused
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == str(read_bounds.RETRY_AFTER_S)
        assert refused.json()["type"].endswith("/too-many-heavy-reads")
        # Light reads are not counted among them.
        assert client.get("/api/v1/namespaces").status_code == 200
    finally:
        for _ in taken:
            bounds.give_back()
    assert client.get(lineage).status_code == 200


@pytest.mark.slow
def test_serve_answers_reads_from_a_read_process_of_lower_priority(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "embrasure.db").start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            event = daily_run(1)
            assert http.post("/api/v1/lineage", json=event).status_code == 202
            processes = http.get("/readyz").json()["processes"]
            reader = processes["reads-1"]["pid"]
            receiver = processes["receiver"]["pid"]
            with open(f"/proc/{reader}/stat") as stat:
                nice = int(stat.read().rpartition(")")[2].split()[16])
            assert nice == 10  # --read-nice
            assert receiver != reader
            deadline = time.monotonic() + 30
            while http.get("/api/v1/jobs").json()["jobs"] == [] and time.monotonic() < deadline:
                time.sleep(0.2)
            # The read process did the work: stopped, reads wait for it, and ingest and
            # health, the receiver's own, do not.
            os.kill(reader, signal.SIGSTOP)
            try:
                with pytest.raises(httpx.ReadTimeout):
                    http.get("/api/v1/jobs", timeout=2)
                assert http.post("/api/v1/lineage", json=daily_run(2)).status_code == 202
                assert http.get("/healthz").status_code == 200
            finally:
                os.kill(reader, signal.SIGCONT)
            assert http.get("/api/v1/jobs").status_code == 200
    finally:
        server.stop()


def test_a_heavy_read_past_the_bound_waits_its_turn(client: TestClient) -> None:
    api = Api(client)
    api.ingest(daily_run(1))
    bounds: read_bounds.ReadBounds = client.app.state.read_bounds  # type: ignore[attr-defined]
    lineage = f"/api/v1/lineage?namespace={REPORT[0]}&name={REPORT[1]}"
    taken = [asyncio.run(bounds.take()) for _ in range(bounds.heavy)]
    assert all(taken)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.get, lineage)
        time.sleep(0.5)
        assert not waiting.done()  # no place yet: it waits, within --heavy-reads' queue
        bounds.give_back()  # a walk ends
        assert waiting.result(timeout=10).status_code == 200
    bounds.give_back()
