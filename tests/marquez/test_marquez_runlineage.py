"""Marquez's ``GET /api/v1/runlineage/upstream`` (embrasure/marquez/runlineage.py,
docs/marquez.md#run-lineage), on both backends."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from embrasure.marquez.model import dataset_version

from graph_api import CRM, CUSTOMERS, ORDERS, RAW, Api, platform, run_id


def upstream(marquez: TestClient, status: int = 200, **params: Any) -> Any:
    r = marquez.get("/api/v1/runlineage/upstream", params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_the_runs_upstream_of_a_run(api: Api, marquez: TestClient) -> None:
    api.ingest(*platform())
    runs = upstream(marquez, runId=run_id(3))["runs"]
    assert [(r["job"]["name"], r["run"]["id"]) for r in runs] == [
        ("daily", run_id(3)),
        ("ingest", run_id(1)),
        ("sync_crm", run_id(2)),
    ]
    daily = runs[0]
    assert daily["run"]["status"] == "COMPLETED"
    assert daily["inputs"] == [
        {
            "namespace": CUSTOMERS[0],
            "name": CUSTOMERS[1],
            "version": dataset_version(*CUSTOMERS, run_id(2)),
            "producedByRunId": run_id(2),
        },
        {
            "namespace": ORDERS[0],
            "name": ORDERS[1],
            "version": dataset_version(*ORDERS, run_id(1)),
            "producedByRunId": run_id(1),
        },
    ]
    ingest = runs[1]
    assert ingest["inputs"] == [
        {
            "namespace": RAW[0],
            "name": RAW[1],
            "version": dataset_version(*RAW, ""),
            "producedByRunId": None,
        }
    ]
    assert {i["name"] for i in runs[2]["inputs"]} == {CRM[1]}
    assert [r["run"]["id"] for r in upstream(marquez, runId=run_id(3), depth=0)["runs"]] == [
        run_id(3)
    ]
    assert upstream(marquez, 404, runId=run_id(99))["code"] == 404
    assert upstream(marquez, 400, runId="not-a-uuid")["code"] == 400
