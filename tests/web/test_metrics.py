"""GET /metrics (docs/operations.md#metrics): the figures of the log and the graph, and
request latency."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from graph_api import Api, at, ds, run_event, run_id


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = api.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def test_deliveries_items_backlog_and_lag(api: Api, backend: str) -> None:
    good = run_event("COMPLETE", "etl", run_id(1), at(9), outputs=[ds("s3://lake", "orders")])
    bad = run_event("COMPLETE", "etl", "not-a-uuid", at(9))
    api.post(good, bad)
    api.post(7)  # quarantined whole on receipt
    waiting = scrape(api)
    assert waiting["embrasure_deliveries", (("state", "accepted"),)] == 1
    assert waiting["embrasure_deliveries", (("state", "quarantined"),)] == 1
    assert waiting["embrasure_items", (("outcome", "pending"),)] == 2
    assert waiting["embrasure_projection_backlog_items", ()] == 2
    assert waiting["embrasure_projection_backlog_bound_items", ()] == 1_000_000
    assert waiting["embrasure_projection_lag_seconds", ()] > 0
    if backend == "sqlite":  # PostgreSQL's disk and memory are the database server's
        assert waiting["embrasure_free_disk_bytes", ()] > 0
        assert waiting["embrasure_sqlite_memory_bytes", ()] > 0
    else:
        assert ("embrasure_free_disk_bytes", ()) not in waiting
        assert ("embrasure_sqlite_memory_bytes", ()) not in waiting

    api.project()
    done = scrape(api)
    assert done["embrasure_deliveries", (("state", "partially_projected"),)] == 1
    assert done["embrasure_deliveries", (("state", "accepted"),)] == 0
    assert done["embrasure_items", (("outcome", "projected"),)] == 1
    assert done["embrasure_items", (("outcome", "quarantined"),)] == 2
    assert done["embrasure_projection_lag_seconds", ()] == 0


def test_request_latency_by_route_template_and_status(api: Api) -> None:
    api.post(run_event("START", "etl", run_id(1), at(9)))
    api.client.get("/api/v1/deliveries/01NOSUCHDELIVERY")
    api.client.get("/no/such/page/at/all")
    api.client.get("/ui/static/style.css")
    samples = scrape(api)

    def count(method: str, route: str, status: str) -> Any:
        labels = (("method", method), ("route", route), ("status", status))
        return samples.get(("embrasure_http_request_duration_seconds_count", labels))

    assert count("POST", "/api/v1/lineage/batch", "202") == 1
    assert count("GET", "/api/v1/deliveries/{delivery_id}", "404") == 1
    assert count("GET", "unmatched", "404") == 1  # not one label per random URL
    assert count("GET", "/ui/static", "200") == 1  # a mount: its prefix
