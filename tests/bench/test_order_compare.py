"""bench/peers/: the pure parts of the comparison with Marquez — the two orders, the
snapshot diff and its explanation, the node ids of both servers. The bench itself
(bench/peers/marquez.py) is not a test; these are what its report rests on."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from peers import order_compare
from peers.marquez import deliveries_of
from peers.order_compare import CorpusEvent
from peers.peer_api import Snapshot, embrasure_node, marquez_node

TYPES = ("START", "RUNNING", "COMPLETE", "FAIL", "OTHER", None)


@st.composite
def corpus_events(draw: st.DrawFn) -> list[CorpusEvent]:
    """Events of a few runs (some without a runId), in any order."""
    events = []
    for i in range(draw(st.integers(0, 25))):
        run = draw(st.sampled_from(["r1", "r2", "r3", None]))
        event: dict[str, object] = {"eventTime": "2026-01-01T00:00:00Z"}
        kind = draw(st.sampled_from(TYPES))
        if kind is not None:
            event["eventType"] = kind
        if run is not None:
            event["run"] = {"runId": run}
        events.append(CorpusEvent(f"f.json#{i}", event))
    return events


def _rank(e: CorpusEvent) -> int:
    return order_compare.LIFECYCLE.get(e.event_type, 2)


@given(corpus_events())
def test_both_orders_send_every_event_and_order_each_run_opposite_ways(
    events: list[CorpusEvent],
) -> None:
    runs = order_compare.runs_of(events)
    forward, backward = order_compare.forward(runs), order_compare.backward(runs)
    key = [e.where for e in events]
    assert sorted(e.where for e in forward) == sorted(key)
    assert sorted(e.where for e in backward) == sorted(key)
    for run in runs:
        ids = {e.where for e in run}
        ranks_f = [_rank(e) for e in forward if e.where in ids]
        ranks_b = [_rank(e) for e in backward if e.where in ids]
        assert ranks_f == sorted(ranks_f)
        assert ranks_b == sorted(ranks_b, reverse=True)


@given(corpus_events(), st.sampled_from(["embrasure", "marquez"]))
def test_backward_sends_each_event_twice_and_forward_once(
    events: list[CorpusEvent], kind: str
) -> None:
    forward = deliveries_of("forward", events, kind)
    backward = deliveries_of("backward", events, kind)
    assert len(forward) == len(events)
    assert all(path == "/api/v1/lineage" for path, _, _ in forward)
    sent = sum(body.count(b'"eventTime"') for _, body, _ in backward)
    assert sent == 2 * len(events)
    if kind == "marquez":  # it has no batch route
        assert all(path == "/api/v1/lineage" for path, _, _ in backward)


def _snapshot(nodes: set[str], edges: set[tuple[str, str]], runs: dict[str, str]) -> Snapshot:
    def node(n: str) -> tuple[str, str, str]:
        return ("dataset" if n.startswith("d") else "job", "ns", n)

    return Snapshot({node(n) for n in nodes}, {(node(a), node(b)) for a, b in edges}, dict(runs))


names = st.sets(st.sampled_from(["d1", "d2", "d3", "j1", "j2"]))
states = st.dictionaries(st.sampled_from(["r1", "r2", "r3"]), st.sampled_from(["START", "FAIL"]))


@given(names, names, states, states)
def test_diff_is_empty_for_equal_snapshots_and_symmetric_otherwise(
    a: set[str], b: set[str], ra: dict[str, str], rb: dict[str, str]
) -> None:
    first, second = _snapshot(a, set(), ra), _snapshot(b, set(), rb)
    assert order_compare.diff(first, first).count() == 0
    there, back = order_compare.diff(first, second), order_compare.diff(second, first)
    assert there.nodes_only_first == back.nodes_only_second
    assert there.runs_only_first == back.runs_only_second
    assert [(r, y, x) for r, x, y in there.run_states] == back.run_states
    assert there.count() == 0 if (a, ra) == (b, rb) else there.count() > 0


def test_a_difference_is_explained_by_the_events_naming_it() -> None:
    start = CorpusEvent(
        "spark/x.json#0",
        {
            "eventType": "START",
            "run": {"runId": "r1"},
            "job": {"namespace": "ns", "name": "j1"},
            "outputs": [{"namespace": "ns", "name": "d1"}],
        },
    )
    complete = CorpusEvent(
        "spark/x.json#1", {**start.event, "eventType": "COMPLETE", "outputs": []}
    )
    first = _snapshot({"j1", "d1"}, {("j1", "d1")}, {"r1": "COMPLETE"})
    second = _snapshot({"j1", "d1"}, set(), {"r1": "START"})
    found = order_compare.diff(first, second)
    explained = order_compare.explain(found, order_compare.EventIndex.of([start, complete]))
    by_kind = {d["kind"]: d for d in explained}
    assert set(by_kind) == {"edge only after forward", "run state differs"}
    assert by_kind["edge only after forward"]["events"] == ["spark/x.json#0 START"]
    assert by_kind["run state differs"]["what"] == "r1: COMPLETE (forward) / START (backward)"
    assert by_kind["run state differs"]["events"] == [
        "spark/x.json#0 START",
        "spark/x.json#1 COMPLETE",
    ]


def test_node_ids_of_both_servers_split_where_their_parsers_do() -> None:
    assert marquez_node("dataset:postgres://warehouse:5432:analytics.t") == (
        "dataset",
        "postgres://warehouse:5432",
        "analytics.t",
    )
    assert marquez_node("job:spark://etl-cluster:sales.task_01") == (
        "job",
        "spark://etl-cluster",
        "sales.task_01",
    )
    assert embrasure_node("dataset:postgres://db:5432:a%3Ab%25") == (
        "dataset",
        "postgres://db:5432",
        "a:b%",
    )
    assert embrasure_node("service:ns:svc") == ("job", "ns", "svc")
