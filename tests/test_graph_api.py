"""The projected graph through the HTTP read API (DESIGN §3, §4, §5).

Every test posts realistic OpenLineage 2-0-2 events to the in-process app (the ``client``
fixture: no projector thread), projects them deterministically with
``Projector(store).run_until_caught_up()``, then reads the answer over HTTP. The rules
themselves are unit-tested under tests/projector/; here the contract is the served JSON.

Sections: deliveries and quarantine · runs · symlinks and renames · services, JobEvents
and DatasetEvents · edges and lineage walks · column lineage · export and reproject ·
poison deliveries.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.projector.pipeline import project_event as real_project_event
from embrasure.projector.worker import MAX_ATTEMPTS, Projector, reproject
from embrasure.store.graph_schema import GRAPH_VERSION

from conftest import make_client, run_sql

# -- event builders ------------------------------------------------------------------------

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/spark"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
DBT = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt"
FLINK = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/flink"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
DAY = "2026-11-30"

Event = dict[str, Any]


def at(hour: int, minute: int = 0, second: int = 0) -> str:
    """An eventTime on the test day, in UTC."""
    return f"{DAY}T{hour:02d}:{minute:02d}:{second:02d}Z"


def run_id(n: int) -> str:
    """A fixed, valid UUID (v7 layout) per test run number."""
    return str(uuid.UUID(f"01937a2b-0000-7000-8000-{n:012x}"))


def facet(
    schema_name: str, spec_version: str, producer: str = SPARK, /, **fields: Any
) -> dict[str, Any]:
    """A standard facet with its base fields (_producer, _schemaURL)."""
    url = (
        f"https://openlineage.io/spec/facets/{spec_version}/{schema_name}.json#/$defs/{schema_name}"
    )
    return {"_producer": producer, "_schemaURL": url, **fields}


def ds(namespace: str, name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": facets}


def symlinks(*identifiers: tuple[str, str, str]) -> dict[str, Any]:
    return facet(
        "SymlinksDatasetFacet",
        "1-0-1",
        identifiers=[{"namespace": ns, "name": n, "type": t} for ns, n, t in identifiers],
    )


def schema(*fields: str) -> dict[str, Any]:
    return facet(
        "SchemaDatasetFacet", "1-2-0", fields=[{"name": f, "type": "string"} for f in fields]
    )


def lifecycle(change: str, previous: tuple[str, str] | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if previous is not None:
        extra["previousIdentifier"] = {"namespace": previous[0], "name": previous[1]}
    return facet("LifecycleStateChangeDatasetFacet", "1-0-1", lifecycleStateChange=change, **extra)


def run_event(
    event_type: str | None,
    job: str,
    run: str,
    time: str | None,
    *,
    inputs: Sequence[dict[str, Any]] = (),
    outputs: Sequence[dict[str, Any]] = (),
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
    namespace: str = "spark",
    producer: str = SPARK,
) -> Event:
    event: Event = {
        "producer": producer,
        "schemaURL": f"{CORE}#/$defs/RunEvent",
        "run": {"runId": run, "facets": run_facets or {}},
        "job": {"namespace": namespace, "name": job, "facets": job_facets or {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }
    if event_type is not None:
        event["eventType"] = event_type
    if time is not None:
        event["eventTime"] = time
    return event


def job_event(
    job: str,
    time: str,
    *,
    inputs: Sequence[dict[str, Any]] = (),
    outputs: Sequence[dict[str, Any]] = (),
    job_facets: dict[str, Any] | None = None,
    namespace: str = "dbt",
    producer: str = DBT,
) -> Event:
    return {
        "eventTime": time,
        "producer": producer,
        "schemaURL": f"{CORE}#/$defs/JobEvent",
        "job": {"namespace": namespace, "name": job, "facets": job_facets or {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def dataset_event(dataset: dict[str, Any], time: str) -> Event:
    return {
        "eventTime": time,
        "producer": DBT,
        "schemaURL": f"{CORE}#/$defs/DatasetEvent",
        "dataset": dataset,
    }


def dataset_id(namespace: str, name: str) -> str:
    return f"dataset:{namespace}:{name}"


def job_id(namespace: str, name: str, kind: str = "job") -> str:
    return f"{kind}:{namespace}:{name}"


# -- the API under test ----------------------------------------------------------------------


class Api:
    """Post events, project them, read the graph: the in-process app over HTTP."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    @property
    def store(self) -> Any:
        return self.client.app.state.store  # type: ignore[attr-defined]

    def post(self, *events: Any, provider_key: str | None = None, single: bool = False) -> Any:
        """POST events (the batch route; the single route when ``single``); the receipt."""
        params = {"provider_key": provider_key} if provider_key else {}
        path = "/api/v1/lineage" if single else "/api/v1/lineage/batch"
        body = events[0] if single else list(events)
        r = self.client.post(
            path,
            content=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
            params=params,
        )
        assert r.status_code == 202, r.text
        return r.json()

    def project(self) -> int:
        return Projector(self.store).run_until_caught_up()

    def ingest(self, *events: Any, provider_key: str | None = None) -> dict[str, Any]:
        """Post the events as one delivery, project, and return the delivery view."""
        receipt = self.post(*events, provider_key=provider_key)
        self.project()
        return self.delivery(receipt["delivery_id"])

    def ingest_each(self, *events: Any) -> list[dict[str, Any]]:
        """Post each event as its own delivery (single route), then project them all."""
        receipts = [self.post(e, single=True) for e in events]
        self.project()
        return [self.delivery(r["delivery_id"]) for r in receipts]

    def get(self, path: str, **params: Any) -> Any:
        r = self.client.get(path, params=params)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        return r.json()

    def problem(self, method: str, path: str, status: int, **params: Any) -> dict[str, Any]:
        r = self.client.request(method, path, params=params)
        assert r.status_code == status, r.text
        assert r.headers["content-type"] == "application/problem+json"
        doc: dict[str, Any] = r.json()
        assert doc["status"] == status and doc["title"] and doc["detail"]
        return doc

    def delivery(self, delivery_id: str) -> dict[str, Any]:
        view: dict[str, Any] = self.get(f"/api/v1/deliveries/{delivery_id}")
        return view

    def dataset(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.get("/api/v1/datasets", namespace=namespace, name=name)
        assert found["next_cursor"] is None
        (view,) = found["datasets"]
        return dict(view)

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        (view,) = self.get("/api/v1/jobs", namespace=namespace, name=name)["jobs"]
        return dict(view)

    def run(self, run: str) -> dict[str, Any]:
        view: dict[str, Any] = self.get(f"/api/v1/runs/{run}")
        return view

    def lineage(self, namespace: str, name: str, **params: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.get("/api/v1/lineage", namespace=namespace, name=name, **params)
        return doc

    def columns(self, namespace: str, name: str, field: str, **params: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.get(
            "/api/v1/column-lineage", namespace=namespace, name=name, field=field, **params
        )
        return doc

    def export(self) -> bytes:
        r = self.client.get("/api/v1/export")
        assert r.status_code == 200, r.text
        return r.content


@pytest.fixture
def api(client: TestClient) -> Api:
    return Api(client)


def node_ids(doc: dict[str, Any]) -> set[str]:
    return {n["id"] for n in doc["nodes"]}


def edge_pairs(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["source"], e["target"]) for e in doc["edges"]}


def edge(doc: dict[str, Any], source: str, target: str, static: bool = False) -> dict[str, Any]:
    (found,) = [
        e
        for e in doc["edges"]
        if (e["source"], e["target"], e["static"]) == (source, target, static)
    ]
    return dict(found)


def walk_pages(api: Api, path: str, key: str, **params: Any) -> list[list[Any]]:
    """Every page of a cursor-paginated listing (DESIGN §5)."""
    pages: list[list[Any]] = []
    cursor: str | None = None
    while True:
        doc = api.get(path, **params, **({"cursor": cursor} if cursor else {}))
        pages.append(doc[key])
        cursor = doc["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 50, "pagination does not end"


ORDERS = ("postgres://db:5432", "public.orders")
CUSTOMERS = ("postgres://db:5432", "public.customers")
REPORT = ("postgres://db:5432", "analytics.report")


def daily_run(n: int, event_type: str = "COMPLETE", time: str = at(9)) -> Event:
    """A run of spark/daily reading orders and writing the report."""
    return run_event(
        event_type, "daily", run_id(n), time, inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]
    )


# == deliveries and quarantine (DESIGN §3 Validation, §5 deliveries) ============================


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
    # §3: a timestamp without timezone is read as UTC with a warning.
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


# == runs (DESIGN §3 Runs, §5 runs) =============================================================


@pytest.mark.parametrize("complete_first", [False, True], ids=["start-first", "complete-first"])
@pytest.mark.parametrize("split", [False, True], ids=["one-delivery", "two-deliveries"])
def test_start_and_complete_in_any_order(api: Api, complete_first: bool, split: bool) -> None:
    start = run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)])
    complete = run_event("COMPLETE", "daily", run_id(1), at(9, 30), outputs=[ds(*REPORT)])
    events = [complete, start] if complete_first else [start, complete]
    if split:
        api.ingest_each(*events)
    else:
        api.ingest(*events)
    run = api.run(run_id(1))
    assert run["runId"] == run_id(1)
    assert run["job"] == {"namespace": "spark", "name": "daily"}
    assert (run["state"], run["started_at"], run["ended_at"]) == ("COMPLETE", at(9), at(9, 30))
    assert run["duration_s"] == 1800.0
    # Inputs and outputs union across the run's events.
    assert run["inputs"] == [{"namespace": ORDERS[0], "name": ORDERS[1]}]
    assert run["outputs"] == [{"namespace": REPORT[0], "name": REPORT[1]}]


