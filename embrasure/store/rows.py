"""Typed rows: one record per graph table (the reader's own shapes are in store/read_rows.py).

Each graph table's record names its columns in table order, key columns first, then
value columns: ``GRAPH_ROWS`` says how many lead fields are the key, and
``schema.COLUMNS`` is derived from these classes, so a record and its table cannot drift.
The records are ``NamedTuple``s: still tuples, so the SQL layer binds them positionally
and compares keys as tuples, while the rest of the code reads them by name.

Types are what the drivers hand back: TEXT is ``str``, INTEGER ``int`` (flags are 0/1),
BLOB/BYTEA ``bytes``; a nullable column is ``… | None``. Nothing checks them at run time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeVar

import orjson

# -- the graph tables (schema.GRAPH_TABLES) -------------------------------------------------


class DeliveryOutcome(NamedTuple):
    """``deliveries``: what projecting one delivery of the log came to."""

    seq: int
    projected: int
    quarantined: int
    edges_created: int
    kinds: str  # the kinds of its plain items (no items row): encode_kinds


class ItemRow(NamedTuple):
    """``items``: the outcome of an item that is not plain (ItemRow.plain): quarantined,
    projected with warnings, or replayed. A plain one has no row: its kind is in its
    delivery's ``kinds`` (docs/architecture.md#storage)."""

    seq: int
    idx: int
    kind: str | None
    outcome: str  # projected / quarantined
    reason: str | None
    retriable: int
    warnings: str  # JSON array of strings

    @classmethod
    def projected(cls, seq: int, idx: int, kind: str | None, warnings: str = "[]") -> ItemRow:
        return cls(seq, idx, kind, "projected", None, 0, warnings)

    @classmethod
    def quarantined(
        cls, seq: int, idx: int, kind: str | None, reason: str, retriable: bool = False
    ) -> ItemRow:
        return cls(seq, idx, kind, "quarantined", reason, int(retriable), "[]")

    @property
    def plain(self) -> bool:
        """Projected with no warnings: all there is to say of it is its kind."""
        return self.outcome == "projected" and self.warnings == "[]" and self.kind is not None


def encode_kinds(kinds: Iterable[str]) -> str:
    """Kinds in index order → a run-length JSON ``[[kind, count], …]``: a delivery's items
    are nearly always of one kind, so 500 RunEvents take ``[["RunEvent",500]]``."""
    runs = [[kind, len(list(group))] for kind, group in itertools.groupby(kinds)]
    return orjson.dumps(runs).decode()


def decode_kinds(text: str) -> list[str]:
    """``encode_kinds``'s text → the kinds, one per item, in index order."""
    return [kind for kind, count in orjson.loads(text) for _ in range(count)]


class FailureRow(NamedTuple):
    """``failures``: a delivery the projector failed on."""

    seq: int
    attempts: int
    error: str


class EventRow(NamedTuple):
    """``events``: an event, where it was first seen, and its shape (what it names apart
    from its run and time)."""

    event_id: str
    event_type: str | None
    time_key: str
    time_text: str | None
    run_id: str | None
    seq: int
    idx: int
    shape_key: bytes


class ShapeRow(NamedTuple):
    """``shapes``: what an event names apart from its run and time — its kind, job, edges
    (``io_sets``) and job and dataset facets (``facet_sets``). A job's runs name the same
    shape, so it is stored once per distinct one."""

    shape_key: bytes
    kind: str
    job_ns: str | None
    job_name: str | None
    io_key: bytes | None
    facets_key: bytes | None


class IoSetRow(NamedTuple):
    """``io_sets``: one job ↔ dataset edge of the set an event names."""

    io_key: bytes
    job_ns: str
    job_name: str
    ds_ns: str
    ds_name: str
    direction: str
    static: int


class FacetSetRow(NamedTuple):
    """``facet_sets``: one job or dataset facet value of the set an event names."""

    facets_key: bytes
    entity: str
    name: str
    value_hash: bytes


class DatasetRow(NamedTuple):
    """``datasets``: a dataset identity as sent."""

    ns: str
    name: str


class NameRow(NamedTuple):
    """``names``: a dataset or job identity interned as a small integer, which the
    column tables store in its place (internal to a generation)."""

    id: int
    ns: str
    name: str


class FieldRow(NamedTuple):
    """``fields``: a field a dataset's schema facet or column lineage named."""

    ns: str
    name: str
    field: str


