"""Deliveries and quarantine through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from graph_api import (
    CUSTOMERS,
    DAY,
    ORDERS,
    REPORT,
    Api,
    at,
    daily_run,
    dataset_event,
    ds,
    job_event,
    run_event,
    run_id,
    walk_pages,
)

# == deliveries and quarantine =====================================================================
# (docs/projection.md#validation, docs/queries.md#deliveries-and-quarantine)


def test_delivery_is_accepted_then_projected(api: Api) -> None:
    receipt = api.post(daily_run(1))
    pending = api.delivery(receipt["delivery_id"])
    assert pending["state"] == "accepted"
    assert pending["summary"] == {"received": 1, "projected": 0, "quarantined": 0, "pending": 1}
    assert [i["outcome"] for i in pending["items"]] == ["pending"]

    api.project()
    view = api.delivery(receipt["delivery_id"])
    assert view["state"] == "projected"
    assert view["summary"] == {"received": 1, "projected": 1, "quarantined": 0, "pending": 0}
    assert view["edges_created"] == 2  # orders → daily, daily → report
    assert view["items"] == [
        {
            "index": 0,
            "kind": "RunEvent",
            "outcome": "projected",
            "reason": None,
            "retriable": False,
            "warnings": [],
        }
    ]


def test_edges_created_counts_only_new_edges(api: Api) -> None:
    assert api.ingest(daily_run(1))["edges_created"] == 2
    # Another run over the same edges creates none; a new output creates one.
    assert api.ingest(daily_run(2, time=at(10)))["edges_created"] == 0
    third = run_event("COMPLETE", "daily", run_id(3), at(11), outputs=[ds(*CUSTOMERS)])
    assert api.ingest(third)["edges_created"] == 1


def test_partially_projected_delivery(api: Api) -> None:
    no_timezone = f"{DAY}T09:00:00"
    bad_run = daily_run(2)
    bad_run["run"]["runId"] = "run-42"
    receipt = api.post(
        run_event("START", "daily", run_id(1), no_timezone, inputs=[ds(*ORDERS)]),
        bad_run,
        7,  # not an object: rejected at the transport boundary
        job_event("model", at(9), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]),
    )
    assert (receipt["item_count"], receipt["invalid_item_count"]) == (4, 1)
    api.project()
    view = api.delivery(receipt["delivery_id"])
    assert view["state"] == "partially_projected"
    assert view["summary"] == {"received": 4, "projected": 2, "quarantined": 2, "pending": 0}
    assert view["invalid_item_count"] == 1
    items = view["items"]
    assert [(i["index"], i["kind"], i["outcome"]) for i in items] == [
        (0, "RunEvent", "projected"),
        (1, "RunEvent", "quarantined"),
        (2, None, "quarantined"),
        (3, "JobEvent", "projected"),
    ]
    # docs/projection.md#validation: a timestamp without timezone is read as UTC with a warning.
    (warning,) = items[0]["warnings"]
    assert no_timezone in warning and "no timezone" in warning and "UTC" in warning
    assert api.run(run_id(1))["started_at"] == at(9)
    # The reason names the rule and the place; neither is a projector error.
    assert "run.runId" in items[1]["reason"] and "not a UUID" in items[1]["reason"]
    assert "not an object" in items[2]["reason"]
    assert [i["retriable"] for i in items] == [False] * 4
    assert items[3]["reason"] is None and items[3]["warnings"] == []


def test_quarantined_delivery(api: Api) -> None:
    unparseable = daily_run(1, time="yesterday at noon")
    nameless = daily_run(2)
    del nameless["job"]["name"]
    view = api.ingest(unparseable, nameless)
    assert view["state"] == "quarantined"
    assert view["summary"] == {"received": 2, "projected": 0, "quarantined": 2, "pending": 0}
    assert view["edges_created"] == 0
    assert "eventTime" in view["items"][0]["reason"]
    assert "job.name is missing" in view["items"][1]["reason"]
    api.problem("GET", "/api/v1/runs/" + run_id(1), 404)


def test_deliveries_listing_filters_and_pages(api: Api) -> None:
    bad = daily_run(9)
    bad["run"]["runId"] = "nope"
    projected = api.ingest(daily_run(1), provider_key="airflow-prod")["delivery_id"]
    quarantined = api.ingest(bad, provider_key="spark-prod")["delivery_id"]
    partial = api.ingest(daily_run(2), bad, provider_key="airflow-prod")["delivery_id"]

    def ids(**params: Any) -> list[str]:
        return [d["delivery_id"] for d in api.get("/api/v1/deliveries", **params)["deliveries"]]

    assert ids() == [partial, quarantined, projected]  # newest first
    assert ids(provider_key="airflow-prod") == [partial, projected]
    assert ids(state="quarantined") == [quarantined]
    assert ids(state="projected") == [projected]
    assert ids(state="partially_projected", provider_key="airflow-prod") == [partial]
    assert ids(state="accepted") == []

    listed = api.get("/api/v1/deliveries")["deliveries"]
    assert [(d["provider_key"], d["state"]) for d in listed] == [
        ("airflow-prod", "partially_projected"),
        ("spark-prod", "quarantined"),
        ("airflow-prod", "projected"),
    ]
    assert listed[0]["summary"] == {"received": 2, "projected": 1, "quarantined": 1, "pending": 0}

    pages = walk_pages(api, "/api/v1/deliveries", "deliveries", limit=1)
    assert [[d["delivery_id"] for d in page] for page in pages] == [
        [partial],
        [quarantined],
        [projected],
    ]
    pending = api.post(daily_run(3), provider_key="airflow-prod")["delivery_id"]  # not projected
    assert ids(state="accepted") == [pending]
    assert ids(provider_key="airflow-prod") == [pending, partial, projected]
    api.project()
    assert ids(state="accepted") == []
    assert ids(state="projected") == [pending, projected]
    api.problem("GET", "/api/v1/deliveries", 400, state="done")
    api.problem("GET", "/api/v1/deliveries", 400, limit=0)
    api.problem("GET", "/api/v1/deliveries", 400, cursor="!!not-a-cursor!!")


def test_quarantine_listing_and_pages(api: Api) -> None:
    bad = daily_run(9)
    bad["run"]["runId"] = "nope"
    first = api.ingest(bad, daily_run(1), "not an event")
    second = api.ingest(dataset_event({"namespace": "pg"}, at(9)))  # dataset.name missing

    doc = api.get("/api/v1/quarantine")
    assert doc["next_cursor"] is None
    listed = [(i["delivery_id"], i["index"], i["kind"]) for i in doc["items"]]
    # Newest delivery first, items in index order.
    assert listed == [
        (second["delivery_id"], 0, "DatasetEvent"),
        (first["delivery_id"], 0, "RunEvent"),
        (first["delivery_id"], 2, None),
    ]
    by_key = {(i["delivery_id"], i["index"]): i for i in doc["items"]}
    assert "dataset.name is missing" in by_key[(second["delivery_id"], 0)]["reason"]
    assert by_key[(first["delivery_id"], 0)]["received_at"] == first["received_at"]

    pages = walk_pages(api, "/api/v1/quarantine", "items", limit=1)
    assert [[(i["delivery_id"], i["index"]) for i in page] for page in pages] == [
        [(d, idx)] for d, idx, _ in listed
    ]


def test_replay_keeps_a_rule_quarantine(api: Api) -> None:
    bad = daily_run(9)
    bad["run"]["runId"] = "nope"
    view = api.ingest(daily_run(1), bad)
    reason = view["items"][1]["reason"]
    r = api.client.post(f"/api/v1/quarantine/{view['delivery_id']}/1/replay")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "delivery_id": view["delivery_id"],
        "index": 1,
        "outcome": "quarantined",
        "reason": reason,
    }
    again = api.delivery(view["delivery_id"])
    assert again["state"] == "partially_projected"
    assert again["items"][1]["reason"] == reason
    assert again["summary"] == view["summary"]


@pytest.mark.parametrize(
    ("index", "status", "slug"),
    [
        (0, 409, "not-quarantined"),  # projected
        (1, 409, "not-replayable"),  # rejected at the transport boundary
        (5, 404, "not-found"),  # no such item
    ],
)
def test_replay_refusals(api: Api, index: int, status: int, slug: str) -> None:
    view = api.ingest(daily_run(1), ["not", "an", "event"])
    assert [i["outcome"] for i in view["items"]] == ["projected", "quarantined"]
    doc = api.problem("POST", f"/api/v1/quarantine/{view['delivery_id']}/{index}/replay", status)
    assert doc["type"].endswith("/" + slug)


def test_replay_of_an_unknown_delivery_is_404(api: Api) -> None:
    api.problem("POST", "/api/v1/quarantine/01JNOSUCHDELIVERY000000000/0/replay", 404)
