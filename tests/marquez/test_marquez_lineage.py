"""Marquez's ``GET /api/v1/lineage?nodeId=`` from Embrasure's walk
(embrasure/marquez/lineage.py, docs/marquez.md#lineage), on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from embrasure.marquez.lineage import NodeId

from graph_api import (
    CRM,
    CUSTOMERS,
    DASHBOARD,
    HIVE_REPORT,
    HIVE_TABLE,
    ORDERS,
    RAW,
    REPORT,
    WAREHOUSE_PATH,
    Api,
    at,
    ds,
    platform,
    run_event,
    run_id,
    spark_reads_table,
    spark_writes_path,
    symlinks,
)


def lineage(marquez: TestClient, node_id: str, status: int = 200, **params: Any) -> Any:
    # marquez-web sends the node id unencoded (its requests/lineage.ts); httpx encodes it.
    r = marquez.get("/api/v1/lineage", params={"nodeId": node_id, **params})
    assert r.status_code == status, r.text
    return r.json()


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in doc["graph"]}


def ds_id(d: tuple[str, str]) -> str:
    return f"dataset:{d[0]}:{d[1]}"


@pytest.mark.parametrize(
    ("text", "kind", "parts", "version"),
    [
        (
            "dataset:food_delivery:public.orders",
            "dataset",
            ["food_delivery", "public.orders"],
            None,
        ),
        ("dataset:s3://bucket:path/t1", "dataset", ["s3://bucket", "path/t1"], None),
        (
            "dataset:postgres://db:5432:public.orders",
            "dataset",
            ["postgres://db:5432", "public.orders"],
            None,
        ),
        (
            "datasetField:postgres://db:5432:public.orders:amount",
            "datasetField",
            ["postgres://db:5432", "public.orders", "amount"],
            None,
        ),
        (
            "job:spark:daily#8f1c2a40-0bd5-4c32-9d3a-1f2e3d4c5b6a",
            "job",
            ["spark", "daily"],
            "8f1c2a40-0bd5-4c32-9d3a-1f2e3d4c5b6a",
        ),
        ("job:ns:name:with:colons", "job", ["ns", "name:with:colons"], None),
    ],
)
def test_node_ids_split_as_marquez_splits_them(
    text: str, kind: str, parts: list[str], version: str | None
) -> None:
    node = NodeId(text)
    assert (node.kind, node.parts, node.version) == (kind, parts, version)


def test_a_platforms_lineage_in_marquez_shape(api: Api, marquez: TestClient) -> None:
    api.ingest(*platform())
    doc = lineage(marquez, ds_id(ORDERS), depth=20)
    nodes = by_id(doc)
    # Embrasure's walk: up and down from orders (not the sibling branch's inputs, which
    # only an undirected walk reaches), the service reading the report included.
    assert set(nodes) == {
        ds_id(RAW),
        "job:spark:ingest",
        ds_id(ORDERS),
        "job:spark:daily",
        ds_id(REPORT),
        f"job:{DASHBOARD[0]}:{DASHBOARD[1]}",
    }
    orders = nodes[ds_id(ORDERS)]
    assert orders["type"] == "DATASET"
    assert orders["inEdges"] == [{"origin": "job:spark:ingest", "destination": ds_id(ORDERS)}]
    assert orders["outEdges"] == [{"origin": ds_id(ORDERS), "destination": "job:spark:daily"}]
    assert orders["data"]["id"] == {"namespace": ORDERS[0], "name": ORDERS[1]}
    assert orders["data"]["type"] == "DB_TABLE"
    daily = nodes["job:spark:daily"]
    assert daily["type"] == "JOB"
    assert daily["data"]["latestRun"]["state"] == "COMPLETED"
    assert daily["data"]["inputs"] == [
        {"namespace": CUSTOMERS[0], "name": CUSTOMERS[1]},
        {"namespace": ORDERS[0], "name": ORDERS[1]},
    ]
    assert "latestRuns" not in daily["data"]
    # Customers is not in the walk from orders (an undirected walk reaches it), so
    # neither is its edge into daily, though daily's data lists it as an input.
    assert {e["origin"] for e in daily["inEdges"]} == {ds_id(ORDERS)}
    # Depth counts Marquez's job hops: depth 0 from orders reaches its writer and readers.
    near = by_id(lineage(marquez, ds_id(ORDERS), depth=0))
    assert set(near) == {ds_id(ORDERS), "job:spark:ingest", "job:spark:daily"}
    # From a job.
    from_job = by_id(lineage(marquez, "job:spark:sync_crm", depth=1))
    assert {ds_id(CRM), ds_id(CUSTOMERS), "job:spark:daily"} <= set(from_job)


def test_a_symlinked_dataset_is_one_node_named_as_asked(api: Api, marquez: TestClient) -> None:
    """docs/marquez.md#symlinks: the path and the table are one node, named by the
    identity the node id asked for (marquez-web keeps the nodes reachable from it)."""
    api.ingest(spark_writes_path(), spark_reads_table())
    primary = WAREHOUSE_PATH  # sent with the facet naming the table
    for asked in (WAREHOUSE_PATH, HIVE_TABLE):
        graph = by_id(lineage(marquez, ds_id(asked)))
        assert set(graph) == {
            "job:spark:write_orders",
            ds_id(asked),
            "job:spark:build_report",
            ds_id(HIVE_REPORT),
        }
        data = graph[ds_id(asked)]["data"]
        assert (data["namespace"], data["name"], data["physicalName"]) == (*asked, primary[1])
        writer = graph["job:spark:write_orders"]
        assert writer["outEdges"] == [
            {"origin": "job:spark:write_orders", "destination": ds_id(asked)}
        ]
    # Reached from elsewhere, the node is named by its primary identity.
    from_report = by_id(lineage(marquez, ds_id(HIVE_REPORT)))
    assert ds_id(primary) in from_report


def test_a_path_whose_table_sorts_first_is_drawn_under_its_name(
    api: Api, marquez: TestClient
) -> None:
    """Issue 51's blank marquez-web page: the S3 path, whose table (hive:// sorts first)
    only its symlinks facet names, is in its own graph under its own name."""
    path, table = ("s3://lake", "warehouse/orders"), ("hive://metastore", "db.orders")
    write = ds(*path, symlinks=symlinks((*table, "TABLE")))
    api.ingest(run_event("COMPLETE", "load_orders", run_id(1), at(9), outputs=[write]))
    graph = by_id(lineage(marquez, ds_id(path)))
    assert set(graph) == {ds_id(path), "job:spark:load_orders"}
    assert graph[ds_id(path)]["data"]["physicalName"] == path[1]


def test_unknown_and_malformed_node_ids(api: Api, marquez: TestClient) -> None:
    api.ingest(*platform())
    assert lineage(marquez, ds_id((ORDERS[0], "nothing")), 404) == {
        "code": 404,
        "message": "Dataset 'nothing' not found.",
    }
    assert lineage(marquez, "job:spark:nothing", 404)["message"] == "Job 'nothing' not found."
    assert lineage(marquez, "table:x:y", 400)["code"] == 400
    assert lineage(marquez, "dataset:only", 400)["code"] == 400
    r = marquez.get("/api/v1/lineage")
    assert r.status_code == 400 and r.json()["code"] == 400
