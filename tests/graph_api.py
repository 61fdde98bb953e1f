"""Event builders and a thin client for the read API's tests (tests/query/, tests/web/):
realistic OpenLineage 2-0-2 events posted to the in-process app, projected
deterministically with ``Projector(store).run_until_caught_up()``, read back over HTTP
(docs/projection.md, docs/queries.md say what the answers mean).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.testclient import TestClient

from embrasure.projector.worker import Projector

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
    """Every page of a cursor-paginated listing (docs/queries.md#conventions)."""
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


# -- symlinks and renames --------------------------------------------------------------

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


# -- lineage walks: a small platform ---------------------------------------------------

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


# -- column lineage --------------------------------------------------------------------

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


# -- the export: one event set covering every entity kind ------------------------------


def export_events() -> list[Event]:
    """A bit of everything: runs, a symlink, a service, a DatasetEvent, column lineage."""
    return [
        *platform(),
        spark_writes_path(),
        spark_reads_table(),
        dataset_event(ds(*ORDERS, schema=schema("id", "amount")), at(7)),
        dbt_run(7, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}),
    ]
