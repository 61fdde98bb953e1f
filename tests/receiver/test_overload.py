"""Overload (docs/receiver.md#overload-429-nothing-stored): past the backlog, free-disk or
body-memory bound, ingest answers
429 with Retry-After and stores nothing; /readyz reports it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.errors import Problem
from embrasure.projector.worker import Projector
from embrasure.receiver import backpressure
from embrasure.receiver.backpressure import BodyBudget
from embrasure.settings import Settings
from embrasure.store import open_store

from conftest import ServerProcess


def event(n: int) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-30T09:00:00Z",
        "producer": "https://example.com/test",
        "run": {"runId": f"0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f{n:04d}"},
        "job": {"namespace": "demo", "name": f"job{n}"},
    }


@pytest.fixture(autouse=True)
def measure_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backpressure, "LOAD_CACHE_SECONDS", 0.0)


def app_with(db_path: Path, **settings: Any) -> TestClient:
    store = open_store(f"sqlite:///{db_path}")
    return TestClient(build_app(Settings(db=f"sqlite:///{db_path}", **settings), store))


@pytest.fixture
def bounded(db_path: Path) -> Iterator[TestClient]:
    with app_with(db_path, max_backlog_items=3) as c:
        yield c
    c.app.state.store.close()  # type: ignore[attr-defined]


def post(client: TestClient, *events: Any) -> Any:
    return client.post(
        "/api/v1/lineage/batch",
        content=orjson.dumps(list(events)),
        headers={"Content-Type": "application/json"},
    )


def test_past_the_backlog_bound_ingest_waits_for_the_projector(bounded: TestClient) -> None:
    assert post(bounded, event(1), event(2)).status_code == 202
    assert post(bounded, event(3), event(4)).status_code == 202  # 2 pending: under 3
    refused = post(bounded, event(5))  # 4 pending: over
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "application/problem+json"
    assert "backlog is 4 items" in refused.json()["detail"]
    assert len(bounded.get("/api/v1/deliveries").json()["deliveries"]) == 2  # nothing stored
    # docs/operations.md#health: ready means the backlog is under bound
    ready = bounded.get("/readyz")
    assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
    assert ready.json()["ingest"]["backlog_items"] == 4
    assert "backlog" in ready.json()["detail"]

    Projector(bounded.app.state.store).run_until_caught_up()  # type: ignore[attr-defined]
    assert post(bounded, event(5)).status_code == 202
    assert bounded.get("/readyz").json()["ingest"]["refusing"] is None
    assert bounded.get("/readyz").status_code == 200


def test_under_the_free_disk_bound_ingest_is_refused(db_path: Path) -> None:
    with app_with(db_path, min_free_disk_mb=2**40) as c:  # a yottabyte: never free
        refused = post(c, event(1))
        assert refused.status_code == 429 and "free beside the delivery log" in refused.text
        assert c.get("/api/v1/deliveries").json()["deliveries"] == []
        assert c.get("/readyz").json()["ingest"]["free_disk_bytes"] > 0
        assert c.get("/readyz").status_code == 503
    c.app.state.store.close()  # type: ignore[attr-defined]


def test_bodies_past_the_memory_bound_wait_then_get_429(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backpressure, "BODY_WAIT_SECONDS", 0.2)

    async def scenario() -> list[str]:
        budget = BodyBudget(1000, retry_after=1)
        seen: list[str] = []
        async with budget.hold(600):
            with pytest.raises(Problem) as refused:
                async with budget.hold(600):
                    pass
            assert refused.value.status == 429 and refused.value.retry_after == 1
            seen.append("refused while full")

            async def later() -> None:
                async with budget.hold(600):
                    seen.append("admitted once room was made")

            waiting = asyncio.create_task(later())
            await asyncio.sleep(0.05)
            seen.append("released")
        await waiting
        async with budget.hold(5000):  # one body alone always fits
            seen.append("a lone body over the bound")
        assert budget.held == 0
        return seen

    assert asyncio.run(scenario()) == [
        "refused while full",
        "released",
        "admitted once room was made",
        "a lone body over the bound",
    ]


def big_batch(size: int) -> bytes:
    """A valid batch of just under ``size`` bytes (a custom run facet pads each event)."""
    events = []
    per_event = size // 1000 - 400
    for n in range(1000):
        e = event(n)
        e["run"]["facets"] = {
            "padding": {
                "_producer": "https://example.com/test",
                "_schemaURL": "https://example.com/padding.json",
                "text": "x" * per_event,
            }
        }
        events.append(e)
    body = orjson.dumps(events)
    assert len(body) < size
    return body


@pytest.mark.slow
def test_a_hundred_8_mib_bodies_at_once_stay_in_bounded_memory(db_path: Path) -> None:
    """Issue 7: 100 clients each POST an 8 MiB body at once; the server's peak RSS stays
    under 600 MiB and a small client is still answered meanwhile."""
    server = ServerProcess(db_path, "--no-projector").start()
    body = big_batch(8 * 1024 * 1024)
    headers = {"Content-Type": "application/json"}

    async def load() -> tuple[list[int], list[int]]:
        async with httpx.AsyncClient(
            base_url=server.url, timeout=120, limits=httpx.Limits(max_connections=200)
        ) as http:
            big = [
                asyncio.create_task(
                    http.post("/api/v1/lineage/batch", content=body, headers=headers)
                )
                for _ in range(100)
            ]
            small: list[int] = []
            while not all(t.done() for t in big):
                r = await http.post(
                    "/api/v1/lineage", content=orjson.dumps(event(len(small))), headers=headers
                )
                small.append(r.status_code)
                await asyncio.sleep(0.05)
            return [(await t).status_code for t in big], small

    try:
        big, small = asyncio.run(load())
        assert server.proc is not None
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
    finally:
        server.stop()
    peak_kib = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1])
    assert set(big) <= {202, 429} and 202 in big, big
    assert small and set(small) == {202}, small
    assert peak_kib < 600 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"
