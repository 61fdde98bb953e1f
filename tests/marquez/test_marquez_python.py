"""marquez-python 0.50.0 (PyPI), Marquez's own Python client, against a real `embrasure
serve --marquez-port` over HTTP: every read method it has (docs/marquez.md#clients).

The events reach the server the way a Marquez user's producers send them: POSTed to
the Marquez port's /api/v1/lineage, which ingests as Embrasure's own port does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from marquez_client import MarquezClient, errors

from embrasure.marquez.model import dataset_version, job_version

from conftest import ServerProcess, free_port
from graph_api import (
    ORDERS,
    REPORT,
    at,
    column_lineage,
    ds,
    input_field,
    run_event,
    run_id,
    schema,
    symlinks,
)
from http_client import HTTP
from olclient import wait_projected

pytestmark = pytest.mark.slow


def events() -> list[dict[str, Any]]:
    lineage = column_lineage(
        {"total": [input_field(ORDERS, "amount", ("DIRECT", "AGGREGATION", False))]}
    )
    inputs = [ds(*ORDERS, schema=schema("id", "amount"))]
    outputs = [ds(*REPORT, schema=schema("total"), columnLineage=lineage)]
    return [
        run_event("START", "daily", run_id(1), at(9), inputs=inputs, outputs=outputs),
        run_event("COMPLETE", "daily", run_id(1), at(9, 5), inputs=inputs, outputs=outputs),
        run_event("START", "daily", run_id(2), at(10), inputs=inputs, outputs=outputs),
        run_event("FAIL", "daily", run_id(2), at(10, 1)),
        # A Spark write of an S3 path its Hive table also names (hive:// sorts first).
        run_event("COMPLETE", "load", run_id(3), at(8), outputs=[S3_PATH_WRITE], namespace="lake"),
    ]


S3_PATH, HIVE_TABLE = ("s3://lake", "warehouse/orders"), ("hive://metastore", "db.orders")
S3_PATH_WRITE = ds(*S3_PATH, symlinks=symlinks((*HIVE_TABLE, "TABLE")))


@pytest.fixture(scope="module")
def marquez_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with the Marquez port, loaded through that port: (its URL, the main one)."""
    db: Path = tmp_path_factory.mktemp("marquez") / "embrasure.db"
    port = free_port()
    server = ServerProcess(db, "--marquez-port", str(port)).start()
    url = f"http://127.0.0.1:{port}"
    try:
        for event in events():
            reply = HTTP.post(url + "/api/v1/lineage", json=event)
            assert reply.status_code == 202, reply.text
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_projected(http, len(events()))
        yield url, server.url
    finally:
        server.stop()


@pytest.fixture
def client(marquez_server: tuple[str, str]) -> MarquezClient:
    return MarquezClient(url=marquez_server[0])


def test_namespaces(client: MarquezClient) -> None:
    names = [n["name"] for n in client.list_namespaces()["namespaces"]]
    # The table's namespace is one too: a symlinks facet named it, and Marquez 0.50.0
    # lists it as well (bench/results/peers-marquez-switch.md, "namespaces").
    assert names == sorted({ORDERS[0], "spark", "lake", "default", S3_PATH[0], HIVE_TABLE[0]})
    assert client.get_namespace(ORDERS[0])["name"] == ORDERS[0]  # "postgres://db:5432"
    with pytest.raises(errors.APIError):
        client.get_namespace("nowhere")


def test_datasets_and_their_versions(client: MarquezClient) -> None:
    listed = client.list_datasets(ORDERS[0])
    assert listed["totalCount"] == 2
    assert [d["name"] for d in listed["datasets"]] == sorted([ORDERS[1], REPORT[1]])
    report = client.get_dataset(*REPORT)
    assert [f["name"] for f in report["fields"]] == ["total"]
    assert report["currentVersion"] == dataset_version(*REPORT, run_id(2))
    versions = client.list_dataset_versions(*REPORT)
    assert versions["totalCount"] == 2
    assert [v["createdByRun"]["id"] for v in versions["versions"]] == [run_id(2), run_id(1)]
    one = client.get_dataset_version(*REPORT, dataset_version(*REPORT, run_id(1)))
    assert one["createdByRun"]["state"] == "COMPLETED"


def test_a_symlinked_path_under_its_own_name(client: MarquezClient) -> None:
    """docs/marquez.md#symlinks: list_datasets and get_dataset answer the path as the
    job wrote it, though the table's identity sorts first."""
    listed = client.list_datasets(S3_PATH[0])
    assert listed["totalCount"] == 1
    [dataset] = listed["datasets"]
    assert dataset["id"] == {"namespace": S3_PATH[0], "name": S3_PATH[1]}
    got = client.get_dataset(*S3_PATH)
    assert (got["namespace"], got["name"], got["physicalName"]) == (*S3_PATH, S3_PATH[1])
    assert got["currentVersion"] == dataset["currentVersion"]


def test_jobs_and_runs(client: MarquezClient) -> None:
    job = client.get_job("spark", "daily")
    assert job["latestRun"]["id"] == run_id(2)
    assert job["latestRun"]["state"] == "FAILED"
    assert job["currentVersion"] == job_version("spark", "daily", [ORDERS], [REPORT])
    assert client.list_jobs("spark")["jobs"] == [job]
    runs = client.list_job_runs("spark", "daily")
    assert [(r["id"], r["state"]) for r in runs["runs"]] == [
        (run_id(2), "FAILED"),
        (run_id(1), "COMPLETED"),
    ]
    run = client.get_job_run(run_id(1))
    assert run["durationMs"] == 300_000
    assert run["outputDatasetVersions"][0]["datasetVersionId"]["version"] == dataset_version(
        *REPORT, run_id(1)
    )


def test_column_lineage(client: MarquezClient) -> None:
    by_field = client.get_column_lineage_by_dataset_field(*REPORT, "total")
    ids = {node["id"] for node in by_field["graph"]}
    assert f"datasetField:{REPORT[0]}:{REPORT[1]}:total" in ids
    assert f"datasetField:{ORDERS[0]}:{ORDERS[1]}:amount" in ids
    by_dataset = client.get_column_lineage_by_dataset(*REPORT)
    assert {node["id"] for node in by_dataset["graph"]} >= ids
    by_job = client.get_column_lineage_by_job("spark", "daily")
    assert {node["id"] for node in by_job["graph"]} >= ids


def test_tags_sources_and_events(client: MarquezClient) -> None:
    assert isinstance(client.list_tags()["tags"], list)
    sources = client.list_sources()["sources"]
    assert "default" in {s["name"] for s in sources}  # datasets without a dataSource facet
    assert client.get_source("default")["connectionUrl"] == ""
    # list_events asks for /api/v1/events, which Marquez 0.50 does not serve either (its
    # events are at /events/lineage): the same 404, raised as the client's APIError.
    with pytest.raises(errors.APIError):
        client.list_events()
