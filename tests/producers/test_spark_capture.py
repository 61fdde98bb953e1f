"""openlineage-spark's recorded events (tests/data/producers/spark_agent_capture.jsonl:
what the agent sent for tests/spark_agent.py's jobs, unchanged) posted again, one request
each as the agent sends them, to a live server on each backend: the graph they make is
checked as the live run's is (tests/spark_graph.py), without Java or Spark.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

import producer_events as pe
import spark_agent
import spark_graph
from conftest import ServerProcess, pg_database, sqlite_url

LAYOUT = spark_agent.Layout(spark_agent.CAPTURE_ROOT)  # where the recording's jobs ran
Replayed = tuple[httpx.Client, list[dict[str, Any]]]


def replay(http: httpx.Client) -> list[dict[str, Any]]:
    """Post the recording to the server, one request an event; the events it accepted."""
    events: list[dict[str, Any]] = []
    for line in pe.spark_agent_capture_lines():  # the bytes the agent sent
        reply = http.post(
            "/api/v1/lineage",
            params={"provider_key": spark_agent.PROVIDER_KEY},
            content=line,
            headers={"Content-Type": "application/json"},
        )
        if reply.status_code == 400:  # the agent's duplicate-key event: refused
            assert reply.json()["type"].endswith("/json-duplicate-key"), reply.text
            assert '"processing_engine"' in reply.json()["detail"]
            continue
        assert reply.status_code == 202, reply.text
        events.append(orjson.loads(line))
    assert len(events) == len(pe.spark_agent_capture_lines()) - 1
    spark_agent.wait_projected(str(http.base_url))
    return events


@pytest.fixture
def replayed(server: ServerProcess) -> Iterator[Replayed]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http, replay(http)


def test_every_recorded_event_is_projected(replayed: Replayed) -> None:
    http, events = replayed
    spark_graph.check_no_quarantine(http, events)
    overview = http.get("/api/v1/overview").json()
    assert overview["items"]["received"] == len(events)


def test_the_application_is_the_parent_of_its_queries(replayed: Replayed) -> None:
    spark_graph.check_hierarchy(*replayed)


def test_a_table_and_its_path_are_one_node(replayed: Replayed) -> None:
    spark_graph.check_symlinked_table(*replayed, LAYOUT)


def test_column_lineage_classes(replayed: Replayed) -> None:
    spark_graph.check_column_lineage(replayed[0], LAYOUT)


def test_the_failed_query_as_sent(replayed: Replayed) -> None:
    spark_graph.check_failure_sent(*replayed, LAYOUT)


def test_the_failed_query_as_served(replayed: Replayed) -> None:
    spark_graph.check_failure_served(*replayed, LAYOUT)


def test_output_statistics(replayed: Replayed) -> None:
    spark_graph.check_statistics(replayed[0], LAYOUT)


def test_both_backends_serve_the_same_graph(tmp_path: Path) -> None:
    """The same bytes on SQLite and PostgreSQL: byte-identical exports (the live test's
    check, without the agent's own race: docs/producers/spark.md)."""
    with contextlib.ExitStack() as stack:
        exports, stored = [], []
        for db in (sqlite_url(tmp_path / "embrasure.db"), stack.enter_context(pg_database(True))):
            server = ServerProcess(db, log_dir=tmp_path).start()
            stack.callback(server.stop)
            with httpx.Client(base_url=server.url, timeout=60) as http:
                stored.append(replay(http))
                reply = http.get("/api/v1/export")
            assert reply.status_code == 200
            exports.append(reply.content)
    assert stored[0] == stored[1]
    spark_graph.check_same_graph(exports, stored)