def test_duplicate_starts_change_nothing(api: Api) -> None:
    start = run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)])
    complete = run_event(
        "COMPLETE", "daily", run_id(1), at(9, 30), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]
    )
    api.ingest(start, complete)
    before = api.export()
    # The same START again, alone and twice in one batch (producers retry).
    again = api.ingest(start, start)
    assert again["state"] == "projected" and again["edges_created"] == 0
    api.ingest_each(start)
    assert api.export() == before
    run = api.run(run_id(1))
    assert (run["state"], run["started_at"], run["ended_at"]) == ("COMPLETE", at(9), at(9, 30))
    doc = api.lineage(*REPORT, direction="upstream")
    assert edge(doc, dataset_id(*ORDERS), job_id("spark", "daily"))["run_count"] == 1


def test_fail_shows_the_error_message(api: Api) -> None:
    error = facet(
        "ErrorMessageRunFacet",
        "1-0-1",
        AIRFLOW,
        message="division by zero",
        programmingLanguage="python",
        stackTrace='Traceback (most recent call last):\n  File "etl.py", line 3',
    )
    api.ingest(
        run_event("START", "etl.load", run_id(1), at(9), namespace="airflow", producer=AIRFLOW),
        run_event(
            "FAIL",
            "etl.load",
            run_id(1),
            at(9, 5),
            run_facets={"errorMessage": error},
            namespace="airflow",
            producer=AIRFLOW,
        ),
    )
    run = api.run(run_id(1))
    assert (run["state"], run["started_at"], run["ended_at"]) == ("FAIL", at(9), at(9, 5))
    assert run["error_message"] == "division by zero"
    assert run["facets"]["errorMessage"] == error


def test_running_streaming_job_is_in_the_graph(api: Api) -> None:
    topic = ("kafka://broker:9092", "orders")
    sink = ("s3://lake", "orders/enriched")
    running = [
        run_event(
            state,
            "enrich-orders",
            run_id(1),
            time,
            inputs=[ds(*topic)],
            outputs=[ds(*sink)],
            namespace="flink",
            producer=FLINK,
        )
        for state, time in (("START", at(8)), ("RUNNING", at(9)), ("RUNNING", at(10)))
    ]
    api.ingest(*running)
    run = api.run(run_id(1))
    assert (run["state"], run["started_at"], run["ended_at"]) == ("RUNNING", at(8), None)
    assert run["duration_s"] is None  # still running
    doc = api.lineage(*sink, direction="upstream")
    flink = job_id("flink", "enrich-orders")
    assert edge_pairs(doc) == {(dataset_id(*topic), flink), (flink, dataset_id(*sink))}
    assert edge(doc, flink, dataset_id(*sink))["last_state"] == "RUNNING"
    assert edge(doc, flink, dataset_id(*sink))["first_seen"] == at(8)
    assert edge(doc, flink, dataset_id(*sink))["last_seen"] == at(10)


def test_unknown_event_type_is_other(api: Api) -> None:
    view = api.ingest(run_event("RESUMED", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)]))
    assert view["state"] == "projected"
    (warning,) = view["items"][0]["warnings"]
    assert "RESUMED" in warning and "OTHER" in warning
    run = api.run(run_id(1))
    assert (run["state"], run["ended_at"]) == ("OTHER", None)


def test_run_facets_latest_event_time_wins(api: Api) -> None:
    def engine(version: str) -> dict[str, Any]:
        return facet(
            "ProcessingEngineRunFacet",
            "1-1-1",
            version=version,
            name="spark",
            openlineageAdapterVersion="1.24.2",
        )

    nominal = facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(0))
    start = run_event(
        "START",
        "daily",
        run_id(1),
        at(9),
        run_facets={"processing_engine": engine("3.5.0"), "nominalTime": nominal},
    )
    complete = run_event(
        "COMPLETE", "daily", run_id(1), at(10), run_facets={"processing_engine": engine("3.5.1")}
    )
    api.ingest_each(complete, start)  # the later event arrives first
    facets = api.run(run_id(1))["facets"]
    assert facets["processing_engine"]["version"] == "3.5.1"
    assert facets["nominalTime"] == nominal  # only the START named it


def test_parent_facet_links_dag_and_task_runs(api: Api) -> None:
    dag_run, extract, load = run_id(1), run_id(2), run_id(3)
    parent = facet(
        "ParentRunFacet",
        "1-1-0",
        AIRFLOW,
        run={"runId": dag_run},
        job={"namespace": "airflow", "name": "orders_etl"},
        root={
            "run": {"runId": dag_run},
            "job": {"namespace": "airflow", "name": "orders_etl"},
        },
    )

    def task(name: str, run: str, time: str) -> Event:
        return run_event(
            "COMPLETE",
            name,
            run,
            time,
            run_facets={"parent": parent},
            namespace="airflow",
            producer=AIRFLOW,
        )

    api.ingest(
        task("orders_etl.extract", extract, at(9, 10)),
        task("orders_etl.load", load, at(9, 20)),
        run_event("START", "orders_etl", dag_run, at(9), namespace="airflow", producer=AIRFLOW),
    )
    dag = api.run(dag_run)
    assert dag["parent"] is None
    assert dag["children"] == sorted([extract, load])
    child = api.run(load)
    assert child["parent"] == {
        "runId": dag_run,
        "job": {"namespace": "airflow", "name": "orders_etl"},
        "root": {"runId": dag_run, "job": {"namespace": "airflow", "name": "orders_etl"}},
    }
    assert child["children"] == []
    # The job is linked to its parent job too (DESIGN §3 "Runs": the task to its DAG).
    parent_job = {"namespace": "airflow", "name": "orders_etl"}
    assert api.job("airflow", "orders_etl.load")["parent_job"] == parent_job
    assert api.job("airflow", "orders_etl")["parent_job"] is None


