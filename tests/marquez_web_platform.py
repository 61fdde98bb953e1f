"""The events marquez-web was driven over (bench/peers/marquez_web.py; the recording in
tests/data/marquez_web_requests.json): `embrasure demo`'s platform, and a failed run
of a dbt model, so the UI has a failed run to show."""

from __future__ import annotations

from typing import Any

from embrasure.cli import demo

FAILED_JOB = (demo.DBT_NS, "demo_dbt.model.refunds")
FAILED_RUN = "01943c00-0000-7000-8000-0000000000f1"
DATASET = (demo.WAREHOUSE, demo.CUSTOMERS)  # has fields and column lineage
JOB = (demo.SPARK_NS, "orders_daily.clean_orders.orders_clean")  # its Marquez name


def failed_run() -> list[dict[str, Any]]:
    base: dict[str, Any] = {
        "producer": demo.DBT,
        "schemaURL": f"{demo.CORE}#/$defs/RunEvent",
        "job": {"namespace": FAILED_JOB[0], "name": FAILED_JOB[1]},
        "inputs": [{"namespace": demo.WAREHOUSE, "name": demo.TABLE}],
        "outputs": [{"namespace": demo.WAREHOUSE, "name": "analytics.refunds"}],
    }
    error = {
        "_producer": demo.DBT,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json"
        "#/$defs/ErrorMessageRunFacet",
        "message": 'Database Error in model refunds: column "refund_amount" does not exist',
        "programmingLanguage": "SQL",
    }
    return [
        {
            **base,
            "eventType": "START",
            "eventTime": f"{demo.DAY}T03:40:00Z",
            "run": {"runId": FAILED_RUN, "facets": {}},
        },
        {
            **base,
            "eventType": "FAIL",
            "eventTime": f"{demo.DAY}T03:41:30Z",
            "run": {"runId": FAILED_RUN, "facets": {"errorMessage": error}},
        },
    ]


def events() -> list[dict[str, Any]]:
    return demo.events() + failed_run()
