"""Runs through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from graph_api import (
    AIRFLOW,
    FLINK,
    ORDERS,
    REPORT,
    Api,
    Event,
    at,
    daily_run,
    dataset_id,
    ds,
    edge,
    edge_pairs,
    facet,
    job_event,
    job_id,
    run_event,
    run_id,
    walk_pages,
)

# == runs (docs/projection.md#runs, docs/queries.md#runs) ==========================================


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
    assert run["inputs"] == [
        {"namespace": ORDERS[0], "name": ORDERS[1], "facets": {}, "inputFacets": {}}
    ]
    assert run["outputs"] == [
        {"namespace": REPORT[0], "name": REPORT[1], "facets": {}, "outputFacets": {}}
    ]


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
    # The job is linked to its parent job too (docs/projection.md#runs: the task to its DAG).
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
    # A job known only from a JobEvent has no runs; an unknown job is a 404
    # (docs/queries.md#conventions).
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
    assert [(d["namespace"], d["name"], d["version"]) for d in run["inputs"]] == [(*ORDERS, "v7")]
    assert [(d["namespace"], d["name"], d["version"]) for d in run["outputs"]] == [(*REPORT, "42")]
    assert run["outputs"][0]["facets"] == {"version": version}


def test_unknown_run_is_404(api: Api) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", "/api/v1/runs/" + run_id(2), 404)
    assert doc["type"].endswith("/not-found")
