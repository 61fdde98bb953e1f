"""openlineage-flink for real (issue 20): apache-flink 2.0.2 from PyPI (PyFlink, in
.venv-flink) running tests/flink_job.py's four jobs (three batch jobs, then a streaming
one cancelled after six seconds) in its local mini cluster with the agent jar from Maven
Central, sending over HTTP to live `embrasure serve` processes — one on SQLite, one on
PostgreSQL, both reached by the one Flink process (the Java client's composite
transport; tests/flink_agent.py) — and the graph they serve checked (tests/flink_graph.py).

The jobs run once per module: 63 s for the module on this machine's 2 cores while other
suites ran. Without Java, the Flink venv or the agent jar the tests are skipped, and
under CI they fail, as the Spark and Kafka tests do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import flink_agent
import flink_graph
import spark_agent
from conftest import (
    ServerProcess,
    no_postgresql,
    pg_database,
    pg_unreachable,
    sqlite_url,
    unavailable,
)
from http_client import HTTP

pytestmark = [pytest.mark.slow, pytest.mark.flink]

Live = tuple[httpx.Client, list[dict[str, Any]]]  # a backend's server, the events it stored


@dataclass(frozen=True)
class LiveRun:
    servers: dict[str, ServerProcess]  # by backend
    flink: flink_agent.FlinkRun
    work: Path


@pytest.fixture(scope="module")
def flink_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRun]:
    work = tmp_path_factory.mktemp("flink")
    with contextlib.ExitStack() as stack:
        dbs = {"sqlite": sqlite_url(work / "embrasure.db")}
        if pg_unreachable() is None:
            dbs["postgresql"] = stack.enter_context(pg_database(migrated=True))
        servers: dict[str, ServerProcess] = {}
        for backend, db in dbs.items():
            server = ServerProcess(db, log_dir=work).start()
            stack.callback(server.stop)
            servers[backend] = server
        try:
            flink = flink_agent.run({b: s.url for b, s in servers.items()}, work)
        except flink_agent.FlinkUnavailable as exc:
            unavailable("Flink", str(exc))
        for server in servers.values():
            spark_agent.wait_projected(server.url)
        yield LiveRun(servers, flink, work)


@pytest.fixture
def live(flink_run: LiveRun, backend: str) -> Iterator[Live]:
    """The backend's server, and the events the agent sent it (as stored)."""
    server = flink_run.servers.get(backend)
    if server is None:
        no_postgresql()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http, spark_agent.served_events(server.url)


def test_the_jobs_ran_and_the_listener_started(flink_run: LiveRun) -> None:
    flink = flink_run.flink
    assert flink.returncode == 0, flink.output[-3000:]
    assert "NumberFormatException" in flink.failure, flink.output[-3000:]
    assert "CANCELLED: stream_ticks" in flink.output, flink.output[-3000:]
    # The agent's own log lines: the detached listener, created twice a job (the client's
    # half and the job manager's).
    created = flink.log.count("Creating OpenLineageDetachedJobStatusChangedListener")
    assert created == 2 * len(flink_agent.JOBS), created
    assert "JobId is not set" not in flink.log
    for folder in ("generated", "large"):  # the batch jobs that finish wrote their files
        assert any((flink_run.work / "data" / folder).rglob("*")), folder


def test_every_event_the_agent_sent_is_projected(live: Live) -> None:
    http, events = live
    # A START and an end a job, and the streaming job's RUNNING events (one a new
    # checkpoint count the tracker saw: how many depends on timing).
    assert len(events) > 2 * len(flink_agent.JOBS), [e["eventType"] for e in events]
    flink_graph.check_no_quarantine(http, events, flink_agent.PROVIDER_KEY)


def test_a_start_and_an_end_a_job(live: Live) -> None:
    flink_graph.check_events_sent(live[1])


def test_one_run_a_job_in_its_end_state(live: Live) -> None:
    flink_graph.check_runs(*live)


def test_the_tables_and_their_schemas(live: Live) -> None:
    flink_graph.check_datasets(live[0])


def test_the_graph_from_the_jobs(live: Live) -> None:
    flink_graph.check_graph(live[0])


def test_a_table_lineage_walk(live: Live) -> None:
    flink_graph.check_table_lineage(live[0])


def test_both_backends_serve_the_same_graph(flink_run: LiveRun) -> None:
    if len(flink_run.servers) < 2:
        no_postgresql()
    exports = []
    for server in flink_run.servers.values():
        reply = HTTP.get(server.url + "/api/v1/export", timeout=60)
        assert reply.status_code == 200
        exports.append(reply.content)
    at = next((i for i, (a, b) in enumerate(zip(*exports, strict=False)) if a != b), None)
    context = [e[max(0, (at or 0) - 300) : (at or 0) + 100] for e in exports]
    assert exports[0] == exports[1], context
