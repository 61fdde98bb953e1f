"""Marquez's stats (``/api/v1/stats/…``) from the graph (embrasure/marquez/stats.py,
docs/marquez.md#stats), on both backends: events placed hours and days before now."""

from __future__ import annotations

import datetime
from typing import Any

from starlette.testclient import TestClient

from embrasure.marquez.stats import intervals

from graph_api import (
    ORDERS,
    REPORT,
    Api,
    dataset_event,
    ds,
    facet,
    job_event,
    run_event,
    run_id,
)


def ago(**delta: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) - datetime.timedelta(**delta)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stats(marquez: TestClient, kind: str, status: int = 200, **params: Any) -> Any:
    r = marquez.get(f"/api/v1/stats/{kind}", params=params)
    assert r.status_code == status, r.text
    return r.json() if status == 200 else r.text


def load(api: Api) -> None:
    api.ingest(
        run_event("COMPLETE", "a", run_id(1), ago(hours=1), outputs=[ds(*ORDERS)]),
        run_event("FAIL", "b", run_id(2), ago(hours=2), inputs=[ds(*ORDERS)]),
        run_event("START", "c", run_id(3), ago(days=3), outputs=[ds(*REPORT)]),
    )


def test_lineage_events_by_hour_and_day(api: Api, marquez: TestClient) -> None:
    load(api)
    day = stats(marquez, "lineage-events", period="DAY")
    assert len(day) == 24
    assert [d["startInterval"] for d in day[1:]] == [d["endInterval"] for d in day[:-1]]
    totals = {k: sum(d[k] for d in day) for k in ("complete", "fail", "start", "abort")}
    assert totals == {"complete": 1, "fail": 1, "start": 0, "abort": 0}
    week = stats(marquez, "lineage-events", period="WEEK", timezone="Europe/Paris")
    assert len(week) == 7
    assert sum(d["start"] for d in week) == 1 and sum(d["complete"] for d in week) == 1
    assert stats(marquez, "lineage-events", 400, period="WEEK") == (
        "Timezone must be specified for period 'WEEK'"
    )
    assert stats(marquez, "lineage-events", 400, period="YEAR") == "Invalid period"


def test_cumulative_counts(api: Api, marquez: TestClient) -> None:
    load(api)
    jobs = stats(marquez, "jobs", period="DAY")
    assert len(jobs) == 24 and jobs[-1]["count"] == 3
    assert jobs[0]["count"] == 1  # c was first seen three days ago
    datasets = stats(marquez, "datasets", period="WEEK", timezone="UTC")
    assert datasets[-1]["count"] == 2
    assert stats(marquez, "sources", period="DAY")[-1]["count"] == 1  # default: no dataSource
    assert marquez.get("/api/v1/stats/nothing", params={"period": "DAY"}).status_code == 404


def test_the_tiles_count_what_the_lists_hold(api: Api, marquez: TestClient) -> None:
    """marquez-web's home tiles are the last interval's counts: every job (one without
    datasets, one only a JobEvent declared), every identity sent as a dataset (one only
    a DatasetEvent sent), every source the sources list holds."""
    load(api)
    shop = facet("DatasourceDatasetFacet", "1-0-0", name="shop", uri="postgres://db/shop")
    api.ingest(
        run_event("COMPLETE", "dag", run_id(4), ago(hours=5), namespace="airflow"),
        job_event("declared", ago(hours=6), inputs=[ds(*REPORT)]),
        job_event("bare", ago(hours=7)),
        dataset_event(ds("postgres://db", "shop.items", dataSource=shop), ago(hours=4)),
    )
    jobs = stats(marquez, "jobs", period="DAY")
    assert jobs[-1]["count"] == 6 == marquez.get("/api/v1/jobs").json()["totalCount"]
    assert jobs[0]["count"] == 1  # c, three days ago; the others within the day
    datasets = stats(marquez, "datasets", period="DAY")
    assert datasets[-1]["count"] == 3 and datasets[0]["count"] == 1  # REPORT, by c
    sources = stats(marquez, "sources", period="DAY")
    assert sources[-1]["count"] == 2 == len(marquez.get("/api/v1/sources").json()["sources"])


def test_week_days_start_at_local_midnight() -> None:
    now = datetime.datetime(2026, 11, 30, 23, 30, tzinfo=datetime.UTC)
    zone = datetime.timezone(datetime.timedelta(hours=2))
    spans = intervals("WEEK", zone, now)
    # 23:30 UTC is 01:30 on Dec 1 at +02:00: today is Dec 1 there.
    assert spans[-1][0] == datetime.datetime(2026, 12, 1, tzinfo=zone)
    assert spans[0][0] == datetime.datetime(2026, 11, 25, tzinfo=zone)
