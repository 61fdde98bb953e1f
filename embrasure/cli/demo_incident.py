"""`embrasure demo --webhook URL`: the demo platform's second night, when things break,
and the subscription that hears of it (docs/notifications.md#a-worked-example).

On 2026-01-16:

- Spark's ``orders_clean`` writes the table without its ``amount`` column (a schema
  change: ``customer_orders.amount`` and ``daily_revenue.revenue`` are made from it);
- the dbt test of ``orders_clean`` finds ``amount`` null (a failed check: the
  ``dataQualityAssertions`` input facet);
- dbt's ``daily_revenue`` model fails on the missing column (a failed run), so the
  dashboard reads yesterday's revenue; the dbt task and the DAG run fail with it.

A catalog sync declares the owners (the ``ownership`` facet) of the warehouse models
and of the dashboard. The demo's subscription watches the table and three datasets
below it, for every kind of notification: these three reach it, once each.
"""

from __future__ import annotations

from typing import Any

from embrasure.cli import demo
from embrasure.cli.demo import (
    AIRFLOW,
    AIRFLOW_NS,
    CORE,
    DAG,
    DASHBOARD,
    DASHBOARD_NS,
    DBT,
    DBT_NS,
    LAKE,
    MODELS,
    RAW,
    SPARK,
    SPARK_NS,
    TABLE,
    TASKS,
    WAREHOUSE,
    Event,
)

DAY = "2026-01-16"
CATALOG = "https://embrasure.dev/demo/catalog-sync"
DEPTH = 3  # the table, the models made from it, and their readers' outputs
WATCHED = f"{WAREHOUSE} {TABLE}"
# The demo's subscription (POST /api/v1/subscriptions, less its url): every kind.
SUBSCRIPTION: dict[str, Any] = {
    "target": "dataset",
    "namespace": WAREHOUSE,
    "name": TABLE,
    "depth": DEPTH,
}
DROPPED = "amount"


def _at(hour: int, minute: int) -> str:
    return f"{DAY}T{hour:02d}:{minute:02d}:00Z"


def _owners(producer: str, kind: str, *names: str) -> dict[str, Any]:
    owners = [{"name": n, "type": "MAINTAINER"} for n in names]
    return demo._facet(f"Ownership{kind}Facet", "1-0-1", producer, owners=owners)


def _run(
    producer: str,
    namespace: str,
    job: str,
    run: int,
    event_type: str,
    time: str,
    **parts: Any,
) -> Event:
    run_facets = parts.pop("run_facets", {})
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": producer,
        "schemaURL": f"{CORE}#/$defs/RunEvent",
        "run": {"runId": demo._run_id(run), "facets": run_facets},
        "job": {"namespace": namespace, "name": job, "facets": {}},
        "inputs": parts.get("inputs", []),
        "outputs": parts.get("outputs", []),
    }


def _failed(producer: str, message: str) -> dict[str, Any]:
    return {
        "errorMessage": demo._facet(
            "ErrorMessageRunFacet", "1-0-1", producer, message=message, programmingLanguage="SQL"
        )
    }


def _catalog() -> list[Event]:
    """The owners, as a catalog sync declares them: DatasetEvents and a JobEvent."""
    team = {TABLE: "team:data-platform"}  # the models are the analytics team's
    models: list[Event] = [
        {
            "eventTime": _at(1, 0),
            "producer": CATALOG,
            "schemaURL": f"{CORE}#/$defs/DatasetEvent",
            "dataset": demo._dataset(
                WAREHOUSE,
                name,
                ownership=_owners(CATALOG, "Dataset", team.get(name, "team:analytics")),
            ),
        }
        for name in (TABLE, *MODELS)
    ]
    dashboard = {
        "eventTime": _at(1, 0),
        "producer": CATALOG,
        "schemaURL": f"{CORE}#/$defs/JobEvent",
        "job": {
            "namespace": DASHBOARD_NS,
            "name": DASHBOARD,
            "facets": {"ownership": _owners(CATALOG, "Job", "alice@demo.example")},
        },
        "inputs": [],
        "outputs": [],
    }
    return [*models, dashboard]


def events() -> list[Event]:
    """The second night's events, in the order the tools would have sent them."""
    parent = demo._parent
    columns = (("order_id", "bigint"), ("customer_id", "bigint"), ("order_date", "date"))
    written = demo._dataset(LAKE, demo.SPARK_PATH, schema=demo._schema(SPARK, *columns))
    checked = demo._dataset(WAREHOUSE, TABLE)
    checked["inputFacets"] = {
        "dataQualityAssertions": demo._facet(
            "DataQualityAssertionsDatasetFacet",
            "1-1-0",
            DBT,
            assertions=[
                {"assertion": "not_null", "success": False, "column": DROPPED},
                {"assertion": "unique", "success": True, "column": "order_id"},
            ],
        )
    }
    revenue = demo._dataset(WAREHOUSE, MODELS[2])
    error = f"Database Error in model daily_revenue: column customer_orders.{DROPPED} missing"
    dag, clean, build = 11, 13, 14
    out = [
        *_catalog(),
        _run(AIRFLOW, AIRFLOW_NS, DAG, dag, "START", _at(2, 0)),
        _run(
            AIRFLOW,
            AIRFLOW_NS,
            TASKS[1],
            clean,
            "START",
            _at(2, 11),
            run_facets={"parent": parent(AIRFLOW, 1, DAG)},
        ),
        _run(
            SPARK,
            SPARK_NS,
            demo.SPARK_JOB,
            15,
            "COMPLETE",
            _at(2, 29),
            inputs=[demo._dataset(RAW, "orders")],
            outputs=[written],
        ),
        _run(AIRFLOW, AIRFLOW_NS, TASKS[1], clean, "COMPLETE", _at(2, 30)),
        _run(
            DBT,
            DBT_NS,
            "demo_shop.test_orders_clean",
            16,
            "COMPLETE",
            _at(2, 33),
            inputs=[checked],
        ),
        _run(DBT, DBT_NS, "demo_shop.daily_revenue", 18, "START", _at(2, 42), outputs=[revenue]),
        _run(
            DBT,
            DBT_NS,
            "demo_shop.daily_revenue",
            18,
            "FAIL",
            _at(2, 43),
            outputs=[revenue],
            run_facets=_failed(DBT, error),
        ),
        _run(
            AIRFLOW,
            AIRFLOW_NS,
            TASKS[2],
            build,
            "FAIL",
            _at(2, 44),
            run_facets=_failed(AIRFLOW, error),
        ),
        _run(AIRFLOW, AIRFLOW_NS, DAG, dag, "FAIL", _at(2, 50), run_facets=_failed(AIRFLOW, error)),
    ]
    return sorted(out, key=lambda e: e["eventTime"])


def items() -> list[Any]:
    """The night's events as ingest items (fixed bytes, as demo.items)."""
    return demo.as_items(events(), "incident")
