"""The read API's additions for the web UI: GET /api/v1/overview (the home page's ingest
counters, backlog and recent runs) and GET /api/v1/runs?type=dataset (the runs that wrote
a dataset, under any of its aliases)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from graph_api import Api, at, ds, run_event, run_id, symlinks

LAKE = ("s3://lake", "raw/orders")
TABLE = ("hive://metastore", "sales.orders")


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


def test_overview_counts_deliveries_items_and_the_backlog(api: Api) -> None:
    empty = api.get("/api/v1/overview")
    assert empty == {
        "deliveries": {"accepted": 0, "projected": 0, "partially_projected": 0, "quarantined": 0},
        "items": {"received": 0, "projected": 0, "quarantined": 0, "pending": 0},
        "backlog": {"deliveries": 0, "items": 0},
        "recent_runs": [],
    }
    good = run_event("COMPLETE", "etl", run_id(1), at(9), outputs=[ds(*LAKE)])
    bad = run_event("COMPLETE", "etl", "not-a-uuid", at(9))
    api.post(good, bad)  # one projected, one quarantined by validation
    api.post(7)  # quarantined whole at the receiver: a batch item that is not an object
    waiting = api.get("/api/v1/overview")
    assert waiting["backlog"] == {"deliveries": 1, "items": 2}
    assert waiting["deliveries"]["accepted"] == 1 and waiting["deliveries"]["quarantined"] == 1
    assert waiting["items"]["pending"] == 2  # the receiver's rejection is not pending

    api.project()
    done = api.get("/api/v1/overview")
    assert done["backlog"] == {"deliveries": 0, "items": 0}
    assert done["deliveries"] == {
        "accepted": 0,
        "projected": 0,
        "partially_projected": 1,
        "quarantined": 1,
    }
    assert done["items"] == {"received": 3, "projected": 1, "quarantined": 2, "pending": 0}


def test_overview_lists_the_runs_with_the_latest_events_once_each(api: Api) -> None:
    events = []
    for n in range(1, 6):
        events += [
            run_event("START", f"job{n}", run_id(n), at(8 + n)),
            run_event("COMPLETE", f"job{n}", run_id(n), at(8 + n, 30)),
        ]
    api.ingest(*events)
    recent = api.get("/api/v1/overview", runs=3)["recent_runs"]
    assert [r["runId"] for r in recent] == [run_id(5), run_id(4), run_id(3)]
    assert recent[0]["state"] == "COMPLETE" and recent[0]["duration_s"] == 1800
    assert api.get("/api/v1/overview", runs=0)["recent_runs"] == []


def test_runs_of_a_dataset_are_its_writers_under_every_alias_newest_first(api: Api) -> None:
    lake = ds(*LAKE, symlinks=symlinks((*TABLE, "TABLE")))
    api.ingest(
        run_event("COMPLETE", "writer", run_id(1), at(9), outputs=[lake]),
        run_event("FAIL", "writer", run_id(2), at(10), outputs=[ds(*TABLE)]),
        run_event("COMPLETE", "reader", run_id(3), at(11), inputs=[ds(*TABLE)]),
    )
    for namespace, name in (LAKE, TABLE):
        page = api.get("/api/v1/runs", type="dataset", namespace=namespace, name=name)
        assert [r["runId"] for r in page["runs"]] == [run_id(2), run_id(1)]
        assert page["next_cursor"] is None
    first = api.get("/api/v1/runs", type="dataset", namespace=LAKE[0], name=LAKE[1], limit=1)
    assert [r["runId"] for r in first["runs"]] == [run_id(2)]
    second = api.get(
        "/api/v1/runs",
        type="dataset",
        namespace=LAKE[0],
        name=LAKE[1],
        limit=1,
        cursor=first["next_cursor"],
    )
    assert [r["runId"] for r in second["runs"]] == [run_id(1)] and second["next_cursor"] is None
    api.problem("GET", "/api/v1/runs", 404, type="dataset", namespace="s3://none", name="x")
    api.problem("GET", "/api/v1/runs", 400, type="table", namespace=LAKE[0], name=LAKE[1])
    # A run that wrote the dataset under both its names, in two events, is listed once.
    api.ingest(
        run_event("START", "writer", run_id(4), at(12), outputs=[ds(*TABLE)]),
        run_event("COMPLETE", "writer", run_id(4), at(12, 5), outputs=[lake]),
    )
    page = api.get("/api/v1/runs", type="dataset", namespace=TABLE[0], name=TABLE[1])
    assert [r["runId"] for r in page["runs"]] == [run_id(4), run_id(2), run_id(1)]
