"""docs/architecture.md#order-independence: the graph is a function of the SET of accepted events.

Hypothesis draws event sets over a small universe (so that runs, jobs, datasets, aliases
and column edges collide often): several jobs and runs, symlinks, column lineage (declared,
and derived from the job's SQL for the edges the same outputs declare elsewhere),
duplicates, JobEvents, DatasetEvents, ``_deleted`` facets, unknown times, renames and
drops; what each run said about its inputs and outputs (statistics, assertions, deletion
markers). Every permutation and split into single and batch deliveries must export the
same graph — and list the same runs of every dataset, with the same statistics,
assertions, schema changes and quality marks — and so must a reprojection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embrasure.projector.worker import reproject
from embrasure.store import open_store

from event_strategies import events, graph_bytes, project, splits


# fresh_db is a function-scoped fixture on purpose: it hands out a new database per call.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(events, st.data())
def test_any_order_and_split_exports_the_same_graph(
    fresh_db: Callable[[], str], items: list[dict[str, Any]], data: st.DataObject
) -> None:
    reference = project(fresh_db(), [items])
    other = data.draw(splits(items))
    per_tx = data.draw(st.integers(1, 3))
    interleave = data.draw(st.booleans())
    assert project(fresh_db(), other, per_tx, interleave) == reference


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events)
def test_reproject_exports_the_same_graph(
    fresh_db: Callable[[], str], items: list[dict[str, Any]]
) -> None:
    db_url = fresh_db()
    before = project(db_url, [items])
    store = open_store(db_url)
    try:
        generation = reproject(store)
        with store.reader() as reader:
            after = graph_bytes(reader)
    finally:
        store.close()
    assert generation == 2
    assert after == before
