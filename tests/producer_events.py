"""Real producers' events (tests/data/producers/, copied from the OpenLineage corpus; see
its README) made into events a producer would send, with their run hierarchies intact.

The corpus files are integration-test expectations: their runIds are placeholders
(``{{ any(result) }}``) or left out, so a filler that gives each place its own UUID would
cut every parent link. Here a run's id is derived from its job (each job of a file runs
once, as in these files: a dbt invocation, an Airflow DAG run, a Spark application), and
a parent or root reference gets the id of the job it names. Other placeholders are filled
as tests/corpus.py does; an event without a time gets one a second after the previous.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from corpus import fill

DATA = Path(__file__).resolve().parent / "data" / "producers"
BASE_TIME = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def run_id(key: str, namespace: str, name: str) -> str:
    """The run of job (namespace, name) in the producer run ``key``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/{namespace}/{name}"))


def _placeholder(value: Any) -> bool:
    return not isinstance(value, str) or "{{" in value or "${" in value


def realize(events: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    out = []
    for index, source in enumerate(events):
        # Ids first, on the events as written: fill() would give each placeholder its own.
        event = copy.deepcopy(source)
        job = event["job"]
        run = event.setdefault("run", {})
        run["runId"] = run_id(key, job["namespace"], job["name"])
        facets = run.get("facets") or {}
        for ref in (facets.get("parent"), (facets.get("parent") or {}).get("root")):
            if not isinstance(ref, dict) or not isinstance(ref.get("job"), dict):
                continue
            named = ref.setdefault("run", {})
            if _placeholder(named.get("runId")):
                named["runId"] = run_id(key, ref["job"]["namespace"], ref["job"]["name"])
        timeless = _placeholder(event.get("eventTime"))  # fill() would give all one time
        event = fill(event, f"{key}#{index}")
        if timeless:
            moment = BASE_TIME + timedelta(seconds=index)
            event["eventTime"] = moment.isoformat().replace("+00:00", "Z")
        out.append(event)
    return out


def load(name: str) -> list[dict[str, Any]]:
    doc = json.loads((DATA / name).read_text(encoding="utf-8"))
    return doc if isinstance(doc, list) else [doc]


DBT_NS = "dbt-test-namespace"
DBT_RUN_JOB = "dbt-run-jaffle_shop"


def dbt_run() -> list[dict[str, Any]]:
    """`dbt-ol run` on jaffle_shop (dbt 1.8.2, postgres, structured logs): the invocation,
    5 models under it, 6 SQL queries under each model. 72 events."""
    return realize(load("dbt_postgres_run.json"), "dbt-run")


def dbt_singular_tests() -> list[dict[str, Any]]:
    """`dbt-ol test` (duckdb): the invocation, 2 tests, 2 queries each; every parent
    facet names the invocation as root (ParentRunFacet 1-1-0). 14 events."""
    return realize(load("dbt_duckdb_singular_tests.json"), "dbt-test")


SPARK_NS = "generic-namespace"
SPARK_APP = "generic_integration_test"
# The query-level partials leave the job name out (it depends on the plan); Spark names a
# query job `{application}.{action}`.
SPARK_QUERY = f"{SPARK_APP}.execute_insert_into_hadoop_fs_relation_command"
SCHEDULER_RUN = "bd9c2467-3ed7-4fdc-85c2-41ebf5c73b40"  # as the application's events say


def spark_application() -> list[dict[str, Any]]:
    """A Spark application (its parent: the scheduler's task run, named in the events)
    and one query job under it: START and COMPLETE of each, in the order sent."""
    names = ["StartApplication", "StartJob", "CompleteJob", "CompleteApplication"]
    events = [load(f"spark_applicationLevel{n}.json")[0] for n in names]
    for event in events:
        event["job"].setdefault("name", SPARK_QUERY)
    return realize(events, "spark")


FLINK_NS, FLINK_JOB = "flink_job_namespace", "flink_examples_stateful"


def flink_streaming() -> list[dict[str, Any]]:
    """A Flink streaming job (Kafka to Kafka, openlineage-flink for Flink 1.x): its START
    and a RUNNING with checkpoint counts. A streaming job sends no terminal event while
    it runs."""
    return realize(load("flink_kafka_start.json") + load("flink_kafka_checkpoints.json"), "flink")


AIRFLOW_NS = "food_delivery"
AIRFLOW_DAG = "athena_dag"


def airflow_dag() -> list[dict[str, Any]]:
    """An Airflow DAG run with 6 tasks. The corpus's Airflow events come from the legacy
    integration, whose parent facet names the DAG job only; the current provider
    (apache-airflow-providers-openlineage) also sends the DAG run's own START and
    COMPLETE, and names the DAG run as each task's parent and root. Those are added
    here, in the shape the provider sends."""
    tasks = load("airflow_athena_dag.json")
    dag = {"namespace": AIRFLOW_NS, "name": AIRFLOW_DAG}
    for task in tasks:
        parent = task.get("run", {}).get("facets", {}).get("parent")
        if parent is not None:  # the legacy integration sends it on START only
            parent["root"] = {"job": dict(dag)}

    def dag_event(state: str) -> dict[str, Any]:
        return {"eventType": state, "job": dict(dag), "run": {}}

    return realize([dag_event("START"), *tasks, dag_event("COMPLETE")], "airflow")


def _clone(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))  # ten times deepcopy's speed on 20,000 events