def test_runs_of_a_job_newest_first(api: Api) -> None:
    api.ingest_each(*(daily_run(n, time=at(8 + n)) for n in (2, 1, 3)))
    doc = api.get("/api/v1/runs", namespace="spark", name="daily")
    assert [r["runId"] for r in doc["runs"]] == [run_id(3), run_id(2), run_id(1)]
    assert doc["next_cursor"] is None
    pages = walk_pages(api, "/api/v1/runs", "runs", namespace="spark", name="daily", limit=2)
    assert [[r["runId"] for r in page] for page in pages] == [[run_id(3), run_id(2)], [run_id(1)]]
    assert api.job("spark", "daily")["latest_run"]["runId"] == run_id(3)
    # A job known only from a JobEvent has no runs; an unknown job is a 404 (DESIGN §5).
    api.ingest(job_event("designed", at(9), outputs=[ds(*REPORT)]))
    assert api.get("/api/v1/runs", namespace="dbt", name="designed") == {
        "runs": [],
        "next_cursor": None,
    }
    api.problem("GET", "/api/v1/runs", 404, namespace="spark", name="nothing")
    api.problem("GET", "/api/v1/runs", 400, namespace="spark")


def test_dataset_versions_are_recorded_per_run(api: Api) -> None:
    version = facet("DatasetVersionDatasetFacet", "1-0-1", datasetVersion="42")
    api.ingest(
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[{**ds(*ORDERS), "version": "v7"}],
            outputs=[ds(*REPORT, version=version)],
        )
    )
    run = api.run(run_id(1))
    assert run["inputs"] == [{"namespace": ORDERS[0], "name": ORDERS[1], "version": "v7"}]
    assert run["outputs"] == [{"namespace": REPORT[0], "name": REPORT[1], "version": "42"}]


def test_unknown_run_is_404(api: Api) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", "/api/v1/runs/" + run_id(2), 404)
    assert doc["type"].endswith("/not-found")


# == symlinks and renames (DESIGN §3 Entities and identity) =====================================

WAREHOUSE_PATH = ("file", "/warehouse/db/orders")
HIVE_TABLE = ("hive://metastore", "db.orders")
HIVE_REPORT = ("hive://metastore", "db.report")
S3_LOCATION = ("s3://lake", "warehouse/db/orders")


def spark_writes_path() -> Event:
    """A Spark job writing a path, symlinked to its Hive table (TABLE) and a location."""
    path = ds(
        *WAREHOUSE_PATH,
        symlinks=symlinks((*HIVE_TABLE, "TABLE"), (*S3_LOCATION, "LOCATION")),
    )
    return run_event("COMPLETE", "write_orders", run_id(1), at(9), outputs=[path])


def spark_reads_table() -> Event:
    """A later Spark job reading the same dataset by its table name."""
    return run_event(
        "COMPLETE",
        "build_report",
        run_id(2),
        at(10),
        inputs=[ds(*HIVE_TABLE)],
        outputs=[ds(*HIVE_REPORT)],
    )


@pytest.mark.parametrize("lookup", [WAREHOUSE_PATH, HIVE_TABLE], ids=["by-path", "by-table"])
def test_table_symlink_is_one_node(api: Api, lookup: tuple[str, str]) -> None:
    api.ingest(spark_writes_path())
    api.ingest(spark_reads_table())
    # Canonical: the smallest (namespace, name) of the group: "file" < "hive://metastore".
    node = api.dataset(*lookup)
    assert (node["id"], node["namespace"], node["name"]) == (
        dataset_id(*WAREHOUSE_PATH),
        *WAREHOUSE_PATH,
    )
    assert node["aliases"] == [
        {"namespace": HIVE_TABLE[0], "name": HIVE_TABLE[1], "renamed": False}
    ]
    assert node["locations"] == [
        {"namespace": S3_LOCATION[0], "name": S3_LOCATION[1], "type": "LOCATION"}
    ]
    doc = api.lineage(*lookup)
    orders = dataset_id(*WAREHOUSE_PATH)
    writer, reader = job_id("spark", "write_orders"), job_id("spark", "build_report")
    assert doc["root"] == orders
    assert node_ids(doc) == {orders, writer, reader, dataset_id(*HIVE_REPORT)}
    assert edge_pairs(doc) == {
        (writer, orders),
        (orders, reader),
        (reader, dataset_id(*HIVE_REPORT)),
    }
    # One node in listings too: the alias is not listed apart.
    listed = [d["id"] for d in api.get("/api/v1/datasets")["datasets"]]
    assert listed == [orders, dataset_id(*HIVE_REPORT)]


def test_canonical_is_the_smallest_identity_of_the_group(api: Api) -> None:
    lake = ("s3://lake", "orders")  # carries the facet, but "hive…" < "s3…"
    api.ingest(
        run_event(
            "COMPLETE",
            "write",
            run_id(1),
            at(9),
            outputs=[ds(*lake, symlinks=symlinks((*HIVE_TABLE, "TABLE")))],
        )
    )
    node = api.dataset(*lake)
    assert node["id"] == dataset_id(*HIVE_TABLE)
    assert [(a["namespace"], a["name"]) for a in node["aliases"]] == [lake]


@pytest.mark.parametrize("alias_first", [False, True], ids=["alias-later", "alias-first"])
def test_alias_learned_later_repoints_earlier_edges(api: Api, alias_first: bool) -> None:
    events = [spark_reads_table(), spark_writes_path()]
    api.ingest_each(*(reversed(events) if alias_first else events))
    doc = api.lineage(*HIVE_REPORT, direction="upstream")
    orders = dataset_id(*WAREHOUSE_PATH)
    reader, writer = job_id("spark", "build_report"), job_id("spark", "write_orders")
    assert node_ids(doc) == {dataset_id(*HIVE_REPORT), reader, orders, writer}
    # The reader's edge, learned under the table name, now starts at the canonical node.
    assert edge(doc, orders, reader)["first_seen"] == at(10)
    assert edge(doc, writer, orders)["first_seen"] == at(9)


def test_facets_sent_under_an_alias_show_on_the_node(api: Api) -> None:
    documentation = facet("DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.")
    api.ingest(spark_writes_path())
    api.ingest(dataset_event(ds(*HIVE_TABLE, documentation=documentation), at(12)))
    node = api.dataset(*WAREHOUSE_PATH)
    assert node["facets"]["documentation"] == documentation
    assert set(node["facets"]) == {"documentation", "symlinks"}


def test_dataset_listing_pages_over_canonical_nodes(api: Api) -> None:
    api.ingest(spark_writes_path(), spark_reads_table(), daily_run(3))
    expected = sorted(dataset_id(*d) for d in (WAREHOUSE_PATH, HIVE_REPORT, ORDERS, REPORT))
    whole = api.get("/api/v1/datasets")
    assert [d["id"] for d in whole["datasets"]] == expected
    assert whole["next_cursor"] is None
    pages = walk_pages(api, "/api/v1/datasets", "datasets", limit=1)
    assert [d["id"] for page in pages for d in page] == expected
    assert all(len(page) == 1 for page in pages[:-1])


