"""openlineage-spark for real (issue 20): pyspark in local[2] with the agent jar from Maven
Central, sending over HTTP to live `embrasure serve` processes — one on SQLite, one on
PostgreSQL, both reached by one SparkSession (tests/spark_agent.py) — and the graph they
serve checked (tests/spark_graph.py).

The jobs run once per module: ~30 s for the module on this machine's 2 cores. Without
Java, pyspark or the agent jar the tests are skipped, and under CI they fail, as the Kafka
tests do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import spark_agent
import spark_graph
from conftest import (
    ServerProcess,
    no_postgresql,
    pg_database,
    pg_unreachable,
    sqlite_url,
    unavailable,
)
from http_client import HTTP

pytestmark = [pytest.mark.slow, pytest.mark.spark]

Live = tuple[httpx.Client, list[dict[str, Any]]]  # a backend's server, the events it stored


@dataclass(frozen=True)
class LiveRun:
    servers: dict[str, ServerProcess]  # by backend
    layout: spark_agent.Layout
    error: str  # what the failing job raised in Python


@pytest.fixture(scope="module")
def spark_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRun]:
    work = tmp_path_factory.mktemp("spark")
    with contextlib.ExitStack() as stack:
        dbs = {"sqlite": sqlite_url(work / "embrasure.db")}
        if pg_unreachable() is None:
            dbs["postgresql"] = stack.enter_context(pg_database(migrated=True))
        servers: dict[str, ServerProcess] = {}
        for backend, db in dbs.items():
            server = ServerProcess(db, log_dir=work).start()
            stack.callback(server.stop)
            servers[backend] = server
        layout = spark_agent.Layout(work / "jobs")
        try:
            spark = spark_agent.session({b: s.url for b, s in servers.items()}, layout)
        except spark_agent.SparkUnavailable as exc:
            unavailable("Spark", str(exc))
        with spark_agent.stopped_after(spark):
            error = spark_agent.run_jobs(spark, layout)
        for server in servers.values():
            spark_agent.wait_projected(server.url)
        yield LiveRun(servers, layout, error)


@pytest.fixture
def live(spark_run: LiveRun, backend: str) -> Iterator[Live]:
    """The backend's server, and the events the agent sent it (as stored)."""
    server = spark_run.servers.get(backend)
    if server is None:
        no_postgresql()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http, spark_agent.served_events(server.url)


def test_every_event_the_agent_sent_is_projected(live: Live) -> None:
    http, events = live
    assert len(events) >= 10
    spark_graph.check_no_quarantine(http, events)


def test_the_application_is_the_parent_of_its_queries(live: Live) -> None:
    spark_graph.check_hierarchy(*live)


def test_a_table_and_its_path_are_one_node(spark_run: LiveRun, live: Live) -> None:
    spark_graph.check_symlinked_table(*live, spark_run.layout)


def test_column_lineage_classes(spark_run: LiveRun, live: Live) -> None:
    spark_graph.check_column_lineage(live[0], spark_run.layout)


def test_the_failed_query(spark_run: LiveRun, live: Live) -> None:
    assert spark_agent.FAIL_MESSAGE in spark_run.error
    spark_graph.check_failure_sent(*live, spark_run.layout)


def test_the_failed_query_as_served(spark_run: LiveRun, live: Live) -> None:
    spark_graph.check_failure_served(*live, spark_run.layout)


def test_output_statistics(spark_run: LiveRun, live: Live) -> None:
    spark_graph.check_statistics(live[0], spark_run.layout)


def test_both_backends_serve_the_same_graph(spark_run: LiveRun) -> None:
    if len(spark_run.servers) < 2:
        no_postgresql()
    exports, stored = [], []
    for server in spark_run.servers.values():
        reply = HTTP.get(server.url + "/api/v1/export", timeout=60)
        assert reply.status_code == 200
        exports.append(reply.content)
        stored.append(spark_agent.served_events(server.url))
    spark_graph.check_same_graph(exports, stored)
