"""`embrasure demo`: a small sample platform, as the OpenLineage 2-0-2 events its tools
would send, so that a new user sees a graph at once (docs/cli.md).

One night of an order-analytics platform:

- Airflow runs the DAG ``orders_daily`` with three tasks, each run naming the DAG run as
  its parent and root (ParentRunFacet 1-2-0): ``extract_orders`` copies the shop's
  PostgreSQL orders to S3, ``clean_orders`` submits a Spark job, ``dbt_build`` runs dbt.
- Spark (``orders_clean``, a child of the clean_orders task) reads the raw orders and
  writes ``s3://demo-lake/warehouse/orders_clean``, which its symlinks facet names as the
  metastore TABLE ``analytics.orders_clean``: the path and the table are one node.
- dbt builds three models with column lineage: ``customers_masked`` hashes the e-mail
  (a masking transformation), ``customer_orders`` joins orders to customers (INDIRECT
  JOIN), ``daily_revenue`` sums by day (AGGREGATION, INDIRECT GROUP_BY).
- A revenue dashboard reads two of the models: a service, declared by a JobEvent with
  inputs only (and its jobType facet).

Every value is fixed (run ids, times), so the events are the same bytes each time:
loading the demo twice stores nothing new (the receiver's duplicates).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from embrasure.cli.event_files import Item

CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/spark"
DBT = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt"
DASHBOARDS = "https://embrasure.dev/demo/dashboards"
DAY = "2026-01-15"
PROVIDER_KEY = "embrasure-demo"

AIRFLOW_NS = "demo-airflow"
SPARK_NS = "demo-spark"
DBT_NS = "demo-dbt"
DASHBOARD_NS = "demo-dashboards"
SHOP_DB = "postgres://shop-db.demo:5432"
RAW = "s3://demo-raw"
LAKE = "s3://demo-lake"
WAREHOUSE = "hive://metastore.demo:9083"

DAG = "orders_daily"
TASKS = ("orders_daily.extract_orders", "orders_daily.clean_orders", "orders_daily.dbt_build")
SPARK_JOB = "orders_clean"
SPARK_PATH = "warehouse/orders_clean"
TABLE = "analytics.orders_clean"
CUSTOMERS = "analytics.customers"
MODELS = ("analytics.customers_masked", "analytics.customer_orders", "analytics.daily_revenue")
DASHBOARD = "revenue_dashboard"

Event = dict[str, Any]


def _run_id(n: int) -> str:
    return str(uuid.UUID(f"01943c00-0000-7000-8000-{n:012x}"))


def _at(hour: int, minute: int) -> str:
    return f"{DAY}T{hour:02d}:{minute:02d}:00Z"


def _facet(name: str, version: str, producer: str, /, **fields: Any) -> dict[str, Any]:
    url = f"https://openlineage.io/spec/facets/{version}/{name}.json#/$defs/{name}"
    return {"_producer": producer, "_schemaURL": url, **fields}


def _job_type(producer: str, processing: str, integration: str, kind: str) -> dict[str, Any]:
    return _facet(
        "JobTypeJobFacet",
        "2-0-4",
        producer,
        processingType=processing,
        integration=integration,
        jobType=kind,
    )


def _schema(producer: str, *fields: tuple[str, str]) -> dict[str, Any]:
    return _facet(
        "SchemaDatasetFacet",
        "1-2-0",
        producer,
        fields=[{"name": n, "type": t} for n, t in fields],
    )


def _dataset(namespace: str, name: str, **facets: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": namespace, "name": name}
    if facets:
        out["facets"] = facets
    return out


def _parent(producer: str, run: int, task: str) -> dict[str, Any]:
    """The Airflow run that started this one; the root is always the DAG run (run 1)."""
    return _facet(
        "ParentRunFacet",
        "1-2-0",
        producer,
        run={"runId": _run_id(run)},
        job={"namespace": AIRFLOW_NS, "name": task},
        root={"run": {"runId": _run_id(1)}, "job": {"namespace": AIRFLOW_NS, "name": DAG}},
    )


def _run_events(
    producer: str,
    namespace: str,
    job: str,
    run: int,
    span: tuple[str, str],
    *,
    job_facets: dict[str, Any],
    run_facets: dict[str, Any] | None = None,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
) -> list[Event]:
    """A run's START and COMPLETE; datasets with their facets on COMPLETE, as
    integrations send the full picture when the run ends."""
    events = []
    for event_type, time in zip(("START", "COMPLETE"), span, strict=True):
        event: Event = {
            "eventType": event_type,
            "eventTime": time,
            "producer": producer,
            "schemaURL": f"{CORE}#/$defs/RunEvent",
            "run": {"runId": _run_id(run), "facets": run_facets or {}},
            "job": {"namespace": namespace, "name": job, "facets": job_facets},
            "inputs": [_dataset(d["namespace"], d["name"]) for d in inputs or []],
            "outputs": [_dataset(d["namespace"], d["name"]) for d in outputs or []],
        }
        if event_type == "COMPLETE":
            event["inputs"] = inputs or []
            event["outputs"] = outputs or []
        events.append(event)
    return events


def _field(namespace: str, name: str, field: str, kind: str, subtype: str, **extra: Any) -> Any:
    return {
        "namespace": namespace,
        "name": name,
        "field": field,
        "transformations": [{"type": kind, "subtype": subtype, **extra}],
    }


def _identity(name: str, field: str) -> dict[str, Any]:
    return {"inputFields": [_field(WAREHOUSE, name, field, "DIRECT", "IDENTITY")]}


def _column_lineage(fields: dict[str, Any], dataset: list[Any] | None = None) -> dict[str, Any]:
    facet = _facet("ColumnLineageDatasetFacet", "1-2-0", DBT, fields=fields)
    if dataset:
        facet["dataset"] = dataset
    return facet


def _airflow() -> list[Event]:
    dag_type = _job_type(AIRFLOW, "BATCH", "AIRFLOW", "DAG")
    task_type = _job_type(AIRFLOW, "BATCH", "AIRFLOW", "TASK")
    orders = _dataset(
        SHOP_DB,
        "shop.public.orders",
        schema=_schema(
            AIRFLOW, ("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "numeric")
        ),
    )
    raw_orders = _dataset(RAW, "orders")
    events = _run_events(
        AIRFLOW, AIRFLOW_NS, DAG, 1, (_at(2, 0), _at(2, 50)), job_facets={"jobType": dag_type}
    )
    spans = ((_at(2, 1), _at(2, 10)), (_at(2, 11), _at(2, 30)), (_at(2, 31), _at(2, 49)))
    extra: tuple[dict[str, Any], ...] = ({"inputs": [orders], "outputs": [raw_orders]}, {}, {})
    for n, (task, span, io) in enumerate(zip(TASKS, spans, extra, strict=True)):
        events += _run_events(
            AIRFLOW,
            AIRFLOW_NS,
            task,
            2 + n,
            span,
            job_facets={"jobType": task_type},
            run_facets={"parent": _parent(AIRFLOW, 1, DAG)},
            **io,
        )
    return events


def _spark() -> list[Event]:
    columns = (
        ("order_id", "bigint"),
        ("customer_id", "bigint"),
        ("amount", "decimal(12,2)"),
        ("order_date", "date"),
    )
    output = _dataset(
        LAKE,
        SPARK_PATH,
        schema=_schema(SPARK, *columns),
        symlinks=_facet(
            "SymlinksDatasetFacet",
            "1-0-1",
            SPARK,
            identifiers=[{"namespace": WAREHOUSE, "name": TABLE, "type": "TABLE"}],
        ),
    )
    # What the run wrote (OutputStatisticsOutputDatasetFacet 1-0-2), as openlineage-spark
    # reports it on COMPLETE: `embrasure dataset-runs` and the dataset page show it.
    written = _facet(
        "OutputStatisticsOutputDatasetFacet",
        "1-0-2",
        SPARK,
        rowCount=1_284_210,
        size=96_468_992,
        fileCount=12,
    )
    output = {**output, "outputFacets": {"outputStatistics": written}}
    return _run_events(
        SPARK,
        SPARK_NS,
        SPARK_JOB,
        5,
        (_at(2, 12), _at(2, 29)),
        job_facets={"jobType": _job_type(SPARK, "BATCH", "SPARK", "JOB")},
        run_facets={"parent": _parent(SPARK, 3, TASKS[1])},
        inputs=[_dataset(RAW, "orders")],
        outputs=[output],
    )


def _dbt() -> list[Event]:
    model_type = _job_type(DBT, "BATCH", "DBT", "MODEL")
    customers_masked, customer_orders, daily_revenue = MODELS
    customers = _dataset(
        WAREHOUSE,
        CUSTOMERS,
        schema=_schema(DBT, ("customer_id", "bigint"), ("email", "string"), ("country", "string")),
    )
    masked = _dataset(
        WAREHOUSE,
        customers_masked,
        schema=_schema(
            DBT, ("customer_id", "bigint"), ("email_hash", "string"), ("country", "string")
        ),
        columnLineage=_column_lineage(
            {
                "customer_id": _identity(CUSTOMERS, "customer_id"),
                "email_hash": {
                    "inputFields": [
                        _field(
                            WAREHOUSE,
                            CUSTOMERS,
                            "email",
                            "DIRECT",
                            "TRANSFORMATION",
                            description="sha2(lower(email), 256)",
                            masking=True,
                        )
                    ]
                },
                "country": _identity(CUSTOMERS, "country"),
            }
        ),
    )
    joined = _dataset(
        WAREHOUSE,
        customer_orders,
        schema=_schema(
            DBT,
            ("order_id", "bigint"),
            ("order_date", "date"),
            ("amount", "decimal(12,2)"),
            ("customer_id", "bigint"),
            ("email_hash", "string"),
        ),
        columnLineage=_column_lineage(
            {
                "order_id": _identity(TABLE, "order_id"),
                "order_date": _identity(TABLE, "order_date"),
                "amount": _identity(TABLE, "amount"),
                "customer_id": _identity(TABLE, "customer_id"),
                "email_hash": _identity(customers_masked, "email_hash"),
            },
            [
                _field(WAREHOUSE, TABLE, "customer_id", "INDIRECT", "JOIN"),
                _field(WAREHOUSE, customers_masked, "customer_id", "INDIRECT", "JOIN"),
            ],
        ),
    )
    revenue = _dataset(
        WAREHOUSE,
        daily_revenue,
        schema=_schema(
            DBT, ("order_date", "date"), ("revenue", "decimal(14,2)"), ("customers", "bigint")
        ),
        columnLineage=_column_lineage(
            {
                "order_date": _identity(customer_orders, "order_date"),
                "revenue": {
                    "inputFields": [
                        _field(
                            WAREHOUSE,
                            customer_orders,
                            "amount",
                            "DIRECT",
                            "AGGREGATION",
                            description="sum(amount)",
                        )
                    ]
                },
                "customers": {
                    "inputFields": [
                        _field(
                            WAREHOUSE,
                            customer_orders,
                            "customer_id",
                            "DIRECT",
                            "AGGREGATION",
                            description="count(distinct customer_id)",
                        )
                    ]
                },
            },
            [_field(WAREHOUSE, customer_orders, "order_date", "INDIRECT", "GROUP_BY")],
        ),
    )
    models = (
        (customers_masked, [customers], masked, (_at(2, 32), _at(2, 35))),
        (
            customer_orders,
            [_dataset(WAREHOUSE, TABLE), _dataset(WAREHOUSE, customers_masked)],
            joined,
            (_at(2, 36), _at(2, 41)),
        ),
        (daily_revenue, [_dataset(WAREHOUSE, customer_orders)], revenue, (_at(2, 42), _at(2, 48))),
    )
    events = []
    for n, (model, inputs, output, span) in enumerate(models):
        events += _run_events(
            DBT,
            DBT_NS,
            f"demo_shop.{model.split('.')[-1]}",
            6 + n,
            span,
            job_facets={"jobType": model_type},
            run_facets={"parent": _parent(DBT, 4, TASKS[2])},
            inputs=inputs,
            outputs=[output],
        )
    return events


def _dashboard() -> list[Event]:
    return [
        {
            "eventTime": _at(3, 0),
            "producer": DASHBOARDS,
            "schemaURL": f"{CORE}#/$defs/JobEvent",
            "job": {
                "namespace": DASHBOARD_NS,
                "name": DASHBOARD,
                "facets": {"jobType": _job_type(DASHBOARDS, "SERVICE", "SUPERSET", "DASHBOARD")},
            },
            "inputs": [
                _dataset(WAREHOUSE, MODELS[2]),
                _dataset(WAREHOUSE, MODELS[1]),
            ],
        }
    ]


def events() -> list[Event]:
    """The demo's events, in the order the tools would have sent them."""
    out = _airflow() + _spark() + _dbt() + _dashboard()
    return sorted(out, key=lambda e: e["eventTime"])


def items() -> list[Item]:
    """The events as ingest items, each named by its job, with fixed bytes."""
    return as_items(events(), "demo")


def as_items(events: list[Event], label: str) -> list[Item]:
    out = []
    for n, event in enumerate(events):
        raw = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
        what = event["job"]["name"] if "job" in event else event["dataset"]["name"]
        kind = event.get("eventType") or event["schemaURL"].rsplit("/", 1)[-1]
        out.append(Item(f"{label}[{n}] {kind} {what}", raw, event, 0))
    return out
