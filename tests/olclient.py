"""Events built with the real openlineage-python client's own classes (event_v2 and
facet_v2, as an integration would build them), and helpers for tests that run that
client against a live server (tests/test_producers_*.py).

The pipeline: a scheduler's DAG run ``daily_dag`` is the parent (and root) of two runs of
the job ``orders_daily``: one completes (START, RUNNING, COMPLETE), one fails with an
error. The job reads a PostgreSQL table and writes an S3 path that its symlinks facet
names as the warehouse table ``analytics.orders_daily``, with column lineage. A JobEvent
declares the job's design-time input and output; a DatasetEvent describes the source
table's schema.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    parent_run,
    schema_dataset,
    sql_job,
    symlinks_dataset,
)
from openlineage.client.transport import Transport

Event = RunEvent | JobEvent | DatasetEvent

PRODUCER = "https://example.com/embrasure-tests/pipeline"
SOURCE_NS, SOURCE = "postgres://db.example.com:5432", "shop.public.orders"
LAKE_NS, LAKE_PATH = "s3://warehouse", "orders_daily"
TABLE_NS, TABLE = "hive://metastore.example.com:9083", "analytics.orders_daily"
JOB_NS, JOB = "etl", "orders_daily"
DAG_NS, DAG = "scheduler", "daily_dag"
DAG_RUN = "01943c00-0000-7000-8000-00000000d000"
GOOD_RUN = "01943c00-0000-7000-8000-00000000a001"
BAD_RUN = "01943c00-0000-7000-8000-00000000a002"
SQL = "INSERT INTO analytics.orders_daily SELECT id, sum(amount) FROM orders GROUP BY id"
ERROR = "division by zero in orders_daily.total"


def at(minute: int) -> str:
    return f"2026-11-30T09:{minute:02d}:00Z"


def _parent() -> parent_run.ParentRunFacet:
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=DAG_RUN),
        job=parent_run.Job(namespace=DAG_NS, name=DAG),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=DAG_RUN),
            job=parent_run.RootJob(namespace=DAG_NS, name=DAG),
        ),
    )


def _schema(*fields: tuple[str, str]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields]
    )


def _source(transformation: tuple[str, str], field: str) -> Any:
    kind = column_lineage_dataset
    return kind.InputField(
        namespace=SOURCE_NS,
        name=SOURCE,
        field=field,
        transformations=[kind.Transformation(type=transformation[0], subtype=transformation[1])],
    )


def _output() -> OutputDataset:
    kind = column_lineage_dataset
    lineage = kind.ColumnLineageDatasetFacet(
        fields={
            "order_id": kind.Fields(inputFields=[_source(("DIRECT", "IDENTITY"), "id")]),
            "total": kind.Fields(
                inputFields=[
                    _source(("DIRECT", "AGGREGATION"), "amount"),
                    _source(("INDIRECT", "GROUP_BY"), "id"),
                ]
            ),
        }
    )
    symlinks = symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace=TABLE_NS, name=TABLE, type="TABLE")]
    )
    return OutputDataset(
        namespace=LAKE_NS,
        name=LAKE_PATH,
        facets={
            "schema": _schema(("order_id", "BIGINT"), ("total", "DECIMAL")),
            "columnLineage": lineage,
            "symlinks": symlinks,
        },
    )


def _job() -> Job:
    return Job(
        namespace=JOB_NS,
        name=JOB,
        facets={
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="PYTHON", jobType="TASK"
            ),
            "sql": sql_job.SQLJobFacet(query=SQL, dialect="postgres"),
        },
    )


def _run_event(state: RunState, run_id: str, minute: int, **run_facets: Any) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=at(minute),
        run=Run(runId=run_id, facets={"parent": _parent(), **run_facets}),
        job=_job(),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=SOURCE_NS, name=SOURCE)],
        outputs=[_output()],
    )


def pipeline_events() -> list[Event]:
    """Every kind of event and the facets DESIGN §3 reads, in the order a producer sends
    them: 10 events."""
    error = error_message_run.ErrorMessageRunFacet(message=ERROR, programmingLanguage="python")
    dag = Job(namespace=DAG_NS, name=DAG)
    return [
        DatasetEvent(
            eventTime=at(0),
            producer=PRODUCER,
            dataset=StaticDataset(
                namespace=SOURCE_NS,
                name=SOURCE,
                facets={"schema": _schema(("id", "BIGINT"), ("amount", "DECIMAL"))},
            ),
        ),
        JobEvent(
            eventTime=at(0),
            producer=PRODUCER,
            job=_job(),
            inputs=[InputDataset(namespace=SOURCE_NS, name=SOURCE)],
            outputs=[OutputDataset(namespace=LAKE_NS, name=LAKE_PATH)],
        ),
        RunEvent(
            eventType=RunState.START,
            eventTime=at(1),
            run=Run(runId=DAG_RUN),
            job=dag,
            producer=PRODUCER,
        ),
        _run_event(RunState.START, GOOD_RUN, 2),
        _run_event(RunState.RUNNING, GOOD_RUN, 3),
        _run_event(RunState.COMPLETE, GOOD_RUN, 5),
        _run_event(RunState.START, BAD_RUN, 6),
        _run_event(RunState.FAIL, BAD_RUN, 7, errorMessage=error),
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=at(8),
            run=Run(runId=DAG_RUN),
            job=dag,
            producer=PRODUCER,
        ),
    ]


def client(transport: Transport) -> OpenLineageClient:
    """A client that adds nothing of its own to the events: no sourceCodeLocation from a
    git checkout, no environment variables or tags (an OPENLINEAGE__ setting of the
    machine could add them; tests clear those with ``clean_environment``)."""
    return OpenLineageClient(
        transport=transport,
        config={"facets": {"source_code_location": {"disabled": True}}},
    )


def clean_environment(monkeypatch: Any, tmp_path: Any) -> None:
    """No openlineage.yml or OPENLINEAGE_* setting of the machine reaches the client."""
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def wait_projected(http: httpx.Client, deliveries: int, timeout: float = 60) -> None:
    """Wait until ``deliveries`` deliveries are stored and the newest is projected (the
    projector follows the log in order, so every earlier one is too)."""
    deadline = time.monotonic() + timeout
    while True:
        page = http.get("/api/v1/deliveries", params={"limit": 1000}).json()["deliveries"]
        if len(page) >= deliveries and page[0]["state"] != "accepted":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not projected after {timeout} s: {page[:3]}")
        time.sleep(0.05)
