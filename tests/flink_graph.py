"""What the served graph must show for the openlineage-flink jobs of tests/flink_job.py
(issue 20), read over HTTP from a live server: the live tests (the agent sending) and the
replay tests (its recorded events posted again) assert the same things.

- every event projected, none quarantined, no warning;
- one run a job, its START and its terminal event (the job manager's FINISHED, FAILED or
  CANCELED): ``generate_orders`` and ``large_orders`` COMPLETE, ``failing_cast`` FAIL,
  with no error message (the agent sends none), ``stream_ticks`` ABORT, whatever order
  the START and the end arrived in; the streaming job's RUNNING events in between, each
  with the ``checkpoints`` counts of Flink's REST API, the run serving the latest;
- the tables as the agent names them (namespace "", Flink's catalog path), with their
  schema, and the graph orders → generate_orders → generated_orders → large_orders →
  large_orders, generated_orders → failing_cast → status_codes (FAIL), ticks →
  stream_ticks → tick_files (ABORT);
- the job's jobType (BATCH, or STREAMING for the unbounded source; FLINK; JOB) and the
  run's processing_engine (Flink 2.0.2, adapter 1.53.0) and ``flink_job`` (the Flink job
  id) facets, as sent.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from embrasure.query.entities import node_id

from flink_agent import (
    FAILING,
    FLINK_VERSION,
    JOBS,
    NAMESPACE,
    STREAMING,
    TABLE_NAMESPACE,
    TABLES,
)
from openlineage_agents import AGENT_VERSION
from spark_graph import delivery_warnings

Event = dict[str, Any]
STATES = {
    "generate_orders": "COMPLETE",
    "large_orders": "COMPLETE",
    FAILING: "FAIL",
    STREAMING: "ABORT",
}
FLOWS = {  # job → (its input table, its output table)
    "generate_orders": ("orders", "generated_orders"),
    "large_orders": ("generated_orders", "large_orders"),
    FAILING: ("generated_orders", "status_codes"),
    STREAMING: ("ticks", "tick_files"),
}
CHECKPOINT_COUNTS = {"completed", "failed", "in-progress", "restored", "total"}
COLUMNS = {
    "orders": ["order_id", "amount", "status"],
    "generated_orders": ["order_id", "amount", "status"],
    "large_orders": ["order_id", "amount", "status"],
    "status_codes": ["order_id", "status_code"],
    "ticks": ["tick_id", "reading"],
    "tick_files": ["tick_id", "reading"],
}


def _get(http: httpx.Client, path: str, **params: str) -> Any:
    reply = http.get(path, params=params)
    assert reply.status_code == 200, (path, params, reply.text)
    return reply.json()


def runs_of(events: list[Event]) -> dict[str, list[Event]]:
    """Each job's events, by job name, in eventTime order."""
    out: dict[str, list[Event]] = {}
    for event in sorted(events, key=lambda e: str(e["eventTime"])):
        out.setdefault(event["job"]["name"], []).append(event)
    return out


def check_no_quarantine(http: httpx.Client, events: list[Event], provider_key: str) -> None:
    overview = _get(http, "/api/v1/overview")
    assert overview["backlog"] == {"deliveries": 0, "items": 0}, overview
    assert overview["items"].get("quarantined", 0) == 0, _get(http, "/api/v1/quarantine")
    assert overview["items"]["projected"] == overview["items"]["received"], overview
    assert overview["items"]["projected"] >= len(events), overview
    assert delivery_warnings(http, provider_key) == []


def checkpoint_events(sent: list[Event]) -> list[Event]:
    return [e for e in sent if e["eventType"] == "RUNNING"]


def check_events_sent(events: list[Event]) -> None:
    """What the agent sent: a START and one terminal event a job, all under the configured
    namespace; RUNNING events only from the streaming job (a batch job has no
    checkpoints), at least one, each with the checkpoint counts."""
    runs = runs_of(events)
    assert sorted(runs) == sorted(JOBS), sorted(runs)
    for job, sent in runs.items():
        running = checkpoint_events(sent)
        ends = sorted(e["eventType"] for e in sent if e not in running)
        assert ends == sorted(["START", STATES[job]]), sent
        assert bool(running) == (job == STREAMING), [e["eventType"] for e in sent]
        for event in running:
            counts = event["run"]["facets"]["checkpoints"]
            assert set(counts) >= CHECKPOINT_COUNTS, counts
            assert not {"inputs", "outputs"} & set(event), event
        assert len({e["run"]["runId"] for e in sent}) == 1, job
        assert {e["job"]["namespace"] for e in sent} == {NAMESPACE}
        (start,) = [e for e in sent if e["eventType"] == "START"]
        source, target = FLOWS[job]
        assert [(d["namespace"], d["name"]) for d in start["inputs"]] == [
            (TABLE_NAMESPACE, TABLES[source])
        ]
        assert [(d["namespace"], d["name"]) for d in start["outputs"]] == [
            (TABLE_NAMESPACE, TABLES[target])
        ]
        (end,) = [e for e in sent if e["eventType"] == STATES[job]]
        assert not {"inputs", "outputs"} & set(end), end  # the datasets: in the START only
        assert "errorMessage" not in end["run"]["facets"]
        processing = start["job"]["facets"]["jobType"]["processingType"]
        assert processing == ("STREAMING" if job == STREAMING else "BATCH"), start["job"]


