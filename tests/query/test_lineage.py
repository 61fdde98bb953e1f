"""Edges and lineage walks through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from graph_api import (
    CRM,
    CUSTOMERS,
    DASHBOARD,
    DAY,
    ORDERS,
    RAW,
    REPORT,
    Api,
    Event,
    at,
    daily_run,
    dataset_id,
    ds,
    edge,
    edge_pairs,
    job_id,
    node_ids,
    platform,
    run_event,
    run_id,
    symlinks,
)

# == edges and lineage walks (docs/queries.md#the-graph-served, docs/queries.md#lineage) ===========


def test_lineage_shape_and_direction(api: Api) -> None:
    api.ingest(*platform())
    doc = api.lineage(*ORDERS)
    assert set(doc) == {"root", "nodes", "edges", "truncated"}
    assert doc["root"] == dataset_id(*ORDERS) and doc["truncated"] is False
    for node in doc["nodes"]:
        assert node["id"] == f"{node['type']}:{node['namespace']}:{node['name']}"
    for e in doc["edges"]:
        assert set(e) >= {
            "source",
            "target",
            "static",
            "first_seen",
            "last_seen",
            "run_count",
            "last_state",
        }
    ingest, daily = job_id("spark", "ingest"), job_id("spark", "daily")
    dashboard = job_id(*DASHBOARD, "service")
    # Edges follow the data: dataset → job for a read, job → dataset for a write.
    assert edge_pairs(doc) == {
        (dataset_id(*RAW), ingest),
        (ingest, dataset_id(*ORDERS)),
        (dataset_id(*ORDERS), daily),
        (daily, dataset_id(*REPORT)),
        (dataset_id(*REPORT), dashboard),
    }


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        ("upstream", {"orders", "ingest", "raw"}),
        ("downstream", {"orders", "daily", "report", "dashboard"}),
        # The union of both walks: customers, sync_crm and crm (reachable only against the
        # flow, through daily) are not in it.
        ("both", {"orders", "ingest", "raw", "daily", "report", "dashboard"}),
    ],
)
def test_lineage_directions(api: Api, direction: str, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "orders": dataset_id(*ORDERS),
        "raw": dataset_id(*RAW),
        "report": dataset_id(*REPORT),
        "ingest": job_id("spark", "ingest"),
        "daily": job_id("spark", "daily"),
        "dashboard": job_id(*DASHBOARD, "service"),
    }
    doc = api.lineage(*ORDERS, direction=direction)
    assert node_ids(doc) == {names[n] for n in expected}
    if direction == "both":
        assert doc == api.lineage(*ORDERS)  # the default


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (0, {"report"}),
        (1, {"report", "daily"}),  # the writer job is at depth 1
        (2, {"report", "daily", "orders", "customers"}),  # its inputs at depth 2
        (3, {"report", "daily", "orders", "customers", "ingest", "sync_crm"}),
        (4, {"report", "daily", "orders", "customers", "ingest", "sync_crm", "raw", "crm"}),
    ],
)
def test_lineage_depth_counts_edges(api: Api, depth: int, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "report": dataset_id(*REPORT),
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "customers": dataset_id(*CUSTOMERS),
        "ingest": job_id("spark", "ingest"),
        "sync_crm": job_id("spark", "sync_crm"),
        "raw": dataset_id(*RAW),
        "crm": dataset_id(*CRM),
    }
    doc = api.lineage(*REPORT, direction="upstream", depth=depth)
    assert node_ids(doc) == {names[n] for n in expected}
    assert len(doc["edges"]) == len(expected) - 1  # a tree upstream of the report


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        # depth 2 from a job: its inputs, then their writers
        ("upstream", {"daily", "orders", "customers", "ingest", "sync_crm"}),
        ("downstream", {"daily", "report", "dashboard"}),
    ],
)
def test_lineage_from_a_job(api: Api, direction: str, expected: set[str]) -> None:
    api.ingest(*platform())
    names = {
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "customers": dataset_id(*CUSTOMERS),
        "report": dataset_id(*REPORT),
        "dashboard": job_id(*DASHBOARD, "service"),
        "ingest": job_id("spark", "ingest"),
        "sync_crm": job_id("spark", "sync_crm"),
    }
    doc = api.get(
        "/api/v1/lineage", type="job", namespace="spark", name="daily", direction=direction, depth=2
    )
    assert doc["root"] == job_id("spark", "daily")
    assert node_ids(doc) == {names[n] for n in expected}


def cycle() -> list[Event]:
    """D → J → E → K → D, and a branch E → L → F off the cycle."""
    d, e, f = ("w", "D"), ("w", "E"), ("w", "F")
    return [
        run_event("COMPLETE", "J", run_id(1), at(9), inputs=[ds(*d)], outputs=[ds(*e)]),
        run_event("COMPLETE", "K", run_id(2), at(9), inputs=[ds(*e)], outputs=[ds(*d)]),
        run_event("COMPLETE", "L", run_id(3), at(9), inputs=[ds(*e)], outputs=[ds(*f)]),
    ]


def test_cycles_terminate(api: Api) -> None:
    api.ingest(*cycle())
    doc = api.lineage("w", "D", direction="upstream", depth=20)
    assert node_ids(doc) == {
        dataset_id("w", "D"),
        dataset_id("w", "E"),
        job_id("spark", "J"),
        job_id("spark", "K"),
    }
    assert len(doc["edges"]) == 4
    down = api.lineage("w", "D", direction="downstream", depth=20)
    assert node_ids(down) == node_ids(doc) | {job_id("spark", "L"), dataset_id("w", "F")}


def test_both_is_the_union_of_the_two_walks_on_a_cycle(api: Api) -> None:
    api.ingest(*cycle())
    up = node_ids(api.lineage("w", "D", direction="upstream"))
    down = node_ids(api.lineage("w", "D", direction="downstream"))
    assert node_ids(api.lineage("w", "D", direction="both")) == up | down


@pytest.mark.parametrize(("limit", "truncated"), [(1, True), (3, True), (8, False), (500, False)])
def test_lineage_limit_truncates(api: Api, limit: int, truncated: bool) -> None:
    api.ingest(*platform())
    doc = api.lineage(*REPORT, direction="upstream", limit=limit)
    assert len(doc["nodes"]) == min(limit, 8)
    assert doc["truncated"] is truncated
    assert dataset_id(*REPORT) in node_ids(doc)
    for e in doc["edges"]:  # no edge points outside the nodes returned
        assert {e["source"], e["target"]} <= node_ids(doc)


def test_edge_times_run_count_and_last_state(api: Api) -> None:
    api.ingest(
        run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)]),
        run_event(
            "COMPLETE", "daily", run_id(1), at(9, 30), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]
        ),
        # A later run, sent in +02:00 with microseconds, that fails.
        run_event(
            "START",
            "daily",
            run_id(2),
            f"{DAY}T12:00:00.123456+02:00",
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
        ),
        run_event("FAIL", "daily", run_id(2), at(10, 5)),
        run_event("COMPLETE", "backfill", run_id(3), at(7), outputs=[ds(*REPORT)]),
    )
    doc = api.lineage(*REPORT, direction="upstream")
    daily = job_id("spark", "daily")
    read = edge(doc, dataset_id(*ORDERS), daily)
    assert (read["first_seen"], read["last_seen"]) == (at(9), f"{DAY}T10:00:00.123456Z")
    assert (read["run_count"], read["last_state"], read["static"]) == (2, "FAIL", False)
    write = edge(doc, daily, dataset_id(*REPORT))
    assert (write["first_seen"], write["last_seen"]) == (at(9, 30), f"{DAY}T10:00:00.123456Z")
    assert (write["run_count"], write["last_state"]) == (2, "FAIL")
    backfill = edge(doc, job_id("spark", "backfill"), dataset_id(*REPORT))
    assert (backfill["run_count"], backfill["last_state"]) == (1, "COMPLETE")


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ("COMPLETE", {"report", "backfill"}),
        ("FAIL", {"report", "daily", "orders"}),
        ("COMPLETE,FAIL", {"report", "daily", "orders", "backfill"}),
        ("RUNNING", {"report"}),
    ],
)
def test_states_filter_keeps_edges_by_last_state(api: Api, states: str, expected: set[str]) -> None:
    api.ingest(
        run_event("FAIL", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]),
        run_event("COMPLETE", "backfill", run_id(2), at(7), outputs=[ds(*REPORT)]),
    )
    names = {
        "report": dataset_id(*REPORT),
        "daily": job_id("spark", "daily"),
        "orders": dataset_id(*ORDERS),
        "backfill": job_id("spark", "backfill"),
    }
    doc = api.lineage(*REPORT, direction="upstream", states=states)
    assert node_ids(doc) == {names[n] for n in expected}
    assert {e["last_state"] for e in doc["edges"]} <= set(states.split(","))


def test_as_of_answers_with_the_graph_as_it_stood(api: Api) -> None:
    # 09:00 `daily` writes the report (START at 9, FAIL at 9:30); 11:00 a second run
    # completes; 12:00 the report learns an alias and a job reads it under that alias.
    alias = ("hive://metastore", "analytics.report")
    api.ingest(
        run_event("START", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)]),
        run_event("FAIL", "daily", run_id(1), at(9, 30), outputs=[ds(*REPORT)]),
        run_event("COMPLETE", "daily", run_id(2), at(11), outputs=[ds(*REPORT)]),
        run_event(
            "COMPLETE",
            "alias_writer",
            run_id(3),
            at(12),
            outputs=[ds(*REPORT, symlinks=symlinks((*alias, "TABLE")))],
        ),
        run_event("COMPLETE", "reader", run_id(4), at(12), inputs=[ds(*alias)]),
    )
    canonical = dataset_id(*alias)  # hive://… sorts before postgres://…: canonical now

    def lineage(as_of: str | None) -> dict[str, Any]:
        params = {"asOf": as_of} if as_of else {}
        return api.lineage(*REPORT, direction="both", **params)

    before = lineage(at(8))
    assert before["edges"] == [] and node_ids(before) == {dataset_id(*REPORT)}
    at_ten = lineage(at(10))
    assert at_ten["root"] == dataset_id(*REPORT)  # no alias yet: its own node
    writer = edge(at_ten, job_id("spark", "daily"), dataset_id(*REPORT))
    assert (writer["first_seen"], writer["last_seen"]) == (at(9, 30), at(9, 30))
    assert (writer["run_count"], writer["last_state"]) == (1, "FAIL")
    assert job_id("spark", "reader") not in node_ids(at_ten)
    later = lineage(at(11, 30))
    writer = edge(later, job_id("spark", "daily"), dataset_id(*REPORT))
    assert (writer["last_seen"], writer["run_count"], writer["last_state"]) == (
        at(11),
        2,
        "COMPLETE",
    )
    now = lineage(None)
    # Named as asked, though the alias is its canonical identity now.
    assert now["root"] == dataset_id(*REPORT) and canonical not in node_ids(now)
    assert job_id("spark", "reader") in node_ids(now)
    # asOf at the last instant (inclusive) is the graph as it is.
    assert lineage(at(12)) == now
    problem = api.problem(
        "GET", "/api/v1/lineage", 400, namespace=REPORT[0], name=REPORT[1], asOf="noon"
    )
    assert "asOf" in problem["detail"]


def test_node_ids_percent_encode_the_name(api: Api) -> None:
    namespace, name = "postgres://db:5432", "sales:orders%2026"
    api.ingest(
        run_event(
            "COMPLETE",
            "load:orders%v2",
            run_id(1),
            at(9),
            outputs=[ds(namespace, name)],
            namespace="airflow://prod",
        )
    )
    doc = api.lineage(namespace, name)
    root = "dataset:postgres://db:5432:sales%3Aorders%252026"
    assert doc["root"] == root
    job = "job:airflow://prod:load%3Aorders%25v2"
    assert node_ids(doc) == {root, job}
    for node in doc["nodes"]:
        head, _, encoded = node["id"].rpartition(":")  # an id splits from the right
        assert head == f"{node['type']}:{node['namespace']}"
        assert urllib.parse.unquote(encoded) == node["name"]
    assert api.dataset(namespace, name)["id"] == root


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/lineage", {"namespace": "pg", "name": "nothing"}),
        ("/api/v1/lineage", {"type": "job", "namespace": "spark", "name": "nothing"}),
        ("/api/v1/lineage", {"type": "service", "namespace": "superset", "name": "nothing"}),
        ("/api/v1/column-lineage", {"namespace": "pg", "name": "nothing", "field": "id"}),
        ("/api/v1/datasets", {"namespace": "pg", "name": "nothing"}),
        ("/api/v1/jobs", {"namespace": "spark", "name": "nothing"}),
        ("/api/v1/deliveries/01JNOSUCHDELIVERY000000000", {}),
    ],
)
def test_unknown_entities_are_404(api: Api, path: str, params: dict[str, str]) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", path, 404, **params)
    assert doc["type"].endswith("/not-found")


REPORT_QUERY = {"namespace": REPORT[0], "name": REPORT[1]}


@pytest.mark.parametrize(
    "params",
    [
        {"name": REPORT[1]},
        {"namespace": REPORT[0]},
        {**REPORT_QUERY, "direction": "sideways"},
        {**REPORT_QUERY, "depth": "two"},
        {**REPORT_QUERY, "depth": -1},
        {**REPORT_QUERY, "depth": 1000},
        {**REPORT_QUERY, "limit": 0},
        {**REPORT_QUERY, "states": "DONE"},
        {**REPORT_QUERY, "states": "COMPLETE,done"},
        {**REPORT_QUERY, "type": "table"},
    ],
    ids=[
        "no-namespace",
        "no-name",
        "direction",
        "depth-text",
        "depth-negative",
        "depth-huge",
        "limit-zero",
        "states",
        "states-partly",
        "type",
    ],
)
def test_bad_lineage_parameters_are_400(api: Api, params: dict[str, Any]) -> None:
    api.ingest(daily_run(1))
    doc = api.problem("GET", "/api/v1/lineage", 400, **params)
    assert doc["type"].endswith("/bad-parameter")