class FieldNameRow(NamedTuple):
    """``field_names``: every field name once, interned as a small integer."""

    id: int
    field: str


class LinkRow(NamedTuple):
    """``links``: a symlink or rename between two dataset identities."""

    a_ns: str
    a_name: str
    b_ns: str
    b_name: str
    kind: str  # TABLE / RENAME / LOCATION
    type: str | None
    first_key: str


class CanonicalRow(NamedTuple):
    """``canonical``: an identity in a group of more than one, and its group's node."""

    ns: str
    name: str
    c_ns: str
    c_name: str
    renamed: int


class JobRow(NamedTuple):
    """``jobs``: a job, and which kinds of event named it."""

    ns: str
    name: str
    run_events: int
    job_events_out: int
    job_events_in: int


class RunRow(NamedTuple):
    """``runs``: a run merged from every event naming it."""

    run_id: str
    job_ns: str
    job_name: str
    state: str | None
    started_key: str | None
    started_text: str | None
    ended_key: str | None
    ended_text: str | None
    latest_key: str
    parent_run_id: str | None
    parent_job_ns: str | None
    parent_job_name: str | None
    root_run_id: str | None
    root_job_ns: str | None
    root_job_name: str | None
    job_key: str
    job_event: bytes  # event ids as their 32 bytes: they only rank (schema.py says why)
    win_terminal: int
    win_key: str
    decided_by: bytes
    parent_key: str | None
    parent_event: bytes | None


class EdgeRow(NamedTuple):
    """``edges``: a job ↔ dataset edge, as the identities were sent."""

    job_ns: str
    job_name: str
    ds_ns: str
    ds_name: str
    direction: str  # 'in': dataset → job, 'out': job → dataset
    static: int
    first_key: str | None
    first_text: str | None
    last_key: str | None
    last_text: str | None
    run_count: int
    last_run_key: str
    last_run: str


class TrimmedEdgeRow(NamedTuple):
    """``trimmed_edges``: what the runs --retain-runs removed contributed to an edge
    (lifecycle/run_retention.py), for asOf after the run horizon (query/as_of.py)."""

    job_ns: str
    job_name: str
    ds_ns: str
    ds_name: str
    direction: str
    first_key: str | None
    first_text: str | None
    last_key: str | None
    last_text: str | None
    run_count: int
    last_run_key: str
    last_run: str
    last_state: str | None  # the state the last of those runs ended in


class RunIoRow(NamedTuple):
    """``run_io``: a dataset a run read or wrote, and the version it named."""

    run_id: str
    job_ns: str
    job_name: str
    ds_ns: str
    ds_name: str
    direction: str
    version: str | None
    version_key: str | None
    run_key: str  # its run's latest eventTime key ('' unknown): the dataset's run order


class DatasetCheckRow(NamedTuple):
    """``dataset_checks``: the latest result of one data-quality check of a dataset (as
    sent)."""

    ds_ns: str
    ds_name: str
    check_id: str  # [assertion, column, name] as canonical JSON
    check_key: str  # eventTime key of the result, '' unknown
    check_hash: bytes  # the assertion's hash
    failed: int  # 1: it said success false


# Joins the parts of a facet owner's key (``FacetRow.entity``: ``dataset<SEP>ns<SEP>name``,
# projector/shapes.py ``entity``); never in a JSON-escaped string.
SEP = "\x1f"


class FacetRow(NamedTuple):
    """``facets``: an entity's facet, its winning value (by hash) and its latest deletion."""

    entity: str
    name: str
    value_key: str | None  # '' an unknown eventTime; NULL with value_hash: no value
    value_hash: bytes | None  # facet_values.hash
    deleted_key: str | None  # NULL: no deletion marker


class FacetValueRow(NamedTuple):
    """``facet_values``: a facet value's canonical JSON, by hash, as stored
    (store/facet_values.py encodes and decodes it; GraphReader.facet_values reads it)."""

    hash: bytes
    encoding: int  # 0 plain UTF-8, 1 zstd
    value: bytes


class ColumnEdgeRow(NamedTuple):
    """``column_edges``: a column lineage edge, declared or derived from the job's SQL."""

    tgt_ns: str
    tgt_name: str
    tgt_field: str
    src_ns: str
    src_name: str
    src_field: str
    job_ns: str
    job_name: str
    derived: str  # '' declared, 'sql' parsed from the job's SQL
    kind: str  # mapping / indirect
    class_: str | None  # direct / expression / aggregate (the column is named ``class``)
    masked: int
    subtypes: str  # JSON array, sorted
    first_key: str | None
    first_text: str | None
    last_key: str | None
    last_text: str | None