BIG_PROJECT = "big_project"
BIG_INVOCATION = f"dbt-run-{BIG_PROJECT}"


def dbt_sized_run(models: int) -> list[dict[str, Any]]:
    """A dbt invocation the size of a large project: ``models`` models, each a START and
    a COMPLETE shaped like the corpus's dbt model events (same facets, same producer),
    reading one of 50 raw tables and writing its own; every model names the invocation
    as parent and root, as dbt-ol does. 2 * models + 2 events, in the order sent."""
    corpus = load("dbt_postgres_run.json")
    start_tpl, complete_tpl = corpus[1], corpus[14]
    first, last = dict(corpus[0]), dict(corpus[-1])
    key = "dbt-big"
    invocation = run_id(key, DBT_NS, BIG_INVOCATION)
    top = {"namespace": DBT_NS, "name": BIG_INVOCATION}
    parent = {
        "run": {"runId": invocation},
        "job": top,
        "root": {"run": {"runId": invocation}, "job": top},
    }
    version = "1.8.2"

    def invocation_event(template: dict[str, Any], moment: datetime) -> dict[str, Any]:
        event: dict[str, Any] = _clone(template)
        event["run"]["runId"] = invocation
        event["run"]["facets"]["processing_engine"]["openlineageAdapterVersion"] = version
        event["job"]["name"] = BIG_INVOCATION
        event["eventTime"] = moment.isoformat().replace("+00:00", "Z")
        return event

    out = [invocation_event(first, BASE_TIME)]
    for i in range(models):
        name = f"model.{BIG_PROJECT}.m{i:05d}"
        for template, offset in ((start_tpl, 1), (complete_tpl, 2)):
            event = _clone(template)
            moment = BASE_TIME + timedelta(milliseconds=10 * i + offset)
            event["eventTime"] = moment.isoformat().replace("+00:00", "Z")
            event["run"]["runId"] = run_id(key, DBT_NS, name)
            event["run"]["facets"]["parent"] = _clone(parent)
            event["run"]["facets"]["processing_engine"]["openlineageAdapterVersion"] = version
            event["job"]["name"] = name
            event["inputs"][0]["name"] = f"postgres.public.raw_{i % 50:02d}"
            event["outputs"][0]["name"] = f"postgres.public.m{i:05d}"
            out.append(event)
    out.append(invocation_event(last, BASE_TIME + timedelta(milliseconds=10 * models + 5)))
    return out


DBT_OL_NS = "dbt-shop"
DBT_OL_DB = "duckdb:///tmp/probe/shop/shop.duckdb"


def _capture(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (DATA / name).read_bytes().splitlines()]


def dbt_ol_capture() -> list[dict[str, Any]]:
    """What `dbt-ol seed` then `dbt-ol run` really sent (a capture, not a template):
    8 events, in eventTime order."""
    return _capture("dbt_ol_duckdb_capture.jsonl")


AIRFLOW_PROVIDER_NS = "airflow-prod"


def airflow_provider_capture() -> list[dict[str, Any]]:
    """What Airflow's OpenLineage provider really sent for `airflow dags test` of a DAG
    with two tasks: each task's START and COMPLETE, then the DAG run's COMPLETE."""
    return _capture("airflow_provider_capture.jsonl")


DBT_TEST_INVOCATION = "dbt-run-jaffle_shop"
DBT_CUSTOMERS = ("postgres://postgres:5432", "postgres.public.customers")


def dbt_tests() -> list[dict[str, Any]]:
    """`dbt-ol test` on jaffle_shop (postgres, structured logs): the invocation and 4 tests,
    each a run of its own reading the table it checks, with the result as a
    dataQualityAssertions dataset facet on its COMPLETE (or FAIL) — `accepted_values` on
    customers.first_name fails, `not_null`, `relationships` and `unique` pass. 26 events."""
    return realize(load("dbt_postgres_test.json"), "dbt-test-run")


def spark_statistics() -> list[dict[str, Any]]:
    """openlineage-spark's serde fixture: an input with dataQualityMetrics (rowCount 10,
    bytes 20, fileCount 5, column metrics) and an output with outputStatistics (10 rows,
    20 bytes, 5 files). One event, as written (its ids and time are real)."""
    return load("spark_serde_statistics.json")


def python_client_full() -> list[dict[str, Any]]:
    """openlineage-python's full example event: an input with dataQualityAssertions under
    inputFacets (two passing) and an output with outputStatistics (2,000 rows, 2 MiB)."""
    return load("python_client_full_event.json")


def spark_agent_capture_lines() -> list[bytes]:
    """What openlineage-spark 1.53.0 on pyspark 4.0.5 really sent for tests/spark_agent.py's
    four jobs (recorded by ``python tests/spark_agent.py --record``, its ``file``
    transport's copy), in the order sent, as the bytes sent: one of them holds a
    duplicate key, which parsing would hide."""
    return (DATA / "spark_agent_capture.jsonl").read_bytes().splitlines()


def flink_agent_capture_lines() -> list[bytes]:
    """What openlineage-flink 1.53.0 on apache-flink 2.0.2 (PyFlink) really sent for
    tests/flink_job.py's four jobs (recorded by ``python tests/flink_agent.py --record``,
    its ``file`` transport's copy), in the order sent, as the bytes sent."""
    return (DATA / "flink_agent_capture.jsonl").read_bytes().splitlines()
