"""The store merges rows in SQL (schema.MERGES) by the rules the projector folds a
batch with in Python (graph_rows, facets, column_lineage): both must agree, or the graph
would depend on how the log was cut into transactions (docs/architecture.md#order-independence).

For random pairs of partial rows, merging the second into the stored first with
``ProjectionTx.merge`` must give the row the Python rule computes — and, the rules being
commutative, so must merging them the other way round.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embrasure.model import DatasetId, EventTime, JobId
from embrasure.projector import column_lineage, graph_rows, quality
from embrasure.projector import facets as facet_rules
from embrasure.projector.canonical import canonical_json
from embrasure.projector.column_lineage import ColumnEdge
from embrasure.projector.graph_rows import EdgeSpan
from embrasure.projector.runs import RunEventFact, RunPart, merge_run_parts, resolve_run
from embrasure.store import Store, open_store
from embrasure.store.rows import GRAPH_ROWS
from embrasure.store.schema import COLUMNS

from conftest import BACKENDS, pg_database, sqlite_url

# Few values, so that ties (equal times, equal values, equal keys) are common. Two
# spellings of one instant share a key and differ in text.
TIMES = st.sampled_from(
    [
        None,
        EventTime("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        EventTime("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00.000Z"),
        EventTime("2026-11-30T10:00:00.500000000Z", "2026-11-30T10:00:00.5Z"),
    ]
)
SUBTYPES = st.lists(
    st.sampled_from(
        ["DIRECT/IDENTITY", "INDIRECT/JOIN", "INDIRECT/FILTER", "WEIRD/ünïcode", 'Q/"x"\\', "T/\t"]
    ),
    unique=True,
).map(lambda xs: tuple(sorted(xs)))

_keys = itertools.count()


@pytest.fixture(scope="module", params=BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """The SQL of both dialects: one database per backend for the whole module."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = sqlite_url(tmp_path_factory.mktemp("merge") / "merge.db")
        else:
            url = stack.enter_context(pg_database())
        store = open_store(url)
        stack.callback(store.close)
        yield store


def merged_in_sql(store: Store, table: str, key: tuple[Any, ...], *values: Any) -> Any:
    """Merge the value tuples one after the other into a new row with ``key``; the
    stored row's value columns."""
    record = GRAPH_ROWS[table].row
    with store.projection() as tx:
        for value in values:
            tx.merge(record, [record._make((*key, *value))])  # type: ignore[attr-defined]
        row = tx.load(record, [key])[key]
        tx.delete(record, [key])
    return row[len(key) :]


def check(
    store: Store,
    table: str,
    a: Any,
    b: Any,
    row: Callable[[Any], tuple[Any, ...]],
    join: Callable[[Any, Any], Any],
    idempotent: bool = True,
) -> None:
    # A new key each time, typed as its columns are (PostgreSQL checks; SQLite would not).
    key = tuple(0 if c == "static" else f"k{next(_keys)}" for c in COLUMNS[table][0])
    expected = row(join(a, b))
    assert merged_in_sql(store, table, key, row(a), row(b)) == expected
    assert merged_in_sql(store, table, key, row(b), row(a)) == expected
    if idempotent:
        assert merged_in_sql(store, table, key, row(a), row(a)) == row(a)


@st.composite
def spans(draw: st.DrawFn) -> EdgeSpan:
    span = EdgeSpan()
    for time in draw(st.lists(TIMES, max_size=3)):
        span.add(time)
    return span


def joined_spans(a: EdgeSpan, b: EdgeSpan) -> EdgeSpan:
    out = EdgeSpan()
    for time in (a.first, a.last, b.first, b.last):
        out.add(time)
    return out