def test_location_symlink_merges_nothing(api: Api) -> None:
    api.ingest(spark_writes_path())
    api.ingest(
        run_event("COMPLETE", "copy", run_id(3), at(11), inputs=[ds(*S3_LOCATION)]),
    )
    location = api.dataset(*S3_LOCATION)
    assert location["id"] == dataset_id(*S3_LOCATION)
    assert location["aliases"] == [] and location["locations"] == []
    assert node_ids(api.lineage(*S3_LOCATION)) == {
        dataset_id(*S3_LOCATION),
        job_id("spark", "copy"),
    }
    assert job_id("spark", "copy") not in node_ids(api.lineage(*WAREHOUSE_PATH))


def test_rename_resolves_the_old_name_to_the_new(api: Api) -> None:
    old, new = ("postgres://db:5432", "public.orders_v1"), ("postgres://db:5432", "public.orders")
    api.ingest(run_event("COMPLETE", "load", run_id(1), at(9), outputs=[ds(*old)]))
    api.ingest(dataset_event(ds(*new, lifecycleStateChange=lifecycle("RENAME", old)), at(11)))
    for lookup in (old, new):
        node = api.dataset(*lookup)
        assert node["id"] == dataset_id(*new)
        assert node["aliases"] == [{"namespace": old[0], "name": old[1], "renamed": True}]
        assert node["dropped"] is False
    doc = api.lineage(*old, direction="upstream")
    assert doc["root"] == dataset_id(*new)
    assert edge_pairs(doc) == {(job_id("spark", "load"), dataset_id(*new))}


def test_drop_flags_the_dataset(api: Api) -> None:
    api.ingest(daily_run(1))
    api.ingest(dataset_event(ds(*REPORT, lifecycleStateChange=lifecycle("DROP")), at(12)))
    node = api.dataset(*REPORT)
    assert node["dropped"] is True
    assert api.dataset(*ORDERS)["dropped"] is False
    # It stays in the graph, with its edges.
    assert job_id("spark", "daily") in node_ids(api.lineage(*REPORT))


# == services, JobEvents, DatasetEvents (DESIGN §3) =============================================


def test_input_only_job_event_is_a_service(api: Api) -> None:
    api.ingest(daily_run(1))
    api.ingest(job_event("revenue-dashboard", at(12), inputs=[ds(*REPORT)], namespace="superset"))
    service = job_id("superset", "revenue-dashboard", "service")
    view = api.job("superset", "revenue-dashboard")
    assert (view["id"], view["type"]) == (service, "service")
    doc = api.lineage(*REPORT, direction="downstream")
    assert {
        "id": service,
        "type": "service",
        "namespace": "superset",
        "name": "revenue-dashboard",
    } in doc["nodes"]
    assert edge(doc, dataset_id(*REPORT), service, static=True)["run_count"] == 0
    served = api.get(
        "/api/v1/lineage", type="service", namespace="superset", name="revenue-dashboard"
    )
    assert served["root"] == service


def test_job_type_service_is_a_service(api: Api) -> None:
    job_type = facet(
        "JobTypeJobFacet",
        "2-0-4",
        FLINK,
        processingType="SERVICE",
        integration="FLINK",
        jobType="JOB",
    )
    api.ingest(
        run_event(
            "RUNNING",
            "order-api",
            run_id(1),
            at(9),
            outputs=[ds(*ORDERS)],
            job_facets={"jobType": job_type},
            namespace="flink",
            producer=FLINK,
        )
    )
    view = api.job("flink", "order-api")
    assert (view["id"], view["type"]) == (job_id("flink", "order-api", "service"), "service")
    assert view["facets"]["jobType"] == job_type


def test_a_job_with_run_events_is_a_job(api: Api) -> None:
    api.ingest(job_event("audit", at(8), inputs=[ds(*ORDERS)]))
    assert api.job("dbt", "audit")["type"] == "service"
    api.ingest(
        run_event("COMPLETE", "audit", run_id(1), at(9), inputs=[ds(*ORDERS)], namespace="dbt")
    )
    view = api.job("dbt", "audit")
    assert (view["id"], view["type"]) == (job_id("dbt", "audit"), "job")


def test_static_and_runtime_edges_coexist(api: Api) -> None:
    sql = facet(
        "SQLJobFacet", "1-1-0", DBT, query="select * from public.orders", dialect="postgres"
    )
    api.ingest(
        job_event(
            "model.report",
            at(8),
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
            job_facets={"sql": sql},
        ),
        run_event(
            "COMPLETE",
            "model.report",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
            namespace="dbt",
            producer=DBT,
        ),
    )
    doc = api.lineage(*REPORT, direction="upstream")
    model = job_id("dbt", "model.report")
    for source, target in ((dataset_id(*ORDERS), model), (model, dataset_id(*REPORT))):
        static = edge(doc, source, target, static=True)
        runtime = edge(doc, source, target, static=False)
        assert (static["first_seen"], static["run_count"], static["last_state"]) == (
            at(8),
            0,
            None,
        )
        assert (runtime["first_seen"], runtime["run_count"], runtime["last_state"]) == (
            at(9),
            1,
            "COMPLETE",
        )
    assert len(doc["edges"]) == 4
    assert api.job("dbt", "model.report")["facets"]["sql"] == sql


def test_dataset_event_facets_show_on_the_dataset(api: Api) -> None:
    documentation = facet(
        "DocumentationDatasetFacet", "1-1-0", DBT, description="One row per order."
    )
    ownership = facet(
        "OwnershipDatasetFacet", "1-0-1", DBT, owners=[{"name": "team:payments", "type": "TEAM"}]
    )
    view = api.ingest(
        dataset_event(
            ds(
                *ORDERS,
                schema=schema("id", "amount"),
                documentation=documentation,
                ownership=ownership,
            ),
            at(9),
        )
    )
    assert view["items"][0]["kind"] == "DatasetEvent" and view["state"] == "projected"
    node = api.dataset(*ORDERS)
    assert node["facets"] == {
        "schema": schema("id", "amount"),
        "documentation": documentation,
        "ownership": ownership,
    }
    assert node["fields"] == ["id", "amount"]


@pytest.mark.parametrize(
    ("deleted_at", "removed"),
    [(at(10), False), (at(11), True), (at(12), True)],
    ids=["older-keeps", "same-time-removes", "newer-removes"],
)
def test_deleted_facet_marker(api: Api, deleted_at: str, removed: bool) -> None:
    documentation = facet("DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.")
    api.ingest(dataset_event(ds(*ORDERS, documentation=documentation), at(11)))
    # A deletion marker need not carry the facet's required fields (§3 Validation).
    view = api.ingest(dataset_event(ds(*ORDERS, documentation={"_deleted": True}), deleted_at))
    assert view["items"][0]["warnings"] == []
    facets = api.dataset(*ORDERS)["facets"]
    assert ("documentation" not in facets) is removed
    if not removed:
        assert facets["documentation"] == documentation


def test_a_later_value_brings_a_deleted_facet_back(api: Api) -> None:
    def documentation(text: str) -> dict[str, Any]:
        return facet("DocumentationDatasetFacet", "1-1-0", DBT, description=text)

    api.ingest_each(
        dataset_event(ds(*ORDERS, documentation=documentation("v1")), at(11)),
        dataset_event(ds(*ORDERS, documentation=documentation("v2")), at(13)),
        dataset_event(ds(*ORDERS, documentation={"_deleted": True}), at(12)),
    )
    assert api.dataset(*ORDERS)["facets"]["documentation"] == documentation("v2")


