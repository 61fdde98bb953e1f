"""Marquez's ``GET /api/v1/events/lineage`` from Embrasure's log
(embrasure/marquez/events.py, docs/marquez.md#events), on both backends."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from graph_api import Api, at, daily_run, job_event, run_event, run_id


def events(marquez: TestClient, status: int = 200, **params: Any) -> Any:
    r = marquez.get("/api/v1/events/lineage", params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_events_newest_first_with_paging_and_a_time_range(api: Api, marquez: TestClient) -> None:
    sent = [daily_run(n, time=at(8 + n)) for n in range(1, 5)]
    api.ingest(*sent)
    api.ingest(run_event("START", "timeless", run_id(9), None))  # no eventTime: in no range
    # A JobEvent is counted, not listed, as Marquez does (marquez-web reads run.runId).
    api.ingest(job_event("declared", at(8, 30)))
    doc = events(marquez)
    assert doc["totalCount"] == 5
    assert doc["events"] == list(reversed(sent))  # as sent, byte for byte as JSON
    assert events(marquez, sortDirection="asc")["events"] == sent
    page = events(marquez, limit=2, offset=1)
    assert page["events"] == [sent[2], sent[1]] and page["totalCount"] == 5
    ranged = events(marquez, after=at(10), before=at(12))
    assert ranged["events"] == [sent[2], sent[1]] and ranged["totalCount"] == 2
    assert events(marquez, 400, sortDirection="sideways")["code"] == 400
    assert events(marquez, 400, after="yesterday")["code"] == 400
    assert events(marquez, 400, limit=-1)["code"] == 400
