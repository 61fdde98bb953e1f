"""Marquez's sources on the Marquez port (embrasure/marquez/sources.py,
docs/marquez.md#sources-and-tags): a source per ``dataSource`` facet name (the key
OpenLineage and Marquez give DatasourceDatasetFacet), else ``default``, as Marquez
names them, so that every dataset's ``sourceName`` is a source; on both backends."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.testclient import TestClient

from graph_api import ORDERS, REPORT, Api, at, dataset_event, ds, facet, run_event, run_id

LAKE = ("s3://lake", "raw/orders")
SPARK_TMP = ("file", "/tmp/report")


def datasource(name: str, uri: str | None = None) -> dict[str, Any]:
    fields = {"name": name} | ({"uri": uri} if uri else {})
    return facet("DatasourceDatasetFacet", "1-0-0", **fields)


def load(api: Api) -> None:
    """orders and the report in postgres://db:5432, the first naming its source; a
    lake file and a local file, neither naming one."""
    api.ingest(
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[
                ds(*ORDERS, dataSource=datasource("shop", "postgres://db:5432/shop")),
                ds(*LAKE),
            ],
            outputs=[ds(*REPORT), ds(*SPARK_TMP)],
        )
    )


def get(marquez: TestClient, url: str, status: int = 200) -> Any:
    r = marquez.get(url)
    assert r.status_code == status, r.text
    return r.json()


def test_sources_are_the_data_source_facets_and_default(api: Api, marquez: TestClient) -> None:
    load(api)
    sources = get(marquez, "/api/v1/sources")["sources"]
    assert [(s["name"], s["type"], s["connectionUrl"]) for s in sources] == [
        ("default", "DEFAULT", ""),  # the lake's, the report's and the local file's
        ("shop", "POSTGRES", "postgres://db:5432/shop"),
    ]
    assert all(s["createdAt"] and s["updatedAt"] and s["description"] is None for s in sources)
    assert get(marquez, "/api/v1/sources/shop") == sources[-1]
    assert get(marquez, "/api/v1/sources/default")["connectionUrl"] == ""
    assert get(marquez, "/api/v1/sources?limit=1&offset=1")["sources"] == sources[1:]
    ns = quote(ORDERS[0], safe="")
    assert get(marquez, f"/api/v1/namespaces/{ns}/datasets/{ORDERS[1]}")["sourceName"] == "shop"
    missing = get(marquez, "/api/v1/sources/nothing", 404)
    assert missing == {"code": 404, "message": "Source 'nothing' not found."}


def test_every_datasets_source_name_is_a_source(api: Api, marquez: TestClient) -> None:
    load(api)
    names = {s["name"] for s in get(marquez, "/api/v1/sources")["sources"]}
    for namespace in get(marquez, "/api/v1/namespaces")["namespaces"]:
        ns = quote(namespace["name"], safe="")
        for dataset in get(marquez, f"/api/v1/namespaces/{ns}/datasets")["datasets"]:
            assert dataset["sourceName"] in names


def test_a_source_goes_with_its_last_shown_dataset(api: Api, marquez: TestClient) -> None:
    load(api)
    api.client.post(
        "/api/v1/admin/hide", json={"type": "dataset", "namespace": ORDERS[0], "name": ORDERS[1]}
    )
    api.project()
    names = [s["name"] for s in get(marquez, "/api/v1/sources")["sources"]]
    assert names == ["default"]
    get(marquez, "/api/v1/sources/shop", 404)


def test_a_source_known_from_a_dataset_event_only_has_times(api: Api, marquez: TestClient) -> None:
    """Marquez's Source has createdAt and updatedAt @NonNull: a source whose datasets no
    edge names (a DatasetEvent's) takes the graph's first and last eventTime."""
    load(api)
    warehouse = datasource("warehouse", "snowflake://acct")
    api.ingest(dataset_event(ds("snowflake://acct", "db.t", dataSource=warehouse), at(10)))
    source = get(marquez, "/api/v1/sources/warehouse")
    assert (source["type"], source["connectionUrl"]) == ("SNOWFLAKE", "snowflake://acct")
    assert source["createdAt"] and source["updatedAt"]
    for s in get(marquez, "/api/v1/sources")["sources"]:
        assert s["createdAt"] and s["updatedAt"], s