def test_deleted_null_is_an_ordinary_value(api: Api) -> None:
    documentation = facet(
        "DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.", _deleted=None
    )
    api.ingest(dataset_event(ds(*ORDERS, documentation=documentation), at(11)))
    assert api.dataset(*ORDERS)["facets"]["documentation"] == documentation


# == edges and lineage walks (DESIGN §4, §5 lineage) ============================================

RAW = ("s3://landing", "orders.json")
DASHBOARD = ("superset", "revenue")
CRM = ("s3://landing", "crm.csv")


def platform() -> list[Event]:
    """raw → ingest → orders → daily → report → (dashboard service), and a sibling branch
    crm → sync_crm → customers → daily that only an undirected walk from orders reaches."""
    return [
        run_event("COMPLETE", "ingest", run_id(1), at(8), inputs=[ds(*RAW)], outputs=[ds(*ORDERS)]),
        run_event(
            "COMPLETE", "sync_crm", run_id(2), at(8), inputs=[ds(*CRM)], outputs=[ds(*CUSTOMERS)]
        ),
        run_event(
            "COMPLETE",
            "daily",
            run_id(3),
            at(9),
            inputs=[ds(*ORDERS), ds(*CUSTOMERS)],
            outputs=[ds(*REPORT)],
        ),
        job_event(DASHBOARD[1], at(10), inputs=[ds(*REPORT)], namespace=DASHBOARD[0]),
    ]


def test_lineage_shape_and_direction(api: Api) -> None:
    api.ingest(*platform())
    doc = api.lineage(*ORDERS)
    assert set(doc) == {"root", "nodes", "edges", "truncated"}
    assert doc["root"] == dataset_id(*ORDERS) and doc["truncated"] is False
    for node in doc["nodes"]:
        assert node["id"] == f"{node['type']}:{node['namespace']}:{node['name']}"
    for e in doc["edges"]:
        assert set(e) >= {
            "source",
            "target",
            "static",
            "first_seen",
            "last_seen",
            "run_count",
            "last_state",
        }
    ingest, daily = job_id("spark", "ingest"), job_id("spark", "daily")
    dashboard = job_id(*DASHBOARD, "service")
    # Edges follow the data: dataset → job for a read, job → dataset for a write.
    assert edge_pairs(doc) == {
        (dataset_id(*RAW), ingest),
        (ingest, dataset_id(*ORDERS)),
        (dataset_id(*ORDERS), daily),
        (daily, dataset_id(*REPORT)),
        (dataset_id(*REPORT), dashboard),
    }


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        ("upstream", {"orders", "ingest", "raw"}),
        ("downstream", {"orders", "daily", "report", "dashboard"}),
        # The union of both walks: customers, sync_crm and crm (reachable only against the
        # flow, through daily) are not in it.
        ("both", {"orders", "ingest", "raw", "daily", "report", "dashboard"}),
    ],
)
def test_lineage_directions(api: Api, direction: str, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "orders": dataset_id(*ORDERS),
        "raw": dataset_id(*RAW),
        "report": dataset_id(*REPORT),
        "ingest": job_id("spark", "ingest"),
        "daily": job_id("spark", "daily"),
        "dashboard": job_id(*DASHBOARD, "service"),
    }
    doc = api.lineage(*ORDERS, direction=direction)
    assert node_ids(doc) == {names[n] for n in expected}
    if direction == "both":
        assert doc == api.lineage(*ORDERS)  # the default


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (0, {"report"}),
        (1, {"report", "daily"}),  # the writer job is at depth 1
        (2, {"report", "daily", "orders", "customers"}),  # its inputs at depth 2
        (3, {"report", "daily", "orders", "customers", "ingest", "sync_crm"}),
        (4, {"report", "daily", "orders", "customers", "ingest", "sync_crm", "raw", "crm"}),
    ],
)
def test_lineage_depth_counts_edges(api: Api, depth: int, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "report": dataset_id(*REPORT),
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "customers": dataset_id(*CUSTOMERS),
        "ingest": job_id("spark", "ingest"),
        "sync_crm": job_id("spark", "sync_crm"),
        "raw": dataset_id(*RAW),
        "crm": dataset_id(*CRM),
    }
    doc = api.lineage(*REPORT, direction="upstream", depth=depth)
    assert node_ids(doc) == {names[n] for n in expected}
    assert len(doc["edges"]) == len(expected) - 1  # a tree upstream of the report


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        # depth 2 from a job: its inputs, then their writers
        ("upstream", {"daily", "orders", "customers", "ingest", "sync_crm"}),
        ("downstream", {"daily", "report", "dashboard"}),
    ],
)
def test_lineage_from_a_job(api: Api, direction: str, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "customers": dataset_id(*CUSTOMERS),
        "report": dataset_id(*REPORT),
        "dashboard": job_id(*DASHBOARD, "service"),
        "ingest": job_id("spark", "ingest"),
        "sync_crm": job_id("spark", "sync_crm"),
    }
    doc = api.get(
        "/api/v1/lineage", type="job", namespace="spark", name="daily", direction=direction, depth=2
    )
    assert doc["root"] == job_id("spark", "daily")
    assert node_ids(doc) == {names[n] for n in expected}


def cycle() -> list[Event]:
    """D → J → E → K → D, and a branch E → L → F off the cycle."""
    d, e, f = ("w", "D"), ("w", "E"), ("w", "F")
    return [
        run_event("COMPLETE", "J", run_id(1), at(9), inputs=[ds(*d)], outputs=[ds(*e)]),
        run_event("COMPLETE", "K", run_id(2), at(9), inputs=[ds(*e)], outputs=[ds(*d)]),
        run_event("COMPLETE", "L", run_id(3), at(9), inputs=[ds(*e)], outputs=[ds(*f)]),
    ]


def test_cycles_terminate(api: Api) -> None:
    api.ingest(*cycle())
    doc = api.lineage("w", "D", direction="upstream", depth=20)
    assert node_ids(doc) == {
        dataset_id("w", "D"),
        dataset_id("w", "E"),
        job_id("spark", "J"),
        job_id("spark", "K"),
    }
    assert len(doc["edges"]) == 4
    down = api.lineage("w", "D", direction="downstream", depth=20)
    assert node_ids(down) == node_ids(doc) | {job_id("spark", "L"), dataset_id("w", "F")}


def test_both_is_the_union_of_the_two_walks_on_a_cycle(api: Api) -> None:
    api.ingest(*cycle())
    up = node_ids(api.lineage("w", "D", direction="upstream"))
    down = node_ids(api.lineage("w", "D", direction="downstream"))
    assert node_ids(api.lineage("w", "D", direction="both")) == up | down


@pytest.mark.parametrize(("limit", "truncated"), [(1, True), (3, True), (8, False), (500, False)])
def test_lineage_limit_truncates(api: Api, limit: int, truncated: bool) -> None:
    api.ingest(*platform())
    doc = api.lineage(*REPORT, direction="upstream", limit=limit)
    assert len(doc["nodes"]) == min(limit, 8)
    assert doc["truncated"] is truncated
    assert dataset_id(*REPORT) in node_ids(doc)
    for e in doc["edges"]:  # no edge points outside the nodes returned
        assert {e["source"], e["target"]} <= node_ids(doc)


