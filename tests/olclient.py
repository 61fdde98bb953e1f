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


def completed_run(run_id: str) -> RunEvent:
    """One COMPLETE of the pipeline's job (parent, jobType, sql, schema, symlinks and
    column lineage facets): the benchmark's event, distinct per ``run_id``."""
    return _run_event(RunState.COMPLETE, run_id, 5)


def pipeline_events() -> list[Event]:
    """Every kind of event and the facets the projector reads (docs/projection.md#rules), in
    the order a producer sends them: 9 events."""
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
    """A client that adds to the events only what every 1.54.0 client adds (a ``tags``
    run facet naming its version): no sourceCodeLocation from the git checkout the tests
    run in, and no environment variables or tags of the machine's (OPENLINEAGE__
    settings could add them; tests clear those with ``clean_environment``)."""
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


def get(http: httpx.Client, path: str, **params: str) -> Any:
    reply = http.get(path, params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


CLIENT_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
SOURCE_ID = f"dataset:{SOURCE_NS}:{SOURCE}"
TABLE_ID = f"dataset:{TABLE_NS}:{TABLE}"
JOB_ID = f"job:{JOB_NS}:{JOB}"


def _facet(schema: str, version: str, **fields: Any) -> dict[str, Any]:
    url = f"https://openlineage.io/spec/facets/{version}/{schema}.json#/$defs/{schema}"
    return {"_producer": CLIENT_PRODUCER, "_schemaURL": url, **fields}


# The client adds this run facet to every RunEvent by itself.
CLIENT_TAGS = _facet(
    "TagsRunFacet",
    "1-0-0",
    tags=[{"key": "openlineage_client_version", "source": "OPENLINEAGE_CLIENT", "value": "1.54.0"}],
)
PARENT = {
    "runId": DAG_RUN,
    "job": {"namespace": DAG_NS, "name": DAG},
    "root": {"runId": DAG_RUN, "job": {"namespace": DAG_NS, "name": DAG}},
}


def _edge(source: str, target: str, static: bool) -> dict[str, Any]:
    if static:  # from the JobEvent: design-time, no run
        return {
            "source": source,
            "target": target,
            "static": True,
            "first_seen": at(0),
            "last_seen": at(0),
            "run_count": 0,
            "last_state": None,
        }
    return {
        "source": source,
        "target": target,
        "static": False,
        "first_seen": at(2),
        "last_seen": at(7),
        "run_count": 2,  # the completed run and the failed one
        "last_state": "FAIL",  # the state of the latest run by eventTime
    }


def assert_pipeline_graph(http: httpx.Client) -> None:
    """What the read API answers for pipeline_events(), to the last field."""
    # The DAG run: no parent, both task runs as children.
    dag = get(http, f"/api/v1/runs/{DAG_RUN}")
    assert dag == {
        "runId": DAG_RUN,
        "job": {"namespace": DAG_NS, "name": DAG},
        "state": "COMPLETE",
        "started_at": at(1),
        "ended_at": at(8),
        "duration_s": 420.0,
        "inputs": [],
        "outputs": [],
        "facets": {"tags": CLIENT_TAGS},
        "error_message": None,
        "parent": None,
        "children": [GOOD_RUN, BAD_RUN],
        "child_count": 2,
    }
    good = get(http, f"/api/v1/runs/{GOOD_RUN}")
    used = {k: [(d["namespace"], d["name"]) for d in good.pop(k)] for k in ("inputs", "outputs")}
    # The S3 path the run wrote is served as its TABLE symlink's node, the canonical one.
    assert used == {"inputs": [(SOURCE_NS, SOURCE)], "outputs": [(TABLE_NS, TABLE)]}
    assert {k: v for k, v in good.items() if k != "facets"} == {
        "runId": GOOD_RUN,
        "job": {"namespace": JOB_NS, "name": JOB},
        "state": "COMPLETE",
        "started_at": at(2),
        "ended_at": at(5),
        "duration_s": 180.0,
        "error_message": None,
        "parent": PARENT,
        "children": [],
        "child_count": 0,
    }
    assert set(good["facets"]) == {"parent", "tags"}
    assert good["facets"]["parent"]["root"]["run"]["runId"] == DAG_RUN
    bad = get(http, f"/api/v1/runs/{BAD_RUN}")
    assert (bad["state"], bad["ended_at"], bad["error_message"]) == ("FAIL", at(7), ERROR)
    assert bad["facets"]["errorMessage"] == _facet(
        "ErrorMessageRunFacet", "1-0-1", message=ERROR, programmingLanguage="python"
    )
    assert bad["parent"] == PARENT

    # Dataset lineage around the job: runtime edges beside the JobEvent's static ones; the
    # S3 path the runs wrote is its TABLE symlink's node.
    lineage = get(http, "/api/v1/lineage", type="job", namespace=JOB_NS, name=JOB)
    assert lineage["root"] == JOB_ID
    assert [n["id"] for n in lineage["nodes"]] == [TABLE_ID, SOURCE_ID, JOB_ID]
    assert lineage["edges"] == [
        _edge(JOB_ID, TABLE_ID, static=False),
        _edge(JOB_ID, TABLE_ID, static=True),
        _edge(SOURCE_ID, JOB_ID, static=False),
        _edge(SOURCE_ID, JOB_ID, static=True),
    ]
    assert lineage["truncated"] is False

    # Column lineage of `total`: an aggregation of amount, grouped by id (an indirect
    # dependency, not a mapping).
    columns = get(http, "/api/v1/column-lineage", namespace=TABLE_NS, name=TABLE, field="total")
    common = {"job": JOB_ID, "first_seen": at(2), "last_seen": at(7), "masked": False}
    total = f"field:{TABLE_NS}:{TABLE}:total"
    assert columns["edges"] == [
        {
            "source": f"field:{SOURCE_NS}:{SOURCE}:amount",
            "target": total,
            "kind": "mapping",
            "class": "aggregate",
            "indirect": [],
            **common,
        },
        {
            "source": f"field:{SOURCE_NS}:{SOURCE}:id",
            "target": total,
            "kind": "indirect",
            "class": None,
            "indirect": ["GROUP_BY"],
            **common,
        },
    ]
    order_id = get(http, "/api/v1/column-lineage", namespace=TABLE_NS, name=TABLE, field="order_id")
    assert [(e["source"], e["class"]) for e in order_id["edges"]] == [
        (f"field:{SOURCE_NS}:{SOURCE}:id", "direct")
    ]

    # Datasets: the S3 path resolves to the table, its alias; the source's schema came
    # from the DatasetEvent.
    (table,) = get(http, "/api/v1/datasets", namespace=LAKE_NS, name=LAKE_PATH)["datasets"]
    assert (table["namespace"], table["name"]) == (TABLE_NS, TABLE)
    assert table["aliases"] == [{"namespace": LAKE_NS, "name": LAKE_PATH, "renamed": False}]
    assert table["fields"] == ["order_id", "total"]
    assert sorted(table["facets"]) == ["columnLineage", "schema", "symlinks"]
    assert table["facets"]["symlinks"]["identifiers"] == [
        {"namespace": TABLE_NS, "name": TABLE, "type": "TABLE"}
    ]
    (source,) = get(http, "/api/v1/datasets", namespace=SOURCE_NS, name=SOURCE)["datasets"]
    assert source["facets"] == {
        "schema": _facet(
            "SchemaDatasetFacet",
            "1-2-0",
            fields=[
                {"fields": [], "name": "id", "type": "BIGINT"},
                {"fields": [], "name": "amount", "type": "DECIMAL"},
            ],
        )
    }
    assert source["fields"] == ["id", "amount"]

    # The job: its jobType and sql facets, its parent job (the DAG), its latest run.
    (job,) = get(http, "/api/v1/jobs", namespace=JOB_NS, name=JOB)["jobs"]
    assert job["facets"]["sql"] == _facet("SQLJobFacet", "1-1-0", query=SQL, dialect="postgres")
    assert job["facets"]["jobType"]["processingType"] == "BATCH"
    assert job["parent_job"] == {"namespace": DAG_NS, "name": DAG}
    assert job["latest_run"]["runId"] == BAD_RUN
