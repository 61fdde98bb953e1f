"""From new events' facts to graph rows and merge contributions (pure, no I/O).

``Contributions`` gathers what a batch of events adds to the graph: rows that are only
ever inserted (events, their shapes, identities, links, run inputs/outputs) and partial
values of merged rows (runs, edges, jobs, facets, column edges), already folded within
the batch by the same order-independent rules the store then applies against what it
holds. Dataset identities are kept as sent; aliases resolve when read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import orjson

from embrasure.model import DatasetId, EventFacts, EventTime, JobId
from embrasure.projector import column_lineage, quality
from embrasure.projector import facets as facet_rules
from embrasure.projector.column_lineage import ColumnEdge
from embrasure.projector.runs import (
    ParentColumns,
    RunEventFact,
    RunPart,
    merge_run_parts,
    resolve_run,
    winner_key,
)
from embrasure.projector.shapes import (
    ColumnKey,
    EdgeKey,
    FacetRecordRow,
    Shape,
    facet_records,
    run_entity,
    shape_of,
)
from embrasure.projector.shapes import entity as entity  # re-exported: query/ reads it here
from embrasure.projector.symlinks import Link
from embrasure.store.base import Key
from embrasure.store.rows import ColumnEdgeRow, RunRow


def time_key(time: EventTime | None) -> str:
    """Stored sort key: '' for an unknown time, which sorts before every known one."""
    return "" if time is None else time.key


def time_text(time: EventTime | None) -> str | None:
    return None if time is None else time.text


@dataclasses.dataclass
class EdgeSpan:
    """A dataset ↔ job edge's earliest and latest known eventTimes, and the first
    delivery (log position) of the batch that named it."""

    first: EventTime | None = None
    last: EventTime | None = None
    seq: int | None = None

    def add(self, time: EventTime | None) -> None:
        if time is None:
            return
        self.first = time if self.first is None else min(self.first, time)
        self.last = time if self.last is None else max(self.last, time)

    def join(self, other: EdgeSpan) -> None:
        """Widen to cover ``other``'s times too; the earlier first delivery stays."""
        self.add(other.first)
        self.add(other.last)
        if other.seq is not None and (self.seq is None or other.seq < self.seq):
            self.seq = other.seq


@dataclasses.dataclass
class ShapeUse:
    """What a batch's events of one shape add up to. Everything a shape contributes
    (edges, links, column edges, job and dataset facets) is a join over its events' times,
    runs and ids, so it is folded once per shape from these, not once per event."""

    shape: Shape
    span: EdgeSpan  # the known eventTimes; ``seq``: the first delivery naming the shape
    first_key: str  # the earliest time key, '' (unknown) included: links
    last_run: tuple[str, str] | None = None  # the latest (time key, runId)
    best: tuple[str, str, EventTime | None] = ("", "", None)  # latest (time key, event id)

    def add(self, time: EventTime | None, tkey: str, event_id: str, run_id: str | None) -> None:
        self.span.add(time)
        self.first_key = min(self.first_key, tkey)
        if run_id is not None and (self.last_run is None or (tkey, run_id) > self.last_run):
            self.last_run = (tkey, run_id)
        if (tkey, event_id) > self.best[:2]:
            self.best = (tkey, event_id, time)


