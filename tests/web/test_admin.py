"""Admin hide / unhide (docs/operations.md#hiding-datasets-jobs-and-namespaces;
web/admin.py, query/hidden.py, projector/admin.py):
recorded in the log, kept by reprojection, honoured by every read of the graph."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.projector.worker import reproject
from embrasure.store import migrations, open_store
from embrasure.store.rows import HiddenRow, TagRow

from conftest import as_one_sqlite_file, run_sql
from graph_api import (
    AIRFLOW,
    CUSTOMERS,
    DASHBOARD,
    DBT_JOB,
    DBT_ORDERS,
    DBT_REPORT,
    HIVE_TABLE,
    IDENTITY,
    ORDERS,
    RAW,
    REPORT,
    WAREHOUSE_PATH,
    Api,
    at,
    dataset_id,
    dbt_run,
    export_events,
    facet,
    field_id,
    input_field,
    job_id,
    node_ids,
    platform,
    run_event,
    run_id,
)


class Admin(Api):
    def decide(self, action: str, status: int = 202, **body: Any) -> dict[str, Any]:
        r = self.client.post(f"/api/v1/admin/{action}", content=orjson.dumps(body))
        assert r.status_code == status, r.text
        doc: dict[str, Any] = r.json()
        if status == 202:
            self.project()
        return doc

    def hide(self, kind: str, namespace: str, name: str | None = None, **extra: Any) -> Any:
        return self.decide("hide", type=kind, namespace=namespace, name=name, **extra)

    def unhide(self, kind: str, namespace: str, name: str | None = None) -> Any:
        return self.decide("unhide", type=kind, namespace=namespace, name=name)

    def hidden(self) -> list[dict[str, Any]]:
        doc: list[dict[str, Any]] = self.get("/api/v1/admin/hidden")["hidden"]
        return doc

    def names(self, path: str, key: str, **params: Any) -> set[tuple[str, str]]:
        return {(e["namespace"], e["name"]) for e in self.get(path, **params)[key]}


@pytest.fixture
def admin(client: TestClient) -> Admin:
    api = Admin(client)
    api.ingest(*export_events())
    return api


def test_a_hidden_dataset_is_left_out_of_every_read(admin: Admin) -> None:
    before = admin.export()
    assert dataset_id(*REPORT) in node_ids(admin.lineage(*ORDERS, direction="downstream"))
    receipt = admin.hide("dataset", *ORDERS, reason="test data")
    assert receipt["action"] == "hide" and receipt["state"] == "accepted"
    (entry,) = receipt["entries"]
    assert admin.delivery(entry["delivery_id"])["state"] == "projected"

    problem = admin.problem("GET", "/api/v1/lineage", 404, namespace=ORDERS[0], name=ORDERS[1])
    assert "hidden" in problem["detail"] and "test data" in problem["detail"]
    for path in ("/api/v1/impact", "/api/v1/datasets"):
        admin.problem("GET", path, 404, namespace=ORDERS[0], name=ORDERS[1])
    admin.problem("GET", "/api/v1/runs", 404, type="dataset", namespace=ORDERS[0], name=ORDERS[1])
    assert ORDERS not in admin.names("/api/v1/datasets", "datasets", limit=1)
    assert ORDERS not in admin.names("/api/v1/datasets", "datasets")
    found = admin.get("/api/v1/search", q="orders")["results"]
    assert dataset_id(*ORDERS) not in {r["node"]["id"] for r in found}
    assert found  # the other orders datasets are still found

    # Walks do not pass through it: raw → ingest → (orders) → daily → report.
    nodes = node_ids(admin.lineage(*RAW, direction="downstream"))
    assert job_id("spark", "ingest") in nodes
    assert dataset_id(*ORDERS) not in nodes and dataset_id(*REPORT) not in nodes
    assert dataset_id(*ORDERS) not in node_ids(admin.lineage(*REPORT, direction="upstream"))
    # Nor do column walks: orders.amount → total of the dbt report.
    columns = admin.columns(*DBT_REPORT, "total", direction="upstream")
    assert columns["edges"] == [] and node_ids(columns) == {field_id(DBT_REPORT, "total")}

    doc = orjson.loads(admin.export())
    assert ORDERS not in {(d["namespace"], d["name"]) for d in doc["datasets"]}
    assert not [e for e in doc["edges"] if dataset_id(*ORDERS) in (e["source"], e["target"])]
    assert not [e for e in doc["column_edges"] if e["source"].startswith(dataset_id(*ORDERS))]

    (listed,) = admin.hidden()
    assert listed["type"] == "dataset" and (listed["namespace"], listed["name"]) == ORDERS
    assert listed["reason"] == "test data" and listed["by"] is None  # auth is off
    assert listed["hidden_at"].endswith("Z")

    admin.unhide("dataset", *ORDERS)
    assert admin.hidden() == []
    assert admin.export() == before


def test_a_hidden_job_is_left_out_with_its_runs(admin: Admin) -> None:
    admin.hide("job", "spark", "daily")
    admin.problem("GET", "/api/v1/lineage", 404, type="job", namespace="spark", name="daily")
    admin.problem("GET", "/api/v1/runs", 404, namespace="spark", name="daily")
    admin.problem("GET", f"/api/v1/runs/{run_id(3)}", 404)
    admin.problem("GET", "/api/v1/jobs", 404, namespace="spark", name="daily")
    assert ("spark", "daily") not in admin.names("/api/v1/jobs", "jobs")
    assert ("spark", "ingest") in admin.names("/api/v1/jobs", "jobs")
    writers = admin.get("/api/v1/runs", type="dataset", namespace=REPORT[0], name=REPORT[1])
    assert writers["runs"] == []  # daily was its only writer
    recent = admin.get("/api/v1/overview", runs=50)["recent_runs"]
    assert recent and run_id(3) not in {r["runId"] for r in recent}
    # orders → (daily) → report: the report is no longer downstream of orders.
    downstream = node_ids(admin.lineage(*ORDERS, direction="downstream"))
    assert dataset_id(*REPORT) not in downstream
    impact = admin.get("/api/v1/impact", namespace=ORDERS[0], name=ORDERS[1])
    assert job_id("spark", "daily") not in {i["node"]["id"] for i in impact["items"]}
    runs = orjson.loads(admin.export())["runs"]
    assert runs and all(r["job"] != {"namespace": "spark", "name": "daily"} for r in runs)


def test_a_hidden_namespace_hides_its_jobs_and_datasets(admin: Admin) -> None:
    admin.hide("namespace", DASHBOARD[0])
    assert DASHBOARD[0] not in {n["name"] for n in admin.get("/api/v1/namespaces")["namespaces"]}
    admin.problem(
        "GET", "/api/v1/lineage", 404, type="service", namespace=DASHBOARD[0], name=DASHBOARD[1]
    )
    assert job_id(*DASHBOARD, "service") not in node_ids(admin.lineage(*REPORT))

    admin.hide("namespace", ORDERS[0])
    datasets = admin.names("/api/v1/datasets", "datasets")
    assert ORDERS not in datasets and CUSTOMERS not in datasets and RAW in datasets
    search = admin.get("/api/v1/search", q="public")["results"]
    assert not [r for r in search if r["node"]["namespace"] == ORDERS[0]]
    assert [h["type"] for h in admin.hidden()] == ["namespace", "namespace"]


def test_a_symlinked_node_is_hidden_by_any_identity_and_shown_by_any(admin: Admin) -> None:
    """The Spark path and its Hive table are one node (docs/projection.md#entities-and-identity)."""
    seen = admin.lineage(*HIVE_TABLE)
    admin.hide("dataset", *WAREHOUSE_PATH)  # by the alias
    admin.problem("GET", "/api/v1/lineage", 404, namespace=HIVE_TABLE[0], name=HIVE_TABLE[1])
    admin.unhide("dataset", *HIVE_TABLE)  # by the other identity
    again = admin.lineage(*WAREHOUSE_PATH)  # the same node, named as asked
    assert again["root"] == dataset_id(*WAREHOUSE_PATH)
    assert len(again["nodes"]) == len(seen["nodes"]) and again["edges"] != []
    assert admin.hidden() == []


def test_a_namespace_hides_a_node_only_when_all_its_identities_are_in_hidden_ones(
    admin: Admin,
) -> None:
    admin.hide("namespace", WAREHOUSE_PATH[0])
    seen = admin.lineage(*WAREHOUSE_PATH)  # its Hive table keeps it visible
    admin.hide("namespace", HIVE_TABLE[0])
    detail = admin.problem(
        "GET", "/api/v1/lineage", 404, namespace=WAREHOUSE_PATH[0], name=WAREHOUSE_PATH[1]
    )["detail"]
    assert "hidden" in detail
    admin.unhide("namespace", WAREHOUSE_PATH[0])
    # The same node, asked by the table: named by the path, as the table's namespace is
    # still hidden (docs/queries.md#conventions).
    again = admin.lineage(*HIVE_TABLE)
    assert again["root"] == dataset_id(*WAREHOUSE_PATH) == seen["root"]


def test_hiding_survives_reprojection_and_new_events(admin: Admin) -> None:
    admin.hide("dataset", *REPORT)
    hidden_export = admin.export()
    admin.ingest(dbt_run(30, {"total": [input_field(DBT_ORDERS, "amount", IDENTITY)]}))
    reproject(admin.store)
    admin.problem("GET", "/api/v1/lineage", 404, namespace=REPORT[0], name=REPORT[1])
    ids = [d["id"] for d in orjson.loads(admin.export())["datasets"]]
    assert ids == [d["id"] for d in orjson.loads(hidden_export)["datasets"]]
    assert dataset_id(*REPORT) not in ids
    admin.unhide("dataset", *REPORT)
    assert admin.lineage(*REPORT)["root"] == dataset_id(*REPORT)


def test_the_latest_entry_in_the_log_decides_whatever_the_commit_order(admin: Admin) -> None:
    """PostgreSQL projectors commit out of log order: the hidden table's merge keeps the
    row of the later log position (schema.MERGES["hidden"])."""
    key = ("job", "spark", "daily")
    with admin.store.projection() as tx:
        tx.merge(HiddenRow, [HiddenRow(*key, 0, 20, "2026-11-30T12:00:00Z", None, "later: shown")])
        tx.merge(
            HiddenRow, [HiddenRow(*key, 1, 10, "2026-11-30T11:00:00Z", None, "earlier: hidden")]
        )
    with admin.store.projection() as tx:
        (row,) = tx.select_by(HiddenRow, ("kind", "ns", "name"), [key])
    assert (row.hidden, row.seq) == (0, 20)
    assert ("spark", "daily") in admin.names("/api/v1/jobs", "jobs")


def test_admin_requests_are_checked(admin: Admin) -> None:
    detail = admin.decide("hide", 404, type="dataset", namespace="nowhere", name="x")["detail"]
    assert "nothing to hide" in detail
    admin.decide("hide", 404, type="namespace", namespace="nowhere")
    admin.decide("hide", 400, type="table", namespace="a", name="b")
    admin.decide("hide", 400, type="job", namespace="spark")
    admin.decide("hide", 400, type="namespace", namespace="spark", name="daily")
    admin.decide("hide", 400, type="job", namespace="spark", name="daily", reason="x" * 1001)
    r = admin.client.post("/api/v1/admin/hide", content=b"[")
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    # A body's problem is named as the body's, not a query parameter's.
    assert r.json()["type"].endswith("/bad-body") and r.json()["title"] == "Bad request body"
    assert admin.hidden() == []


def test_an_admin_entry_is_not_replayable(admin: Admin) -> None:
    receipt = admin.hide("job", "spark", "daily")
    delivery = receipt["entries"][0]["delivery_id"]
    view = admin.delivery(delivery)
    assert view["provider_key"] == "embrasure-admin"
    assert view["items"] == [
        {
            "index": 0,
            "kind": "admin",
            "outcome": "projected",
            "reason": None,
            "retriable": False,
            "warnings": [],
        }
    ]
    admin.problem("POST", f"/api/v1/quarantine/{delivery}/0/replay", 409)


def test_the_cli_hides_lists_and_unhides(admin: Admin, db_url: str) -> None:
    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "embrasure", "admin", *args, "--db", db_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = cli("hide", "--type", "job", "--namespace", "spark", "--name", "daily", "--reason", "old")
    assert out == "job spark daily: hidden\n"
    (listed,) = orjson.loads(cli("hidden", "--json"))["hidden"]
    assert listed["name"] == "daily" and listed["reason"] == "old"
    assert ("spark", "daily") not in admin.names("/api/v1/jobs", "jobs")
    assert "job spark daily: shown again" in cli(
        "unhide", "--type", "job", "--namespace", "spark", "--name", "daily"
    )
    assert ("spark", "daily") in admin.names("/api/v1/jobs", "jobs")


def test_a_version_3_database_is_upgraded(client: TestClient, db_url: str) -> None:
    """Migration 4 adds the hidden table to the served graph; 5 backfills the log's
    running totals (log_sql.record_totals), so the backlog of an older log is right; 6
    moves the bodies out of the deliveries rows, and they still read back."""
    api = Admin(client)
    api.ingest(*platform())  # projected
    api.post(*export_events())  # pending
    api.post(export_events()[0], 7)  # one pending item, one rejected on receipt
    # Undo migration 6: the bodies back in the deliveries rows, as received.
    with api.store.reader() as reader:
        seqs = [seq for (seq,) in run_sql(db_url, "SELECT seq FROM deliveries")]
        bodies = [(reader.body(seq), seq) for seq in seqs]
    blob = "BYTEA" if db_url.startswith("postgresql") else "BLOB"
    run_sql(db_url, f"ALTER TABLE deliveries ADD COLUMN body {blob}")
    for body, seq in bodies:
        run_sql(db_url, "UPDATE deliveries SET body = ? WHERE seq = ?", (body, seq))
    for table in (
        "kafka_messages",
        "run_horizon",
        "log_segments",
        "delivery_bodies",
        "log_dictionaries",
        "g1_hidden",
        "g1_tags",
        "delivery_totals",
        "grants",
        "server_secrets",
        "delivery_writers",
        "subscriptions",
        "notifications",
        "sessions",
    ):
        run_sql(db_url, f"DROP TABLE {table}")
    run_sql(db_url, "DELETE FROM embrasure_schema WHERE version > 3")
    if db_url.startswith("sqlite:///"):  # version 3 had the graph in the log's file
        as_one_sqlite_file(db_url.removeprefix("sqlite:///"), record=False)
    store = open_store(db_url, upgrade=True)
    try:
        assert store.schema_version() == migrations.LATEST  # type: ignore[attr-defined]
        with store.reader() as reader:
            assert reader.rows(HiddenRow) == []
            assert reader.rows(TagRow) == []  # migration 12 made the table
            pending, items, oldest, rejected = reader.backlog()
        assert store.grants() == []  # and 13 the grants
        assert (pending, items, rejected) == (2, len(export_events()) + 1, 0)
        assert oldest is not None
        with store.reader() as reader:
            assert [(reader.body(seq), seq) for seq in seqs] == bodies
    finally:
        store.close()
    api.hide("job", "spark", "daily")  # the upgraded database is served as usual
    with api.store.reader() as reader:
        assert reader.backlog()[:2] == (0, 0)


def test_dbt_column_edges_come_back_when_the_job_is_shown(admin: Admin) -> None:
    lineage = admin.columns(*DBT_REPORT, "total", direction="upstream")
    assert {(e["job"], e["class"]) for e in lineage["edges"]} == {(DBT_JOB, "aggregate")}
    admin.hide("job", *DBT_JOB.split(":")[1:])
    assert admin.columns(*DBT_REPORT, "total", direction="upstream")["edges"] == []
    admin.unhide("job", *DBT_JOB.split(":")[1:])
    assert admin.columns(*DBT_REPORT, "total", direction="upstream") == lineage


def test_child_runs_of_hidden_jobs_are_left_out(client: TestClient) -> None:
    api = Admin(client)
    dag_run, extract, load = run_id(41), run_id(42), run_id(43)
    ref = {"run": {"runId": dag_run}, "job": {"namespace": "airflow", "name": "etl"}}
    parent = facet("ParentRunFacet", "1-1-0", AIRFLOW, **ref, root=ref)

    def task(name: str, run: str) -> dict[str, Any]:
        facets = {"parent": parent}
        return run_event("COMPLETE", name, run, at(9), run_facets=facets, namespace="airflow")

    api.ingest(
        run_event("START", "etl", dag_run, at(8), namespace="airflow"),
        task("etl.extract", extract),
        task("etl.load", load),
    )
    children = f"/api/v1/runs/{dag_run}/children"
    assert [r["runId"] for r in api.get(children)["runs"]] == [extract, load]
    api.hide("job", "airflow", "etl.extract")
    assert [r["runId"] for r in api.get(children)["runs"]] == [load]
    api.hide("job", "airflow", "etl")
    assert "hidden" in api.problem("GET", children, 404)["detail"]
