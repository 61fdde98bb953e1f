"""docs/queries.md#asof: ``asOf=T`` answers "as if only the events with eventTime ≤ T had been
received". Checked as that sentence says: for random event sets (the universe of
test_order_independence: aliases, renames, JobEvents, services, unknown times…) and any T,
the lineage of every node at T on the whole graph equals its lineage on a graph built
from only the events at or before T (unknown times included: they order before all)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embrasure.model import DatasetId, JobId
from embrasure.projector.times import parse_event_time
from embrasure.projector.worker import Projector
from embrasure.query.as_of import AsOfGraph
from embrasure.query.entities import Identities
from embrasure.query.graph import Graph
from embrasure.query.lineage import lineage
from embrasure.store import Store, open_store
from embrasure.store.rows import DatasetRow, JobRow

from event_strategies import TIMES, deliveries, events


def _key(time: str | None) -> str:
    parsed, _ = parse_event_time(time)
    return parsed.key if parsed is not None else ""


def loaded(db_url: str, items: list[dict[str, Any]]) -> Store:
    store = open_store(db_url)
    for draft in deliveries([items]):
        store.append([draft])
    Projector(store).run_until_caught_up()
    return store


def roots(store: Store) -> list[DatasetId | JobId]:
    """Every node: canonical datasets, then jobs."""
    with store.reader() as reader:
        ids = Identities(reader)
        datasets = sorted(
            {
                ids.canonical([DatasetId(r.ns, r.name)])[DatasetId(r.ns, r.name)]
                for r in reader.rows(DatasetRow)
            }
        )
        jobs = sorted(JobId(r.ns, r.name) for r in reader.rows(JobRow))
    return [*datasets, *jobs]


def lineage_at(store: Store, root: DatasetId | JobId, key: str | None) -> Any:
    with store.reader() as reader:
        graph = Graph(reader) if key is None else AsOfGraph(reader, key)
        if isinstance(root, DatasetId):
            root = graph.ids.canonical([root])[root]
        return lineage(graph, root, "both", 5, None, 500)


@settings(
    max_examples=40,
    deadline=None,
    # fresh_db hands out a new database per call (see conftest).
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events, st.sampled_from([t for t in TIMES if t is not None]))
def test_as_of_is_the_graph_of_the_events_until_then(
    fresh_db: Callable[[], str], items: list[dict[str, Any]], time: str
) -> None:
    key = _key(time)
    past = [e for e in items if _key(e.get("eventTime")) <= key]
    whole = loaded(fresh_db(), items)
    then = loaded(fresh_db(), past) if past else None
    try:
        for root in roots(whole):
            at = lineage_at(whole, root, key)
            if then is None:
                assert at["edges"] == [] and len(at["nodes"]) == 1
                continue
            expected = lineage_at(then, root, None)
            # A node the past never named still answers, with itself alone.
            if not expected["edges"] and len(expected["nodes"]) == 1:
                assert at["edges"] == []
                continue
            assert at == expected, root
        # Far enough in the future, asOf is the graph as it is.
        for root in roots(whole):
            assert lineage_at(whole, root, "9999-12-31T23:59:59.999999999Z") == lineage_at(
                whole, root, None
            )
    finally:
        whole.close()
        if then is not None:
            then.close()