@dataclasses.dataclass
class Contributions:
    events: list[Key] = dataclasses.field(default_factory=list)  # EventRow values
    # Each distinct shape the batch named, by key, and what its events add up to
    shapes: dict[bytes, ShapeUse] = dataclasses.field(default_factory=dict)
    runs: dict[str, RunPart] = dataclasses.field(default_factory=dict)
    # (run, job ns, job name, dataset ns, name, direction) → (version, its eventTime)
    run_io: dict[tuple[str, str, str, str, str, str], tuple[str | None, EventTime | None]] = (
        dataclasses.field(default_factory=dict)
    )
    facet_slots: dict[tuple[str, str], facet_rules.FacetSlot] = dataclasses.field(
        default_factory=dict
    )
    # (dataset ns, name as sent, check id) → its latest result (time key, hash, failed)
    checks: dict[quality.CheckKey, quality.Check] = dataclasses.field(default_factory=dict)
    # Folded from ``shapes`` by ``fold_shapes``:
    links: dict[Link, str] = dataclasses.field(default_factory=dict)  # → earliest time key
    jobs: dict[tuple[str, str], tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    edges: dict[EdgeKey, EdgeSpan] = dataclasses.field(default_factory=dict)
    edge_runs: dict[EdgeKey, tuple[str, str]] = dataclasses.field(default_factory=dict)
    columns: dict[ColumnKey, tuple[ColumnEdge, EdgeSpan]] = dataclasses.field(default_factory=dict)

    def add_event(self, facts: EventFacts, seq: int, idx: int) -> None:
        # Written for speed: every event passes here (the rows its shape contributes are
        # folded once per shape, in fold_shapes).
        time = facts.time
        shape = shape_of(facts)
        shape_key = shape.row.shape_key
        tkey = "" if time is None else time.key
        run_id = facts.run_id
        # A plain tuple in EventRow's field order: the one row every event adds
        # (store/base.py ProjectionTx says why not a record).
        self.events.append(
            (
                facts.event_id,
                facts.event_type,
                tkey,
                None if time is None else time.text,
                run_id,
                seq,
                idx,
                shape_key,
            )
        )
        use = self.shapes.get(shape_key)
        if use is None:
            use = self.shapes[shape_key] = ShapeUse(shape, EdgeSpan(seq=seq), tkey)
        use.add(time, tkey, facts.event_id, run_id)
        if run_id is not None:
            if facts.job is not None:
                self._run(facts, run_id, facts.job, shape)
            self._run_facets(facts, run_id, shape)

    def _run(self, facts: EventFacts, run_id: str, job: JobId, shape: Shape) -> None:
        part = run_part(facts, job)
        old = self.runs.get(run_id)
        self.runs[run_id] = part if old is None else merge_run_parts(old, part)
        run_io = self.run_io
        for suffix, version in shape.run_io:
            key = (run_id, *suffix)
            old_version = run_io.get(key)
            if old_version is None:
                run_io[key] = (version, facts.time) if version is not None else _NO_VERSION
            elif version is not None:
                run_io[key] = later_version(old_version, (version, facts.time))

    def _run_facets(self, facts: EventFacts, run_id: str, shape: Shape) -> None:
        # Run, input and output facets keep their current values only
        # (docs/projection.md#facets); job and dataset facets are the shape's, and so
        # are the dataset facets as this run sent them (shapes.sent_entity). An input's
        # or output's own facets (owner ``input``/``output``) are kept per run, the
        # latest value per name over the run's events
        # (docs/projection.md#what-each-run-did), and honour ``_deleted`` too: a later
        # event of the run takes back what an earlier one said.
        records = (
            facet_records(entity("run", run_id), facts.run_facets, False)
            if facts.run_facets
            else []
        )
        own = False
        for ds in facts.datasets:
            if ds.role_facets:
                own = True
                owner = run_entity(run_id, ds.role, ds.id.namespace, ds.id.name)
                records += facet_records(owner, ds.role_facets, True)
        if records:
            self._fold_facets(records, facts.event_id, facts.time)
        checks = quality.checks_of(facts.datasets) if own else shape.checks
        if checks:
            tkey = time_key(facts.time)
            for key, digest, failed in checks:
                self.checks[key] = quality.later_check(self.checks.get(key), (tkey, digest, failed))

    def _fold_facets(
        self, records: Iterable[FacetRecordRow], event_id: str, time: EventTime | None
    ) -> None:
        slots, fold = self.facet_slots, facet_rules.fold_value
        for owner, name, canonical, digest, value, deletion in records:
            fold(slots, (owner, name), (value, event_id, time, canonical, digest), deletion)

    def fold_shapes(self) -> None:
        """Fold what each shape contributes, once per shape. Each is the join its events
        would give one by one: a span of their times, the earliest link time, the latest
        run; and a facet value ranks by (eventTime, value hash, event id) with the
        value the same in every event of a shape, so its latest event stands for all."""
        for use in self.shapes.values():
            shape, span = use.shape, use.span
            for link in shape.links:
                old_key = self.links.get(link)
                self.links[link] = use.first_key if old_key is None else min(old_key, use.first_key)
            if shape.row.job_ns is not None and shape.row.job_name is not None:
                key = (shape.row.job_ns, shape.row.job_name)
                flags, old = shape.job_flags, self.jobs.get(key)
                self.jobs[key] = (
                    flags
                    if old is None
                    else (max(old[0], flags[0]), max(old[1], flags[1]), max(old[2], flags[2]))
                )
            for edge_key in shape.edges:
                edge_span = self.edges.get(edge_key)
                if edge_span is None:
                    edge_span = self.edges[edge_key] = EdgeSpan(seq=span.seq)
                edge_span.join(span)
                if use.last_run is not None and use.last_run > self.edge_runs.get(
                    edge_key, ("", "")
                ):
                    self.edge_runs[edge_key] = use.last_run
            for column_key, edge in shape.columns:
                old_column = self.columns.get(column_key)
                if old_column is None:
                    self.columns[column_key] = (edge, EdgeSpan(span.first, span.last))
                else:
                    old_edge, column_span = old_column
                    column_span.join(span)
                    if old_edge is not edge and old_edge != edge:  # the key is the same
                        merged = column_lineage.merge_edges(old_edge, edge)
                        self.columns[column_key] = (merged, column_span)
            _tkey, event_id, time = use.best
            self._fold_facets(shape.facets, event_id, time)


_NO_VERSION: tuple[str | None, EventTime | None] = (None, None)  # later_version's start


def contributions(new_events: Iterable[tuple[EventFacts, int, int]]) -> Contributions:
    result = Contributions()
    for facts, seq, idx in new_events:
        result.add_event(facts, seq, idx)
    result.fold_shapes()
    return result


def span_row(span: EdgeSpan) -> tuple[str | None, str | None, str | None, str | None]:
    """first_key, first_text, last_key, last_text (NULL: no known time)."""
    first, last = span.first, span.last
    return (
        first.key if first else None,
        first.text if first else None,
        last.key if last else None,
        last.text if last else None,
    )


def run_part(facts: EventFacts, job: JobId) -> RunPart:
    """What one event says about its run."""
    rank = (time_key(facts.time), facts.event_id)
    parent = facts.parent
    columns: ParentColumns | None = None
    if parent is not None and (parent.run_id is not None or parent.job is not None):
        columns = (
            parent.run_id,
            parent.job.namespace if parent.job else None,
            parent.job.name if parent.job else None,
            parent.root_run_id,
            parent.root_job.namespace if parent.root_job else None,
            parent.root_job.name if parent.root_job else None,
        )
    state = resolve_run([RunEventFact(facts.event_id, facts.event_type, facts.time)])
    return RunPart(
        state, (job.namespace, job.name), rank, columns, rank if columns is not None else None
    )


def run_row(run_id: str, part: RunPart) -> RunRow:
    """A run's stored row."""
    state = part.state
    terminal, win_key = winner_key(state)
    job_key, job_event = part.job_rank
    parent_key, parent_event = part.parent_rank or (None, None)
    return RunRow(
        run_id,
        *part.job,
        state.state,
        time_key(state.started_at) or None,
        time_text(state.started_at),
        time_key(state.ended_at) or None,
        time_text(state.ended_at),
        time_key(state.latest),
        *(part.parent or (None,) * 6),
        job_key,
        bytes.fromhex(job_event),
        int(terminal),
        win_key,
        bytes.fromhex(state.decided_by),
        parent_key,
        None if parent_event is None else bytes.fromhex(parent_event),
    )


def facet_row(slot: facet_rules.FacetSlot) -> tuple[Any, ...]:
    """A facet slot's stored value columns (schema.COLUMNS["facets"]): the winning value's
    eventTime key and hash, the latest deletion marker's eventTime key. Only these are
    read (the value's JSON is in facet_values; neither the event nor the time's text is
    shown), and the rank's leading columns alone are as deterministic as the rank."""
    value, deletion = slot.value, slot.deletion
    return (
        None if value is None else time_key(value.time),
        None if value is None else value.value_hash(),
        None if deletion is None else time_key(deletion.time),
    )


def facet_values(slots: Iterable[facet_rules.FacetSlot]) -> dict[bytes, bytes]:
    """The winning values of ``slots``: hash → canonical JSON (facet_values rows)."""
    return {
        slot.value.value_hash(): slot.value.canonical_json()
        for slot in slots
        if slot.value is not None
    }


def later_version(
    old: tuple[str | None, EventTime | None], new: tuple[str | None, EventTime | None]
) -> tuple[str | None, EventTime | None]:
    """The dataset version a run used: the one named by the latest event (eventTime, then
    the version string); an event naming none changes nothing."""
    (old_version, old_time), (version, time) = old, new
    if version is not None and (
        old_version is None or (time_key(time), version) > (time_key(old_time), old_version)
    ):
        return new
    return old


def column_row(edge: ColumnEdge, span: EdgeSpan) -> tuple[Any, ...]:
    """A column edge's stored value columns (schema.COLUMNS["column_edges"])."""
    return (
        edge.kind,
        edge.klass,
        int(edge.masked),
        orjson.dumps(list(edge.subtypes)).decode(),
        *span_row(span),
    )


def column_edge_of(
    row: ColumnEdgeRow, source: DatasetId, target: DatasetId
) -> tuple[ColumnEdge, EdgeSpan]:
    """A stored column edge back as a ColumnEdge (with ``source``/``target`` possibly
    resolved to their canonical nodes) and its span of eventTimes."""
    edge = ColumnEdge(
        source,
        row.src_field,
        target,
        row.tgt_field,
        JobId(row.job_ns, row.job_name) if row.job_name else None,
        row.kind,
        row.class_,
        bool(row.masked),
        tuple(orjson.loads(row.subtypes)),
        row.derived or None,
    )
    first, last = (
        stored_time(row.first_key, row.first_text),
        stored_time(row.last_key, row.last_text),
    )
    return edge, EdgeSpan(first, last)


def stored_time(key: str | None, text: str | None) -> EventTime | None:
    return EventTime(key, text) if key and text is not None else None
