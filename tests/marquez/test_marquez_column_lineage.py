"""Marquez's ``GET /api/v1/column-lineage?nodeId=`` from Embrasure's column walk
(embrasure/marquez/column_lineage.py, docs/marquez.md#column-lineage), on both backends."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from embrasure.marquez.model import dataset_version

from graph_api import (
    DBT_CUSTOMERS,
    DBT_ORDERS,
    DBT_REPORT,
    Api,
    at,
    column_lineage,
    dbt_run,
    ds,
    input_field,
    run_event,
    run_id,
    schema,
    symlinks,
)


def columns(marquez: TestClient, node_id: str, status: int = 200, **params: Any) -> Any:
    r = marquez.get("/api/v1/column-lineage", params={"nodeId": node_id, **params})
    assert r.status_code == status, r.text
    return r.json()


def fid(dataset: tuple[str, str], field: str) -> str:
    return f"datasetField:{dataset[0]}:{dataset[1]}:{field}"


FIELDS = {
    "order_id": [input_field(DBT_ORDERS, "id", ("DIRECT", "IDENTITY", False))],
    "total": [input_field(DBT_ORDERS, "amount", ("DIRECT", "AGGREGATION", False))],
    "email": [
        input_field(DBT_CUSTOMERS, "email", ("DIRECT", "TRANSFORMATION", True)),
        input_field(DBT_CUSTOMERS, "id", ("INDIRECT", "JOIN", False)),
    ],
}


def load(api: Api) -> None:
    downstream = run_event(
        "COMPLETE",
        "export",
        run_id(2),
        at(10),
        inputs=[ds(*DBT_REPORT)],
        outputs=[
            ds(
                "s3://exports",
                "report.csv",
                schema=schema("total"),
                columnLineage=dbt_run(9, {"total": [input_field(DBT_REPORT, "total")]})["outputs"][
                    0
                ]["facets"]["columnLineage"],
            )
        ],
    )
    api.ingest(dbt_run(1, FIELDS), downstream)


def test_a_field_upstream(api: Api, marquez: TestClient) -> None:
    load(api)
    doc = columns(marquez, fid(DBT_REPORT, "email"), depth=20)
    nodes = {n["id"]: n for n in doc["graph"]}
    assert set(nodes) == {
        fid(DBT_REPORT, "email"),
        fid(DBT_CUSTOMERS, "email"),
        fid(DBT_CUSTOMERS, "id"),
    }
    email = nodes[fid(DBT_REPORT, "email")]
    assert email["type"] == "DATASET_FIELD"
    # Marquez's edges: a node's inEdges go from it to the fields it came from.
    assert email["inEdges"] == [
        {"origin": fid(DBT_REPORT, "email"), "destination": fid(DBT_CUSTOMERS, "email")},
        {"origin": fid(DBT_REPORT, "email"), "destination": fid(DBT_CUSTOMERS, "id")},
    ]
    assert email["outEdges"] == []
    data = email["data"]
    assert (data["namespace"], data["dataset"], data["field"]) == (*DBT_REPORT, "email")
    assert data["datasetVersion"] == dataset_version(*DBT_REPORT, run_id(1))
    assert data["transformationType"] == "TRANSFORMATION"
    masked, join = data["inputFields"]
    assert (masked["field"], masked["transformationType"], masked["masked"]) == (
        "email",
        "TRANSFORMATION",
        True,
    )
    assert (join["field"], join["kind"], join["transformationType"]) == (
        "id",
        "indirect",
        "INDIRECT",
    )
    assert join["subtypes"] == ["INDIRECT/JOIN"]
    source = nodes[fid(DBT_CUSTOMERS, "email")]
    assert source["outEdges"] == [
        {"origin": fid(DBT_CUSTOMERS, "email"), "destination": fid(DBT_REPORT, "email")}
    ]
    # No run wrote the source: its first version.
    assert source["data"]["datasetVersion"] == dataset_version(*DBT_CUSTOMERS, "")


def test_a_dataset_with_downstream_and_a_job(api: Api, marquez: TestClient) -> None:
    load(api)
    upstream_only = {
        n["id"] for n in columns(marquez, f"dataset:{DBT_REPORT[0]}:{DBT_REPORT[1]}")["graph"]
    }
    assert fid(("s3://exports", "report.csv"), "total") not in upstream_only
    assert {fid(DBT_ORDERS, "amount"), fid(DBT_ORDERS, "id")} <= upstream_only
    both = columns(marquez, f"dataset:{DBT_REPORT[0]}:{DBT_REPORT[1]}", withDownstream="true")
    assert fid(("s3://exports", "report.csv"), "total") in {n["id"] for n in both["graph"]}
    by_job = {n["id"] for n in columns(marquez, "job:dbt:jaffle_shop.order_report")["graph"]}
    assert by_job == upstream_only


def test_unknown_nodes(api: Api, marquez: TestClient) -> None:
    load(api)
    assert columns(marquez, "dataset:nowhere:nothing", 404)["code"] == 404
    assert columns(marquez, "job:dbt:nothing", 404)["message"] == "Job 'nothing' not found."
    version = "8f1c2a40-0bd5-4c32-9d3a-1f2e3d4c5b6a"
    node = f"{fid(DBT_REPORT, 'email')}#{version}"
    assert columns(marquez, node, 400, withDownstream="true")["code"] == 400


def test_a_symlinked_path_s_fields_are_named_under_it(api: Api, marquez: TestClient) -> None:
    """docs/marquez.md#symlinks: the fields of an S3 path whose table (only its symlinks
    facet names it) sorts first are answered under the path, the identity asked."""
    path, table = ("s3://lake", "warehouse/orders"), ("hive://metastore", "db.orders")
    source = ("postgres://db:5432", "shop.orders")
    lineage = column_lineage({"id": [input_field(source, "id", ("DIRECT", "IDENTITY", False))]})
    write = ds(
        *path, schema=schema("id"), columnLineage=lineage, symlinks=symlinks((*table, "TABLE"))
    )
    api.ingest(
        run_event("COMPLETE", "load", run_id(1), at(9), inputs=[ds(*source)], outputs=[write])
    )
    graph = columns(marquez, f"dataset:{path[0]}:{path[1]}")["graph"]
    assert {n["id"] for n in graph} == {fid(path, "id"), fid(source, "id")}
    mine = next(n for n in graph if n["id"] == fid(path, "id"))
    assert (mine["data"]["namespace"], mine["data"]["dataset"]) == path
    assert mine["inEdges"] == [{"origin": fid(path, "id"), "destination": fid(source, "id")}]
