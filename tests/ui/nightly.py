"""What each run did, for the browser tests (docs/ui.md#what-each-run-did): a nightly Spark
load whose writes carry outputStatistics and a schema that changes, a dbt test that checks
each write (dataQualityAssertions, dataQualityMetrics) and fails on the last night, and on
that night an Airflow DAG run whose four tasks end in four states.

The facet values are the corpus's shapes (/spec-tests OutputStatisticsOutputDatasetFacet,
DataQualityAssertionsDatasetFacet, DataQualityMetricsInputDatasetFacet; the dbt
structured-log integration's failed test, which puts dataQualityAssertions among the
dataset facets), with this platform's numbers.
"""

from __future__ import annotations

from typing import Any

NS = "ui-tests"
LAKE = "s3://quality"
RAW = "raw/orders"
TABLE = "orders/nightly"
REPORT = "reports/orders"
LOAD, CHECK, REPORT_JOB, PUBLISH, DAG = (
    "nightly_orders",
    "check_nightly_orders",
    "orders_report",
    "publish_orders",
    "nightly_dag",
)
NIGHTS = ["2026-01-07", "2026-01-08", "2026-01-09", "2026-01-10"]
NIGHTS += ["2026-01-11", "2026-01-12", "2026-01-13", "2026-01-14"]
ROWS = [1200, 1350, 1280, 1420, 1390, 0, 1510, 1475]  # night 5 wrote nothing
ZERO_NIGHT = 5
CURRENCY_NIGHT = 4  # adds `currency`
DECIMAL_NIGHT = 6  # `amount` int → decimal(10,2)
DBT_SHAPE_NIGHT = 5  # the check sends its assertions as a dataset facet, as dbt's did
LAST = len(NIGHTS) - 1
FAILED = ("not_null", "amount")  # the last night's failed assertion
DBT_FAILED = ("accepted_values", "currency")
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/spark"
DBT = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"


def run_id(job: str, night: int) -> str:
    n = {LOAD: 1, CHECK: 2, REPORT_JOB: 3, PUBLISH: 4, DAG: 5}[job]
    return f"01943b00-0000-7000-9000-{n:04x}{night:08x}"


def _facet(schema: str, version: str, producer: str = SPARK, **fields: Any) -> dict[str, Any]:
    url = f"https://openlineage.io/spec/facets/{version}/{schema}.json#/$defs/{schema}"
    return {"_producer": producer, "_schemaURL": url, **fields}


def _schema(night: int) -> dict[str, Any]:
    amount = "decimal(10,2)" if night >= DECIMAL_NIGHT else "int"
    fields = [{"name": "order_id", "type": "string"}, {"name": "amount", "type": amount}]
    if night >= CURRENCY_NIGHT:
        fields.append({"name": "currency", "type": "string"})
    return _facet("SchemaDatasetFacet", "1-2-0", fields=fields)


def _event(
    kind: str,
    job: str,
    night: int,
    clock: str,
    producer: str,
    *,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    facets = dict(run_facets or {})
    if night == LAST and job != DAG:  # the DAG run's tasks name it as parent
        parent = {"runId": run_id(DAG, night)}
        facets["parent"] = _facet(
            "ParentRunFacet",
            "1-1-0",
            AIRFLOW,
            run=parent,
            job={"namespace": NS, "name": DAG},
            root={"run": parent, "job": {"namespace": NS, "name": DAG}},
        )
    return {
        "eventType": kind,
        "eventTime": f"{NIGHTS[night]}T{clock}Z",
        "producer": producer,
        "schemaURL": f"{CORE}#/$defs/RunEvent",
        "run": {"runId": run_id(job, night), "facets": facets},
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": inputs or [],
        "outputs": outputs or [],
    }


def _write(night: int) -> dict[str, Any]:
    rows = ROWS[night]
    statistics = _facet(
        "OutputStatisticsOutputDatasetFacet",
        "1-0-2",
        rowCount=rows,
        size=rows * 1748,
        fileCount=(rows + 499) // 500,
    )
    return {
        "namespace": LAKE,
        "name": TABLE,
        "facets": {"schema": _schema(night)},
        "outputFacets": {"outputStatistics": statistics},
    }


def _checked(night: int) -> dict[str, Any]:
    failed = night == LAST
    assertions = [
        {"assertion": "not_null", "column": "order_id", "success": True},
        {"assertion": "unique", "column": "order_id", "success": True},
        {"assertion": FAILED[0], "column": FAILED[1], "success": not failed},
    ]
    metrics = _facet(
        "DataQualityMetricsInputDatasetFacet",
        "1-0-3",
        DBT,
        rowCount=ROWS[night],
        columnMetrics={"amount": {"nullCount": 3 if failed else 0, "min": 1, "max": 1500}},
    )
    read: dict[str, Any] = {"namespace": LAKE, "name": TABLE, "facets": {}}
    if night == DBT_SHAPE_NIGHT:
        read["facets"]["dataQualityAssertions"] = _facet(
            "DataQualityAssertionsDatasetFacet",
            "1-0-1",
            DBT,
            assertions=[{"assertion": DBT_FAILED[0], "success": False, "column": DBT_FAILED[1]}],
        )
    else:
        read["inputFacets"] = {
            "dataQualityAssertions": _facet(
                "DataQualityAssertionsDatasetFacet", "1-1-0", DBT, assertions=assertions
            ),
            "dataQualityMetrics": metrics,
        }
    return read


def events() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    raw = [{"namespace": LAKE, "name": RAW}]
    for night in range(len(NIGHTS)):
        out.append(_event("START", LOAD, night, "01:00:00", SPARK, inputs=raw))
        end = f"01:{5 + night:02d}:30"
        out.append(_event("COMPLETE", LOAD, night, end, SPARK, inputs=raw, outputs=[_write(night)]))
        failed = night in (LAST, DBT_SHAPE_NIGHT)
        out.append(_event("START", CHECK, night, "01:20:00", DBT))
        error = {
            "errorMessage": _facet(
                "ErrorMessageRunFacet",
                "1-0-1",
                DBT,
                message="Got 3 results, configured to fail if != 0",
                programmingLanguage="sql",
            )
        }
        out.append(
            _event(
                "FAIL" if failed else "COMPLETE",
                CHECK,
                night,
                "01:22:00",
                DBT,
                inputs=[_checked(night)],
                run_facets=error if failed else None,
            )
        )
    night = LAST
    table = [{"namespace": LAKE, "name": TABLE}]
    report = [{"namespace": LAKE, "name": REPORT}]
    out.append(_event("START", DAG, night, "00:55:00", AIRFLOW))
    out.append(_event("START", REPORT_JOB, night, "01:30:00", SPARK, inputs=table, outputs=report))
    out.append(_event("ABORT", REPORT_JOB, night, "01:40:00", SPARK))
    out.append(_event("START", PUBLISH, night, "01:45:00", AIRFLOW, inputs=report))
    return out
