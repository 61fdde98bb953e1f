"""openlineage-flink's recorded events (tests/data/producers/flink_agent_capture.jsonl:
what the agent sent for tests/flink_job.py's four jobs, unchanged) posted again, one
request each and in the order the agent sent them (the first job's COMPLETE before its
START), to a live server on each backend: the graph they make is checked as the live
run's is (tests/flink_graph.py), without Java or Flink.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

import flink_agent
import flink_graph
import producer_events as pe
import spark_agent
from conftest import ServerProcess

Replayed = tuple[httpx.Client, list[dict[str, Any]]]


@pytest.fixture
def replayed(server: ServerProcess) -> Iterator[Replayed]:
    events: list[dict[str, Any]] = []
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for line in pe.flink_agent_capture_lines():  # the bytes the agent sent
            reply = http.post(
                "/api/v1/lineage",
                params={"provider_key": flink_agent.PROVIDER_KEY},
                content=line,
                headers={"Content-Type": "application/json"},
            )
            assert reply.status_code == 202, reply.text
            events.append(orjson.loads(line))
        spark_agent.wait_projected(server.url)
        yield http, events


def test_the_recording_holds_a_start_and_an_end_a_job() -> None:
    events = [orjson.loads(line) for line in pe.flink_agent_capture_lines()]
    flink_graph.check_events_sent(events)
    sent = [(e["job"]["name"], e["eventType"]) for e in events]
    # As sent: the first job's end reached the file before its START (the START waits on
    # Flink's REST API for the job's start time; docs/producers/flink.md).
    assert sent.index(("generate_orders", "COMPLETE")) < sent.index(("generate_orders", "START"))


def test_every_recorded_event_is_projected(replayed: Replayed) -> None:
    http, events = replayed
    flink_graph.check_no_quarantine(http, events, flink_agent.PROVIDER_KEY)
    overview = http.get("/api/v1/overview").json()
    assert overview["items"]["received"] == len(events) == 10  # 4 STARTs, 4 ends, 2 RUNNING


def test_one_run_a_job_in_its_end_state(replayed: Replayed) -> None:
    flink_graph.check_runs(*replayed)


def test_the_tables_and_their_schemas(replayed: Replayed) -> None:
    flink_graph.check_datasets(replayed[0])


def test_the_graph_from_the_jobs(replayed: Replayed) -> None:
    flink_graph.check_graph(replayed[0])


def test_a_table_lineage_walk(replayed: Replayed) -> None:
    flink_graph.check_table_lineage(replayed[0])