def test_edge_times_run_count_and_last_state(api: Api) -> None:
    api.ingest(
        run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)]),
        run_event(
            "COMPLETE", "daily", run_id(1), at(9, 30), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]
        ),
        # A later run, sent in +02:00 with microseconds, that fails.
        run_event(
            "START",
            "daily",
            run_id(2),
            f"{DAY}T12:00:00.123456+02:00",
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
        ),
        run_event("FAIL", "daily", run_id(2), at(10, 5)),
        run_event("COMPLETE", "backfill", run_id(3), at(7), outputs=[ds(*REPORT)]),
    )
    doc = api.lineage(*REPORT, direction="upstream")
    daily = job_id("spark", "daily")
    read = edge(doc, dataset_id(*ORDERS), daily)
    assert (read["first_seen"], read["last_seen"]) == (at(9), f"{DAY}T10:00:00.123456Z")
    assert (read["run_count"], read["last_state"], read["static"]) == (2, "FAIL", False)
    write = edge(doc, daily, dataset_id(*REPORT))
    assert (write["first_seen"], write["last_seen"]) == (at(9, 30), f"{DAY}T10:00:00.123456Z")
    assert (write["run_count"], write["last_state"]) == (2, "FAIL")
    backfill = edge(doc, job_id("spark", "backfill"), dataset_id(*REPORT))
    assert (backfill["run_count"], backfill["last_state"]) == (1, "COMPLETE")


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ("COMPLETE", {"report", "backfill"}),
        ("FAIL", {"report", "daily", "orders"}),
        ("COMPLETE,FAIL", {"report", "daily", "orders", "backfill"}),
        ("RUNNING", {"report"}),
    ],
)
def test_states_filter_keeps_edges_by_last_state(api: Api, states: str, expected: set[str]) -> None:
    api.ingest(
        run_event("FAIL", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]),
        run_event("COMPLETE", "backfill", run_id(2), at(7), outputs=[ds(*REPORT)]),
    )
    names = {
        "report": dataset_id(*REPORT),
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "backfill": job_id("spark", "backfill"),
    }
    doc = api.lineage(*REPORT, direction="upstream", states=states)
    assert node_ids(doc) == {names[n] for n in expected}
    assert {e["last_state"] for e in doc["edges"]} <= set(states.split(","))


def test_as_of_answers_with_the_graph_as_it_stood(api: Api) -> None:
    # 09:00 `daily` writes the report (START at 9, FAIL at 9:30); 11:00 a second run
    # completes; 12:00 the report learns an alias and a job reads it under that alias.
    alias = ("hive://metastore", "analytics.report")
    api.ingest(
        run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)]),
        run_event("FAIL", "daily", run_id(1), at(9, 30), outputs=[ds(*REPORT)]),
        run_event("COMPLETE", "daily", run_id(2), at(11), outputs=[ds(*REPORT)]),
        run_event(
            "COMPLETE",
            "alias_writer",
            run_id(3),
            at(12),
            outputs=[ds(*REPORT, symlinks=symlinks((*alias, "TABLE")))],
        ),
        run_event("COMPLETE", "reader", run_id(4), at(12), inputs=[ds(*alias)]),
    )
    canonical = dataset_id(*alias)  # hive://… sorts before postgres://…: canonical now

    def lineage(as_of: str | None) -> dict[str, Any]:
        params = {"asOf": as_of} if as_of else {}
        return api.lineage(*REPORT, direction="both", **params)

    before = lineage(at(8))
    assert before["edges"] == [] and node_ids(before) == {dataset_id(*REPORT)}
    at_ten = lineage(at(10))
    assert at_ten["root"] == dataset_id(*REPORT)  # no alias yet: its own node
    writer = edge(at_ten, job_id("spark", "daily"), dataset_id(*REPORT))
    assert (writer["first_seen"], writer["last_seen"]) == (at(9, 30), at(9, 30))
    assert (writer["run_count"], writer["last_state"]) == (1, "FAIL")
    assert job_id("spark", "reader") not in node_ids(at_ten)
    later = lineage(at(11, 30))
    writer = edge(later, job_id("spark", "daily"), dataset_id(*REPORT))
    assert (writer["last_seen"], writer["run_count"], writer["last_state"]) == (
        at(11),
        2,
        "COMPLETE",
    )
    now = lineage(None)
    assert now["root"] == canonical
    assert job_id("spark", "reader") in node_ids(now)
    # asOf at the last instant (inclusive) is the graph as it is.
    assert lineage(at(12)) == now
    problem = api.problem(
        "GET", "/api/v1/lineage", 400, namespace=REPORT[0], name=REPORT[1], asOf="noon"
    )
    assert "asOf" in problem["detail"]


def test_node_ids_percent_encode_the_name(api: Api) -> None:
    namespace, name = "postgres://db:5432", "sales:orders%2026"
    api.ingest(
        run_event(
            "COMPLETE",
            "load:orders%v2",
            run_id(1),
            at(9),
            outputs=[ds(namespace, name)],
            namespace="airflow://prod",
        )
    )
    doc = api.lineage(namespace, name)
    root = "dataset:postgres://db:5432:sales%3Aorders%252026"
    assert doc["root"] == root
    job = "job:airflow://prod:load%3Aorders%25v2"
    assert node_ids(doc) == {root, job}
    for node in doc["nodes"]:
        head, _, encoded = node["id"].rpartition(":")  # an id splits from the right
        assert head == f"{node['type']}:{node['namespace']}"
        assert urllib.parse.unquote(encoded) == node["name"]
    assert api.dataset(namespace, name)["id"] == root


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/lineage", {"namespace": "pg", "name": "nothing"}),
        ("/api/v1/lineage", {"type": "job", "namespace": "spark", "name": "nothing"}),
        ("/api/v1/lineage", {"type": "service", "namespace": "superset", "name": "nothing"}),
        ("/api/v1/column-lineage", {"namespace": "pg", "name": "nothing", "field": "id"}),
        ("/api/v1/datasets", {"namespace": "pg", "name": "nothing"}),
        ("/api/v1/jobs", {"namespace": "spark", "name": "nothing"}),
        ("/api/v1/deliveries/01JNOSUCHDELIVERY000000000", {}),
    ],
)
def test_unknown_entities_are_404(api: Api, path: str, params: dict[str, str]) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", path, 404, **params)
    assert doc["type"].endswith("/not-found")


REPORT_QUERY = {"namespace": REPORT[0], "name": REPORT[1]}


@pytest.mark.parametrize(
    "params",
    [
        {"name": REPORT[1]},
        {"namespace": REPORT[0]},
        {**REPORT_QUERY, "direction": "sideways"},
        {**REPORT_QUERY, "depth": "two"},
        {**REPORT_QUERY, "depth": -1},
        {**REPORT_QUERY, "depth": 1000},
        {**REPORT_QUERY, "limit": 0},
        {**REPORT_QUERY, "states": "DONE"},
        {**REPORT_QUERY, "states": "COMPLETE,done"},
        {**REPORT_QUERY, "type": "table"},
    ],
    ids=[
        "no-namespace",
        "no-name",
        "direction",
        "depth-text",
        "depth-negative",
        "depth-huge",
        "limit-zero",
        "states",
        "states-partly",
        "type",
    ],
)
def test_bad_lineage_parameters_are_400(api: Api, params: dict[str, Any]) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", "/api/v1/lineage", 400, **params)
    assert doc["type"].endswith("/bad-parameter")


# == column lineage (DESIGN §3 Column lineage, §5 column-lineage) ===============================

DBT_ORDERS, DBT_CUSTOMERS = ORDERS, CUSTOMERS
DBT_REPORT = ("postgres://db:5432", "analytics.order_report")


def input_field(
    dataset: tuple[str, str], field: str, *transformations: tuple[str, str, bool]
) -> dict[str, Any]:
    entry: dict[str, Any] = {"namespace": dataset[0], "name": dataset[1], "field": field}
    if transformations:
        entry["transformations"] = [
            {"type": t, "subtype": s, "description": "", "masking": m}
            for t, s, m in transformations
        ]
    return entry


