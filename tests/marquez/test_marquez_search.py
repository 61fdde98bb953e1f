"""Marquez's search, ``/api/v1/search`` and ``/api/v2beta/search/{jobs,datasets}``, from
Embrasure's (embrasure/marquez/search.py, docs/marquez.md#search), on both backends."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.testclient import TestClient

from graph_api import (
    HIVE_TABLE,
    ORDERS,
    REPORT,
    WAREHOUSE_PATH,
    Api,
    at,
    daily_run,
    ds,
    job_event,
    spark_reads_table,
    spark_writes_path,
)


def get(marquez: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    r = marquez.get(path, params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_search_datasets_and_jobs(api: Api, marquez: TestClient) -> None:
    api.ingest(daily_run(5, time=at(9)), spark_writes_path(), spark_reads_table())
    found = get(marquez, "/api/v1/search", q="ORDERS")
    # The path and its table are one node, listed under each name (Marquez's rows), by name.
    node = HIVE_TABLE
    assert found["results"] == [
        {
            "type": "DATASET",
            "name": WAREHOUSE_PATH[1],
            "updatedAt": "2026-11-30T10:00:00Z",
            "namespace": WAREHOUSE_PATH[0],
            "nodeId": f"dataset:{WAREHOUSE_PATH[0]}:{WAREHOUSE_PATH[1]}",
        },
        {
            "type": "DATASET",
            "name": node[1],
            "updatedAt": "2026-11-30T10:00:00Z",
            "namespace": node[0],
            "nodeId": f"dataset:{node[0]}:{node[1]}",
        },
        {
            "type": "DATASET",
            "name": ORDERS[1],
            "updatedAt": "2026-11-30T09:00:00Z",
            "namespace": ORDERS[0],
            "nodeId": f"dataset:{ORDERS[0]}:{ORDERS[1]}",
        },
        {
            "type": "JOB",
            "name": "write_orders",
            "updatedAt": "2026-11-30T09:00:00Z",
            "namespace": "spark",
            "nodeId": "job:spark:write_orders",
        },
    ]
    assert found["totalCount"] == 4
    jobs = get(marquez, "/api/v1/search", q="orders", filter="JOB")["results"]
    assert [r["name"] for r in jobs] == ["write_orders"]
    newest = get(marquez, "/api/v1/search", q="orders", sort="UPDATE_AT", limit=1)["results"]
    assert [r["name"] for r in newest] == [WAREHOUSE_PATH[1]]  # the node's time; then by name
    assert get(marquez, "/api/v1/search", q="orders", namespace=ORDERS[0])["totalCount"] == 1
    assert get(marquez, "/api/v1/search", q="orders", after="2026-12-01")["totalCount"] == 0
    assert get(marquez, "/api/v1/search", q="orders", before="2026-12-01")["totalCount"] == 4
    assert get(marquez, "/api/v1/search", 400, q=" ")["code"] == 400
    assert get(marquez, "/api/v1/search", 400, q="x", filter="FIELD")["code"] == 400
    assert get(marquez, "/api/v1/search", 400, q="x", after="01/12/2026")["code"] == 400


def test_v2beta_search(api: Api, marquez: TestClient) -> None:
    api.ingest(daily_run(1, time=at(9)))
    jobs = get(marquez, "/api/v2beta/search/jobs", q="dail")
    assert [(h["name"], h["namespace"], h["eventType"], h["type"]) for h in jobs["hits"]] == [
        ("daily", "spark", "COMPLETE", "BATCH")
    ]
    assert jobs["highlights"] == [{"name": ["<em>dail</em>y"]}]
    datasets = get(marquez, "/api/v2beta/search/datasets", q="report")
    [hit] = datasets["hits"]
    assert (hit["namespace"], hit["name"]) == REPORT
    assert hit["eventType"] == "COMPLETE"
    assert get(marquez, "/api/v2beta/search/jobs", 400)["code"] == 400


def test_a_service_found_has_the_time_its_job_has(api: Api, marquez: TestClient) -> None:
    """An input-only JobEvent's job (a service: no runs) is found with the updatedAt
    ``/api/v1/jobs`` gives it, never null (Marquez's SearchResult has it @NonNull)."""
    api.ingest(job_event("orders_api", at(7), inputs=[ds(*ORDERS)], namespace="services"))
    found = get(marquez, "/api/v1/search", q="orders_api")["results"]
    job = get(marquez, "/api/v1/namespaces/services/jobs/orders_api")
    assert [r["updatedAt"] for r in found] == [job["updatedAt"]]
    assert job["updatedAt"] is not None


def test_search_names_no_identity_in_a_hidden_namespace(api: Api, marquez: TestClient) -> None:
    """The path's namespace hidden (docs/security.md): the node is still found, by its
    table, and the path is not named."""
    api.ingest(spark_writes_path(), spark_reads_table())
    hide = {"type": "namespace", "namespace": WAREHOUSE_PATH[0]}
    assert api.client.post("/api/v1/admin/hide", content=orjson.dumps(hide)).status_code == 202
    api.project()
    found = get(marquez, "/api/v1/search", q="orders", filter="DATASET")["results"]
    assert [(r["namespace"], r["name"]) for r in found] == [HIVE_TABLE]
