"""Poison deliveries: three failures quarantine the delivery whole (how: tests/graph_api.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from embrasure.projector.pipeline import project_raw as real_project_raw
from embrasure.projector.worker import MAX_ATTEMPTS

from conftest import make_client
from graph_api import (
    CUSTOMERS,
    ORDERS,
    REPORT,
    Api,
    at,
    daily_run,
    ds,
    job_id,
    node_ids,
    run_event,
    run_id,
)

# == poison deliveries =============================================================================
# (docs/projection.md#poison-deliveries: three failures quarantine the delivery whole)

POISON = "poison-pill"


@pytest.fixture
def faulty_projector(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fault injection: nothing real makes project_raw raise (it catches its own
    errors), so the copy apply.prepare calls is wrapped to raise for events of the job POISON.
    Returns the job names of every call, to count attempts."""
    calls: list[str] = []

    def project_raw(raw: bytes) -> Any:
        event = orjson.loads(raw)
        name = event.get("job", {}).get("name") if isinstance(event, dict) else None
        calls.append(str(name))
        if name == POISON:
            raise RuntimeError("injected fault")
        return real_project_raw(raw)

    monkeypatch.setattr("embrasure.projector.apply.project_raw", project_raw)
    return calls


def test_poison_delivery_is_quarantined_whole(
    api: Api, faulty_projector: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = api.post(daily_run(1))
    poison = api.post(
        run_event("COMPLETE", "innocent", run_id(2), at(9), outputs=[ds(*CUSTOMERS)]),
        run_event("COMPLETE", POISON, run_id(3), at(9), inputs=[ds(*ORDERS)]),
    )
    after = api.post(run_event("COMPLETE", "late", run_id(4), at(10), inputs=[ds(*REPORT)]))
    assert api.project() == 3

    # One attempt within the first batch, then MAX_ATTEMPTS (3) alone.
    assert faulty_projector.count(POISON) == 1 + MAX_ATTEMPTS
    view = api.delivery(poison["delivery_id"])
    assert view["state"] == "quarantined"
    assert view["summary"] == {"received": 2, "projected": 0, "quarantined": 2, "pending": 0}
    for item in view["items"]:
        assert item["outcome"] == "quarantined"
        assert item["reason"] == "projector error: RuntimeError: injected fault"
        assert item["retriable"] is True
    # The log moved on: the deliveries before and after it are projected.
    assert api.delivery(before["delivery_id"])["state"] == "projected"
    assert api.delivery(after["delivery_id"])["state"] == "projected"
    assert job_id("spark", "late") in node_ids(api.lineage(*REPORT, direction="downstream"))
    # Nothing of the poisoned delivery reached the graph, not even its innocent item.
    api.problem("GET", "/api/v1/runs/" + run_id(2), 404)
    quarantined = api.get("/api/v1/quarantine")["items"]
    assert [(i["delivery_id"], i["index"]) for i in quarantined] == [
        (poison["delivery_id"], 0),
        (poison["delivery_id"], 1),
    ]

    # With the fault gone, a replay projects the item (it was retriable).
    monkeypatch.undo()
    r = api.client.post(f"/api/v1/quarantine/{poison['delivery_id']}/0/replay")
    assert r.status_code == 200, r.text
    assert r.json()["outcome"] == "projected"
    assert api.delivery(poison["delivery_id"])["state"] == "partially_projected"
    assert api.run(run_id(2))["state"] == "COMPLETE"
    api.client.post(f"/api/v1/quarantine/{poison['delivery_id']}/1/replay")
    assert api.delivery(poison["delivery_id"])["state"] == "projected"
    assert api.get("/api/v1/quarantine")["items"] == []


def test_a_store_that_cannot_be_read_answers_503(tmp_path: Path) -> None:
    # The database file is gone and a directory stands in its place: a new read
    # connection cannot open it (SQLITE_CANTOPEN). That is the store's trouble, not the
    # request's: 503 with Retry-After, not a 500.
    db = tmp_path / "gone.db"
    with make_client(db) as client:
        for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            leftover.unlink(missing_ok=True)
        db.mkdir()
        r = client.get("/api/v1/lineage", params={"namespace": "a", "name": "b"})
        assert r.status_code == 503, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert int(r.headers["retry-after"]) > 0
        assert "could not be read" in r.json()["detail"]
    client.app.state.store.close()  # type: ignore[attr-defined]