def check_runs(http: httpx.Client, events: list[Event]) -> None:
    for job, sent in runs_of(events).items():
        (start,) = [e for e in sent if e["eventType"] == "START"]
        (end,) = [e for e in sent if e["eventType"] == STATES[job]]
        view = _get(http, f"/api/v1/runs/{start['run']['runId']}")
        assert view["job"] == {"namespace": NAMESPACE, "name": job}
        assert view["state"] == STATES[job], view
        assert (view["started_at"], view["ended_at"]) == (start["eventTime"], end["eventTime"])
        assert view["error_message"] is None  # the FAIL says nothing of why
        assert view["parent"] is None and view["children"] == []
        engine = view["facets"]["processing_engine"]
        assert (engine["name"], engine["version"]) == ("flink", FLINK_VERSION), engine
        assert engine["openlineageAdapterVersion"] == AGENT_VERSION, engine
        assert re.fullmatch("[0-9a-f]{32}", view["facets"]["flink_job"]["jobId"]), view["facets"]
        running = checkpoint_events(sent)
        if running:  # the run serves the latest counts
            assert view["facets"]["checkpoints"] == running[-1]["run"]["facets"]["checkpoints"]
        else:
            assert "checkpoints" not in view["facets"]
        (listed,) = _get(http, "/api/v1/jobs", namespace=NAMESPACE, name=job)["jobs"]
        job_type = listed["facets"]["jobType"]
        processing = "STREAMING" if job == STREAMING else "BATCH"
        assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == (
            processing,
            "FLINK",
            "JOB",
        )
        assert listed["latest_run"]["state"] == STATES[job]


def check_datasets(http: httpx.Client) -> None:
    for table, name in TABLES.items():
        (node,) = _get(http, "/api/v1/datasets", namespace=TABLE_NAMESPACE, name=name)["datasets"]
        assert (node["namespace"], node["name"]) == (TABLE_NAMESPACE, name), node
        assert node["fields"] == COLUMNS[table], node
        assert node["aliases"] == []  # the agent's symlinks facet is sent empty


def check_graph(http: httpx.Client) -> None:
    """Each job's edges, from a lineage walk rooted at the job (a table's own walk needs
    its namespace, which is "": ``check_table_lineage`` asks with ``namespace=``)."""
    for job, (source, target) in FLOWS.items():
        walk = _get(
            http, "/api/v1/lineage", type="job", namespace=NAMESPACE, name=job, depth="1",
        )  # fmt: skip
        here = node_id("job", NAMESPACE, job)
        assert walk["root"] == here
        edges = {(e["source"], e["target"]): e for e in walk["edges"]}
        read = (node_id("dataset", TABLE_NAMESPACE, TABLES[source]), here)
        wrote = (here, node_id("dataset", TABLE_NAMESPACE, TABLES[target]))
        assert read in edges and wrote in edges, sorted(edges)
        for key in (read, wrote):
            assert edges[key]["last_state"] == STATES[job], edges[key]
            assert edges[key]["run_count"] == 1, edges[key]
    walk = _get(
        http, "/api/v1/lineage", type="job", namespace=NAMESPACE, name="large_orders",
        direction="upstream", depth="5",
    )  # fmt: skip
    assert node_id("dataset", TABLE_NAMESPACE, TABLES["orders"]) in {n["id"] for n in walk["nodes"]}


def check_table_lineage(http: httpx.Client) -> None:
    """A table's own lineage walk, asked by its namespace (``namespace=``, the empty one
    openlineage-flink names a default-catalog table in) and name."""
    walk = _get(
        http, "/api/v1/lineage", namespace=TABLE_NAMESPACE, name=TABLES["generated_orders"],
        depth="1",
    )  # fmt: skip
    assert len(walk["edges"]) == 3, walk


def check_all(http: httpx.Client, events: list[Event], provider_key: str) -> None:
    check_no_quarantine(http, events, provider_key)
    check_events_sent(events)
    check_runs(http, events)
    check_datasets(http)
    check_graph(http)