LAST_RUNS = st.sampled_from(
    [
        ("", ""),
        ("", "r2"),
        ("2026-11-30T09:00:00.000000000Z", "r1"),
        ("2026-11-30T09:00:00.000000000Z", "r2"),
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    a=st.tuples(spans(), st.integers(0, 3), LAST_RUNS),
    b=st.tuples(spans(), st.integers(0, 3), LAST_RUNS),
)
def test_edges(store: Store, a: Any, b: Any) -> None:
    check(
        store,
        "edges",
        a,
        b,
        lambda v: (*graph_rows.span_row(v[0]), v[1], *v[2]),
        lambda x, y: (joined_spans(x[0], y[0]), x[1] + y[1], max(x[2], y[2])),
        idempotent=False,  # run_count adds: the projector sends only runs new to the edge
    )


@settings(max_examples=100, deadline=None)
@given(a=st.tuples(*[st.integers(0, 1)] * 3), b=st.tuples(*[st.integers(0, 1)] * 3))
def test_jobs(store: Store, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    check(store, "jobs", a, b, tuple, lambda x, y: tuple(map(max, x, y)))


VERSIONS = st.tuples(st.sampled_from([None, "v1", "v2"]), TIMES)


RUN_KEYS = st.sampled_from(["", "2026-11-30T09:00:00.000000000Z", "2026-11-30T10:00:00.5Z"])


@settings(max_examples=150, deadline=None)
@given(a=st.tuples(VERSIONS, RUN_KEYS), b=st.tuples(VERSIONS, RUN_KEYS))
def test_run_io_versions(store: Store, a: Any, b: Any) -> None:
    # Only rows naming a version are merged (the rest are inserted with NULLs first); the
    # run's latest eventTime key is the greatest (sync_run_keys then sets the runs row's).
    def row(v: Any) -> tuple[Any, ...]:
        (version, time), run_key = v
        return (version, graph_rows.time_key(time) if version is not None else None, run_key)

    check(
        store,
        "run_io",
        a,
        b,
        row,
        lambda x, y: (graph_rows.later_version(x[0], y[0]), max(x[1], y[1])),
    )


CHECKS = st.tuples(
    st.sampled_from(["", "2026-11-30T09:00:00.000000000Z", "2026-11-30T10:00:00.000000000Z"]),
    st.sampled_from([b"\x01" * 16, b"\x02" * 16, b"\xff" * 16]),
    st.integers(0, 1),
)


@settings(max_examples=100, deadline=None)
@given(a=CHECKS, b=CHECKS)
def test_dataset_checks(store: Store, a: Any, b: Any) -> None:
    # A result is a function of its assertion, so one hash never comes with two flags.
    b = (b[0], b[1], a[2]) if a[1] == b[1] else b
    check(store, "dataset_checks", a, b, tuple, quality.later_check)


FACET_VALUES = st.sampled_from(
    [{"a": 1}, {"a": 2}, {"b": "ü"}, {"_deleted": True}, {"_deleted": True, "x": 1}]
)


# An event has one time and one value per facet: the event decides both. e2 and e3 are
# different events at one instant written two ways.
EVENT_TIMES = {
    "e1": None,
    "e2": EventTime("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
    "e3": EventTime("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00.000Z"),
    "e4": EventTime("2026-11-30T10:00:00.500000000Z", "2026-11-30T10:00:00.5Z"),
}
EVENT_VALUES = st.fixed_dictionaries({e: FACET_VALUES for e in EVENT_TIMES})


@st.composite
def slot_pairs(draw: st.DrawFn) -> tuple[facet_rules.FacetSlot, facet_rules.FacetSlot]:
    values = draw(EVENT_VALUES)

    def slot() -> facet_rules.FacetSlot:
        events = draw(st.lists(st.sampled_from(sorted(EVENT_TIMES)), min_size=1, max_size=3))
        return facet_rules.fold_facets([("f", EVENT_TIMES[e], e, values[e]) for e in events])["f"]

    return slot(), slot()


@settings(max_examples=200, deadline=None)
@given(pair=slot_pairs())
def test_facets(store: Store, pair: tuple[facet_rules.FacetSlot, facet_rules.FacetSlot]) -> None:
    check(store, "facets", *pair, graph_rows.facet_row, facet_rules.merge_slots)


SOURCE, TARGET, JOB = DatasetId("ns", "in"), DatasetId("ns", "out"), JobId("ns", "job")


@st.composite
def column_edges(draw: st.DrawFn) -> tuple[ColumnEdge, EdgeSpan]:
    mapping = draw(st.booleans())
    edge = ColumnEdge(
        SOURCE,
        "a",
        TARGET,
        "b",
        JOB,
        "mapping" if mapping else "indirect",
        draw(st.sampled_from(column_lineage.CLASSES)) if mapping else None,
        draw(st.booleans()),
        draw(SUBTYPES),
    )
    return edge, draw(spans())


@settings(max_examples=200, deadline=None)
@given(a=column_edges(), b=column_edges())
def test_column_edges(store: Store, a: Any, b: Any) -> None:
    check(
        store,
        "column_edges",
        a,
        b,
        lambda v: graph_rows.column_row(*v),
        lambda x, y: (column_lineage.merge_edges(x[0], y[0]), joined_spans(x[1], y[1])),
    )


def test_subtypes_are_written_as_the_projector_writes_them(store: Store) -> None:
    # The SQL union must produce the very bytes orjson would: exports compare bytes.
    a = ("DIRECT/IDENTITY", 'Q/"x\\', "T/\t\u0001", "W/ünï")
    b = ("A/é", "DIRECT/IDENTITY", "Z/\u2028")
    key = tuple(f"u{i}" for i in range(9))
    span = graph_rows.span_row(EdgeSpan())
    row = merged_in_sql(
        store,
        "column_edges",
        key,
        ("mapping", "direct", 0, canonical_json(list(a)).decode(), *span),
        ("mapping", "direct", 0, canonical_json(list(b)).decode(), *span),
    )
    assert row[3] == canonical_json(sorted(set(a) | set(b))).decode()


RUN_EVENTS = {
    # event id → (eventType, eventTime, job, parent run): e2/e3 share an instant.
    "e1": ("START", None, ("ns", "a"), None),
    "e2": ("COMPLETE", EVENT_TIMES["e2"], ("ns", "a"), "p1"),
    "e3": ("FAIL", EVENT_TIMES["e3"], ("ns", "b"), None),
    "e4": ("RUNNING", EVENT_TIMES["e4"], ("ns", "b"), "p2"),
    "e5": ("OTHER", EVENT_TIMES["e4"], ("ns", "a"), "p1"),
}


@st.composite
def run_part_pairs(draw: st.DrawFn) -> tuple[RunPart, RunPart]:
    def part() -> RunPart:
        events = draw(st.lists(st.sampled_from(sorted(RUN_EVENTS)), min_size=1, max_size=3))
        parts = []
        for e in events:
            event_type, time, job, parent_run = RUN_EVENTS[e]
            rank = (graph_rows.time_key(time), e)
            parent = (parent_run, "ns", "dag", None, None, None) if parent_run else None
            state = resolve_run([RunEventFact(e, event_type, time)])
            parts.append(RunPart(state, job, rank, parent, rank if parent else None))
        return functools.reduce(merge_run_parts, parts)

    return part(), part()


@settings(max_examples=200, deadline=None)
@given(pair=run_part_pairs())
def test_runs(store: Store, pair: tuple[RunPart, RunPart]) -> None:
    check(
        store,
        "runs",
        *pair,
        lambda part: graph_rows.run_row("r", part)[1:],
        merge_run_parts,
    )
