"""docs/queries.md#search-namespaces-events: ``search?q=`` (ranked exact, prefix, substring
over dataset, job and field names and aliases), ``namespaces`` and raw ``events`` by time
window."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from graph_api import (
    Api,
    at,
    dataset_id,
    ds,
    field_id,
    job_event,
    job_id,
    run_event,
    run_id,
    schema,
    symlinks,
)

PATH = ("s3://lake", "raw/orders")
TABLE = ("hive://metastore", "sales.orders")


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


def platform(api: Api) -> list[dict[str, Any]]:
    events = [
        # A Spark job writes a path that is also the table sales.orders.
        run_event(
            "COMPLETE",
            "load_orders",
            run_id(1),
            at(9),
            outputs=[
                ds(
                    *PATH,
                    schema=schema("order_id", "amount"),
                    symlinks=symlinks((*TABLE, "TABLE")),
                )
            ],
        ),
        run_event(
            "COMPLETE",
            "orders",  # exactly "orders": the exact match
            run_id(2),
            at(10),
            inputs=[ds(*TABLE)],
            outputs=[ds("warehouse", "orders_daily", schema=schema("day", "orders"))],
        ),
        job_event(
            "orders_dashboard", at(11), inputs=[ds("warehouse", "orders_daily")], namespace="bi"
        ),
    ]
    api.ingest(*events)
    return events


def search(api: Api, q: str, **params: Any) -> dict[str, Any]:
    doc: dict[str, Any] = api.get("/api/v1/search", q=q, **params)
    return doc


def test_search_ranks_exact_then_prefix_then_substring(api: Api) -> None:
    platform(api)
    results = search(api, "ORDERS")["results"]
    ranked = [(r["match"], r["node"]["id"]) for r in results]
    # Exact first (a job and a field called "orders"), then prefixes, then substrings;
    # within a rank shorter names first, then datasets, fields, jobs.
    assert ranked == [
        ("exact", field_id(("warehouse", "orders_daily"), "orders")),
        ("exact", job_id("spark", "orders")),
        ("prefix", dataset_id("warehouse", "orders_daily")),
        ("prefix", job_id("bi", "orders_dashboard", "service")),
        ("substring", dataset_id(*TABLE)),  # by its alias raw/orders, shorter
        ("substring", job_id("spark", "load_orders")),
    ]


def test_an_alias_finds_the_canonical_node_once(api: Api) -> None:
    platform(api)
    # The path and the table are one node, canonical = the smaller identity (hive…).
    (result,) = search(api, "sales.ord")["results"]
    assert result == {
        "node": {
            "id": dataset_id(*TABLE),
            "type": "dataset",
            "namespace": TABLE[0],
            "name": TABLE[1],
        },
        "match": "prefix",
    }
    (by_alias,) = search(api, "raw/orders")["results"]
    assert by_alias["node"]["id"] == dataset_id(*TABLE)
    assert by_alias["alias"] == {"namespace": PATH[0], "name": PATH[1]}
    assert by_alias["match"] == "exact"
    # A field named under the alias lands on the canonical node too.
    (amount,) = search(api, "amount")["results"]
    assert amount["node"]["id"] == field_id(TABLE, "amount")


def test_search_pages_with_a_cursor_and_needs_q(api: Api) -> None:
    platform(api)
    everything = search(api, "o", limit=100)["results"]
    seen: list[Any] = []
    cursor = None
    while True:
        page = search(api, "o", limit=2, **({"cursor": cursor} if cursor else {}))
        seen += page["results"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == everything and len(everything) > 4
    assert search(api, "no-such-thing") == {"results": [], "next_cursor": None}
    api.problem("GET", "/api/v1/search", 400)
    api.problem("GET", "/api/v1/search", 400, q="o", cursor="not-a-cursor")


def test_namespaces_count_datasets_and_jobs_and_page(api: Api) -> None:
    platform(api)
    doc = api.get("/api/v1/namespaces")
    assert doc == {
        "namespaces": [
            {"name": "bi", "datasets": 0, "jobs": 1},
            {"name": "hive://metastore", "datasets": 1, "jobs": 0},
            {"name": "s3://lake", "datasets": 1, "jobs": 0},
            {"name": "spark", "datasets": 0, "jobs": 2},
            {"name": "warehouse", "datasets": 1, "jobs": 0},
        ],
        "next_cursor": None,
    }
    first = api.get("/api/v1/namespaces", limit=2)
    assert [n["name"] for n in first["namespaces"]] == ["bi", "hive://metastore"]
    rest = api.get("/api/v1/namespaces", limit=10, cursor=first["next_cursor"])
    assert [n["name"] for n in rest["namespaces"]] == ["s3://lake", "spark", "warehouse"]


def test_events_by_time_window_are_the_events_as_sent(api: Api) -> None:
    events = platform(api)
    doc = api.get("/api/v1/events", after=at(10), before=at(11))
    assert [e["event"] for e in doc["events"]] == [events[1]]
    assert doc["events"][0]["eventTime"] == at(10)
    assert len(doc["events"][0]["event_id"]) == 64
    # Time order, paged; `after` is inclusive, `before` exclusive.
    page = api.get("/api/v1/events", limit=2)
    assert [e["event"] for e in page["events"]] == events[:2]
    rest = api.get("/api/v1/events", cursor=page["next_cursor"])
    assert [e["event"] for e in rest["events"]] == events[2:]
    assert rest["next_cursor"] is None
    # Offsets are read as eventTime is (to UTC).
    shifted = api.get("/api/v1/events", after="2026-11-30T12:00:00+01:00")
    assert [e["event"] for e in shifted["events"]] == events[2:]
    problem = api.problem("GET", "/api/v1/events", 400, after="yesterday")
    assert "after" in problem["detail"]