def column_lineage(fields: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        DBT,
        fields={out: {"inputFields": inputs} for out, inputs in fields.items()},
    )


def dbt_run(
    n: int,
    fields: dict[str, list[dict[str, Any]]],
    time: str = at(9),
    inputs: Sequence[tuple[str, str]] = (DBT_ORDERS, DBT_CUSTOMERS),
) -> Event:
    output = ds(*DBT_REPORT, columnLineage=column_lineage(fields))
    return run_event(
        "COMPLETE",
        "jaffle_shop.order_report",
        run_id(n),
        time,
        inputs=[ds(*i) for i in inputs],
        outputs=[output],
        namespace="dbt",
        producer=DBT,
    )


def field_id(dataset: tuple[str, str], field: str) -> str:
    return f"field:{dataset[0]}:{dataset[1]}:{field}"


DBT_JOB = job_id("dbt", "jaffle_shop.order_report")
IDENTITY = ("DIRECT", "IDENTITY", False)
TRANSFORMATION = ("DIRECT", "TRANSFORMATION", False)
AGGREGATION = ("DIRECT", "AGGREGATION", False)


@pytest.mark.parametrize(
    ("transformations", "kind", "klass", "indirect"),
    [
        ([IDENTITY], "mapping", "direct", []),
        ([TRANSFORMATION], "mapping", "expression", []),
        ([AGGREGATION], "mapping", "aggregate", []),
        ([IDENTITY, AGGREGATION, TRANSFORMATION], "mapping", "aggregate", []),
        ([], "mapping", "expression", []),  # no metadata at all
        ([("DIRECT", "WINDOWED_MAGIC", False)], "mapping", "expression", []),  # unknown
        # DESIGN §5 `indirect` holds "the INDIRECT subtypes": the API answers the bare
        # subtype ("JOIN"), not the qualified "INDIRECT/JOIN".
        ([("INDIRECT", "JOIN", False)], "indirect", None, ["JOIN"]),
        (
            [("INDIRECT", "JOIN", False), ("INDIRECT", "FILTER", False)],
            "indirect",
            None,
            ["FILTER", "JOIN"],
        ),
        ([IDENTITY, ("INDIRECT", "FILTER", False)], "mapping", "direct", ["FILTER"]),
    ],
    ids=[
        "identity",
        "transformation",
        "aggregation",
        "strongest",
        "none",
        "unknown-subtype",
        "join",
        "join-filter",
        "direct-with-filter",
    ],
)
def test_column_edge_classification(
    api: Api,
    transformations: list[tuple[str, str, bool]],
    kind: str,
    klass: str | None,
    indirect: list[str],
) -> None:
    api.ingest(dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", *transformations)]}))
    doc = api.columns(*DBT_REPORT, "order_id")
    assert doc["root"] == field_id(DBT_REPORT, "order_id")
    assert node_ids(doc) == {field_id(DBT_REPORT, "order_id"), field_id(DBT_ORDERS, "id")}
    (e,) = doc["edges"]
    assert (e["source"], e["target"]) == (
        field_id(DBT_ORDERS, "id"),
        field_id(DBT_REPORT, "order_id"),
    )
    assert (e["kind"], e["class"], sorted(e["indirect"])) == (kind, klass, indirect)
    assert e["masked"] is False and e["job"] == DBT_JOB and "derived" not in e


def test_field_nodes_carry_their_parts(api: Api) -> None:
    api.ingest(dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", IDENTITY)]}))
    doc = api.columns(*DBT_REPORT, "order_id")
    assert {
        "id": field_id(DBT_ORDERS, "id"),
        "type": "field",
        "namespace": DBT_ORDERS[0],
        "name": DBT_ORDERS[1],
        "field": "id",
    } in doc["nodes"]


@pytest.mark.parametrize("reverse", [False, True], ids=["weak-first", "strong-first"])
def test_strongest_class_wins_across_events(api: Api, reverse: bool) -> None:
    runs = [
        dbt_run(1, {"total": [input_field(DBT_ORDERS, "amount", IDENTITY)]}, at(9)),
        dbt_run(2, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}, at(10)),
        dbt_run(3, {"total": [input_field(DBT_ORDERS, "amount", TRANSFORMATION)]}, at(11)),
    ]
    api.ingest_each(*(reversed(runs) if reverse else runs))
    (e,) = api.columns(*DBT_REPORT, "total")["edges"]
    assert (e["kind"], e["class"]) == ("mapping", "aggregate")
    assert (e["first_seen"], e["last_seen"]) == (at(9), at(11))


def test_masking_marks_the_edge_masked_for_good(api: Api) -> None:
    masked = ("DIRECT", "TRANSFORMATION", True)
    api.ingest_each(
        dbt_run(1, {"email": [input_field(DBT_CUSTOMERS, "email", masked)]}, at(9)),
        dbt_run(2, {"email": [input_field(DBT_CUSTOMERS, "email", TRANSFORMATION)]}, at(10)),
    )
    (e,) = api.columns(*DBT_REPORT, "email")["edges"]
    assert (e["class"], e["masked"]) == ("expression", True)


def test_indirect_only_input_is_an_indirect_dependency(api: Api) -> None:
    api.ingest(
        dbt_run(
            1,
            {
                "customer_name": [
                    input_field(DBT_CUSTOMERS, "name", IDENTITY),
                    input_field(DBT_ORDERS, "customer_id", ("INDIRECT", "JOIN", False)),
                ]
            },
        )
    )
    doc = api.columns(*DBT_REPORT, "customer_name")
    by_source = {e["source"]: e for e in doc["edges"]}
    join = by_source[field_id(DBT_ORDERS, "customer_id")]
    assert (join["kind"], join["class"], join["indirect"]) == ("indirect", None, ["JOIN"])
    name = by_source[field_id(DBT_CUSTOMERS, "name")]
    assert (name["kind"], name["class"]) == ("mapping", "direct")

    mappings = api.columns(*DBT_REPORT, "customer_name", kinds="mapping")
    assert [e["source"] for e in mappings["edges"]] == [field_id(DBT_CUSTOMERS, "name")]
    assert field_id(DBT_ORDERS, "customer_id") not in node_ids(mappings)
    indirect = api.columns(*DBT_REPORT, "customer_name", kinds="indirect")
    assert [e["source"] for e in indirect["edges"]] == [field_id(DBT_ORDERS, "customer_id")]
    api.problem(
        "GET",
        "/api/v1/column-lineage",
        400,
        namespace=DBT_REPORT[0],
        name=DBT_REPORT[1],
        field="customer_name",
        kinds="mapping,derived",
    )


def test_unmatched_input_dataset_is_ignored_with_a_warning(api: Api) -> None:
    ghost = ("postgres://db:5432", "public.ghost")
    view = api.ingest(
        dbt_run(
            1,
            {
                "order_id": [
                    input_field(DBT_ORDERS, "id", IDENTITY),
                    input_field(ghost, "id", IDENTITY),
                ]
            },
        )
    )
    assert view["items"][0]["outcome"] == "projected"
    (warning,) = view["items"][0]["warnings"]
    assert "public.ghost" in warning and "not among the event's inputs" in warning
    doc = api.columns(*DBT_REPORT, "order_id")
    assert [e["source"] for e in doc["edges"]] == [field_id(DBT_ORDERS, "id")]
    api.problem("GET", "/api/v1/datasets", 404, namespace=ghost[0], name=ghost[1])


def test_column_lineage_walks_hops_both_ways(api: Api) -> None:
    dashboard = ("postgres://db:5432", "analytics.revenue")
    api.ingest(
        dbt_run(1, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}),
        run_event(
            "COMPLETE",
            "jaffle_shop.revenue",
            run_id(2),
            at(10),
            inputs=[ds(*DBT_REPORT)],
            outputs=[
                ds(
                    *dashboard,
                    columnLineage=column_lineage(
                        {"revenue": [input_field(DBT_REPORT, "total", IDENTITY)]}
                    ),
                )
            ],
            namespace="dbt",
            producer=DBT,
        ),
    )
    up = api.columns(*dashboard, "revenue", direction="upstream")
    assert node_ids(up) == {
        field_id(dashboard, "revenue"),
        field_id(DBT_REPORT, "total"),
        field_id(DBT_ORDERS, "amount"),
    }
    assert {e["job"] for e in up["edges"]} == {DBT_JOB, job_id("dbt", "jaffle_shop.revenue")}
    one_hop = api.columns(*dashboard, "revenue", direction="upstream", depth=1)
    assert node_ids(one_hop) == {field_id(dashboard, "revenue"), field_id(DBT_REPORT, "total")}
    down = api.columns(*DBT_ORDERS, "amount", direction="downstream")
    assert node_ids(down) == node_ids(up)
    both = api.columns(*DBT_REPORT, "total")
    assert node_ids(both) == node_ids(up)
    assert up["truncated"] is False
    capped = api.columns(*dashboard, "revenue", direction="upstream", limit=2)
    assert capped["truncated"] is True
    assert node_ids(capped) == {field_id(dashboard, "revenue"), field_id(DBT_REPORT, "total")}
    assert [(e["source"], e["target"]) for e in capped["edges"]] == [
        (field_id(DBT_REPORT, "total"), field_id(dashboard, "revenue"))
    ]