class StoredField(NamedTuple):
    """``fields`` as stored: the field and the dataset interned (``FieldRow`` is what
    reads give and writes take)."""

    field: int  # field_names.id
    ds: int  # names.id


class StoredColumnEdge(NamedTuple):
    """``column_edges`` as stored: identities and fields interned (``ColumnEdgeRow`` is
    what reads give and writes take)."""

    tgt: int  # names.id
    tgt_field: int  # field_names.id
    src: int
    src_field: int
    job: int  # names.id ('' '' for no job)
    derived: str
    kind: str
    class_: str | None
    masked: int
    subtypes: str
    first_key: str | None
    first_text: str | None
    last_key: str | None
    last_text: str | None


class HiddenRow(NamedTuple):
    """``hidden``: the latest admin hide or unhide of an entity."""

    kind: str  # dataset / job / namespace
    ns: str
    name: str  # '' for a namespace
    hidden: int  # 1 hidden, 0 shown again
    seq: int
    at: str
    by_token: str | None
    reason: str | None


class TagRow(NamedTuple):
    """``tags``: the latest tag or untag of an entity, or a tag's definition."""

    kind: str  # dataset / field / job / tag
    ns: str
    name: str
    field: str  # '' but for a field
    tag: str
    present: int  # 1 tagged (or defined), 0 untagged
    seq: int
    description: str | None


class Table(NamedTuple):
    row: type[tuple[Any, ...]]
    keys: int  # how many of the row's lead fields are the table's key


# Every graph table (bar ``position``) and its record, in schema order.
GRAPH_ROWS: dict[str, Table] = {
    "deliveries": Table(DeliveryOutcome, 1),
    "items": Table(ItemRow, 2),
    "failures": Table(FailureRow, 1),
    "events": Table(EventRow, 1),
    "shapes": Table(ShapeRow, 1),
    "io_sets": Table(IoSetRow, 7),
    "facet_sets": Table(FacetSetRow, 3),
    "datasets": Table(DatasetRow, 2),
    "names": Table(NameRow, 1),
    "fields": Table(FieldRow, 3),
    "field_names": Table(FieldNameRow, 1),
    "links": Table(LinkRow, 5),
    "canonical": Table(CanonicalRow, 2),
    "jobs": Table(JobRow, 2),
    "runs": Table(RunRow, 1),
    "edges": Table(EdgeRow, 6),
    "trimmed_edges": Table(TrimmedEdgeRow, 5),
    "run_io": Table(RunIoRow, 6),
    "dataset_checks": Table(DatasetCheckRow, 3),
    "facets": Table(FacetRow, 2),
    "facet_values": Table(FacetValueRow, 1),
    "column_edges": Table(ColumnEdgeRow, 9),
    "hidden": Table(HiddenRow, 3),
    "tags": Table(TagRow, 5),
}

_TABLE_OF = {table.row: name for name, table in GRAPH_ROWS.items()}

# The tables whose rows name identities and fields by their ``names`` / ``field_names``
# ids, and their records as stored: the store translates (store/interned.py), so every
# other module reads and writes them by name (docs/architecture.md#storage).
INTERNED: dict[str, Table] = {
    "fields": Table(StoredField, 2),
    "column_edges": Table(StoredColumnEdge, 6),
}


# Fields named otherwise than their column: ``class`` is a Python keyword.
_COLUMN_OF = {"class_": "class"}


def columns_of(table: Table) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A table's (key columns, value columns), from its record's fields."""
    names = tuple(_COLUMN_OF.get(f, f) for f in table.row._fields)  # type: ignore[attr-defined]
    return names[: table.keys], names[table.keys :]


def table_of(row: type[tuple[Any, ...]]) -> str:
    """The graph table a record class is a row of."""
    return _TABLE_OF[row]


R = TypeVar("R", bound=tuple[Any, ...])  # a graph table's record


def maker(row: type[R]) -> Callable[[Iterable[Any]], R]:
    """The record of ``row`` made from a driver's row (a sequence in field order)."""
    make: Callable[[Iterable[Any]], R] = row._make  # type: ignore[attr-defined]
    return make