def test_column_both_is_the_union_of_the_two_walks_on_a_cycle(api: Api) -> None:
    t, u, v = ("w", "t"), ("w", "u"), ("w", "v")

    def copy(
        n: int, job: str, src: tuple[str, str], f_in: str, out: tuple[str, str], f_out: str
    ) -> Event:
        lineage = column_lineage({f_out: [input_field(src, f_in, IDENTITY)]})
        return run_event(
            "COMPLETE",
            job,
            run_id(n),
            at(9),
            inputs=[ds(*src)],
            outputs=[ds(*out, columnLineage=lineage)],
        )

    api.ingest(
        copy(1, "J", t, "a", u, "b"), copy(2, "K", u, "b", t, "a"), copy(3, "L", u, "b", v, "c")
    )
    up = node_ids(api.columns(*t, "a", direction="upstream"))
    down = node_ids(api.columns(*t, "a", direction="downstream"))
    assert field_id(v, "c") in down
    assert node_ids(api.columns(*t, "a", direction="both")) == up | down


def test_field_name_is_percent_encoded_in_ids(api: Api) -> None:
    api.ingest(dbt_run(1, {"ratio:pct%": [input_field(DBT_ORDERS, "a:b", IDENTITY)]}))
    doc = api.columns(*DBT_REPORT, "ratio:pct%")
    assert doc["root"] == f"field:{DBT_REPORT[0]}:{DBT_REPORT[1]}:ratio%3Apct%25"
    (e,) = doc["edges"]
    assert e["source"] == f"field:{DBT_ORDERS[0]}:{DBT_ORDERS[1]}:a%3Ab"


def test_known_dataset_field_without_lineage_is_just_its_root(api: Api) -> None:
    api.ingest(dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", IDENTITY)]}))
    doc = api.columns(*DBT_REPORT, "not_a_column")
    assert doc == {
        "root": field_id(DBT_REPORT, "not_a_column"),
        "nodes": [
            {
                "id": field_id(DBT_REPORT, "not_a_column"),
                "type": "field",
                "namespace": DBT_REPORT[0],
                "name": DBT_REPORT[1],
                "field": "not_a_column",
            }
        ],
        "edges": [],
        "truncated": False,
    }
    api.problem("GET", "/api/v1/column-lineage", 400, namespace=DBT_REPORT[0], name=DBT_REPORT[1])


# == export and reproject (DESIGN §5 export, §1, §6) ============================================


def export_events() -> list[Event]:
    """A bit of everything: runs, a symlink, a service, a DatasetEvent, column lineage."""
    return [
        *platform(),
        spark_writes_path(),
        spark_reads_table(),
        dataset_event(ds(*ORDERS, schema=schema("id", "amount")), at(7)),
        dbt_run(7, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}),
    ]


def test_export_is_deterministic_and_arrival_free(api: Api, tmp_path: Path) -> None:
    events = export_events()
    views = [api.ingest(*events[:4], provider_key="airflow"), api.ingest(*events[4:])]
    exported = api.export()
    assert exported == api.export()
    doc = orjson.loads(exported)
    assert set(doc) == {"datasets", "jobs", "runs", "edges", "column_edges"}
    assert all(doc[k] for k in doc), "every part of the export is populated"
    text = exported.decode()
    for view in views:
        assert view["delivery_id"] not in text
        assert view["received_at"] not in text
    for key in ("delivery_id", "received_at", "seq", "provider_key"):
        assert f'"{key}"' not in text
    # The same events, one delivery each and in reverse, into another database.
    with make_client(tmp_path / "other.db") as other_client:
        other = Api(other_client)
        other.ingest_each(*reversed(events))
        assert other.export() == exported
    other.store.close()


def test_export_cli_prints_the_api_export(api: Api, db_url: str) -> None:
    api.ingest(*export_events())
    out = subprocess.run(
        [sys.executable, "-m", "embrasure", "export", "--db", db_url],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout == api.export() + b"\n"


def test_reproject_leaves_the_graph_identical(api: Api, db_url: str) -> None:
    bad = daily_run(9)
    bad["run"]["runId"] = "nope"
    view = api.ingest(*export_events(), bad)
    before = api.export()
    reproject(api.store)
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view
    subprocess.run(
        [sys.executable, "-m", "embrasure", "reproject", "--db", db_url],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view
    # The projector carries on from the new generation's position.
    api.ingest(run_event("COMPLETE", "late", run_id(20), at(20), inputs=[ds(*REPORT)]))
    assert job_id("spark", "late") in node_ids(api.lineage(*REPORT, direction="downstream"))


def test_a_graph_built_by_an_older_version_is_rebuilt_on_start(api: Api, db_url: str) -> None:
    view = api.ingest(*export_events())
    before = api.export()
    generation = api.store.generation()
    # As an older Embrasure would have left it:
    run_sql(db_url, "UPDATE graph_meta SET graph_version = ?", (GRAPH_VERSION - 1,))
    projector = Projector(api.store)
    projector.start()
    try:
        deadline = time.monotonic() + 30
        while api.store.graph_version() != GRAPH_VERSION and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        projector.stop()
    assert api.store.graph_version() == GRAPH_VERSION
    assert api.store.generation() == generation + 1
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view


# == poison deliveries (DESIGN §3: three failures quarantine the delivery whole) ================

POISON = "poison-pill"


@pytest.fixture
def faulty_projector(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fault injection: nothing real makes project_event raise (it catches its own
    errors), so the copy apply.prepare calls is wrapped to raise for events of the job POISON.
    Returns the job names of every call, to count attempts."""
    calls: list[str] = []

    def project_event(event: Any) -> Any:
        name = event.get("job", {}).get("name") if isinstance(event, dict) else None
        calls.append(str(name))
        if name == POISON:
            raise RuntimeError("injected fault")
        return real_project_event(event)

    monkeypatch.setattr("embrasure.projector.apply.project_event", project_event)
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
