"""From new events' facts to graph rows and merge contributions (pure, no I/O).

``Contributions`` gathers what a batch of events adds to the graph: rows that are only
ever inserted (events, identities, links, run events, facet history, run inputs/outputs)
and partial values of merged rows (edges, jobs, facets, column edges), already folded
within the batch by the same order-independent rules the worker then applies against
what is stored. Dataset identities are kept as sent; aliases resolve when read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import orjson

from ..model import ColumnFact, DatasetId, EventFacts, EventTime, JobId
from . import column_lineage
from . import facets as facet_rules
from .column_lineage import ColumnEdge
from .symlinks import Link, links_of

SEP = "\x1f"  # joins the parts of a facet owner's key; never in a JSON-escaped string


def time_key(time: EventTime | None) -> str:
    """Stored sort key: '' for an unknown time, which sorts before every known one."""
    return "" if time is None else time.key


def time_text(time: EventTime | None) -> str | None:
    return None if time is None else time.text


def entity(kind: str, *parts: str) -> str:
    return SEP.join((kind, *parts))


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


EdgeKey = tuple[str, str, str, str, str, int]  # job ns, name, ds ns, name, direction, static
ColumnKey = tuple[str, str, str, str, str, str, str, str, str]


@dataclasses.dataclass
class Contributions:
    events: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    datasets: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    links: set[Link] = dataclasses.field(default_factory=set)
    jobs: dict[tuple[str, str], tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    run_events: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    run_io: dict[tuple[str, str, str, str], tuple[str | None, EventTime | None]] = (
        dataclasses.field(default_factory=dict)
    )
    edges: dict[EdgeKey, EdgeSpan] = dataclasses.field(default_factory=dict)
    facet_slots: dict[tuple[str, str], facet_rules.FacetSlot] = dataclasses.field(
        default_factory=dict
    )
    facet_history: list[tuple[str, str, str, str, str]] = dataclasses.field(default_factory=list)
    columns: dict[ColumnKey, tuple[ColumnEdge, EdgeSpan]] = dataclasses.field(default_factory=dict)

    def add_event(self, facts: EventFacts, seq: int, idx: int) -> None:
        time = facts.time
        job = facts.job
        self.events.append(
            (
                facts.event_id,
                facts.kind,
                facts.event_type,
                time_key(time),
                time_text(time),
                job.namespace if job else None,
                job.name if job else None,
                facts.run_id,
                seq,
                idx,
            )
        )
        self._identities(facts)
        if job is not None:
            self._job(facts, job, seq)
        if facts.run_id is not None and job is not None:
            self._run(facts, job)
        self._facets(facts)
        for column in facts.columns:
            self._column(column, job, time)

    def _identities(self, facts: EventFacts) -> None:
        for ds in facts.datasets:
            self.datasets.add((ds.id.namespace, ds.id.name))
            previous = ds.lifecycle.previous if ds.lifecycle else None
            if ds.lifecycle is not None and ds.lifecycle.state != "RENAME":
                previous = None
            for link in links_of(ds.id, ds.symlinks, previous):
                self.links.add(link)
                if link.kind in ("TABLE", "RENAME"):
                    for end in (link.a, link.b):
                        self.datasets.add((end.namespace, end.name))

    def _job(self, facts: EventFacts, job: JobId, seq: int) -> None:
        has_outputs = any(ds.role == "output" for ds in facts.datasets)
        flags = (
            int(facts.kind == "RunEvent"),
            int(facts.kind == "JobEvent" and has_outputs),
            int(facts.kind == "JobEvent" and not has_outputs),
        )
        old = self.jobs.get((job.namespace, job.name), (0, 0, 0))
        self.jobs[(job.namespace, job.name)] = tuple(  # type: ignore[assignment]
            max(a, b) for a, b in zip(old, flags, strict=True)
        )
        static = int(facts.kind == "JobEvent")
        for ds in facts.datasets:
            if ds.role not in ("input", "output"):
                continue
            direction = "in" if ds.role == "input" else "out"
            key = (job.namespace, job.name, ds.id.namespace, ds.id.name, direction, static)
            span = self.edges.setdefault(key, EdgeSpan(seq=seq))
            span.add(facts.time)

    def _run(self, facts: EventFacts, job: JobId) -> None:
        run_id = facts.run_id
        assert run_id is not None
        parent = facts.parent
        self.run_events.append(
            (
                run_id,
                facts.event_id,
                facts.event_type,
                time_key(facts.time),
                time_text(facts.time),
                job.namespace,
                job.name,
                parent.run_id if parent else None,
                parent.job.namespace if parent and parent.job else None,
                parent.job.name if parent and parent.job else None,
                parent.root_run_id if parent else None,
                parent.root_job.namespace if parent and parent.root_job else None,
                parent.root_job.name if parent and parent.root_job else None,
            )
        )
        for ds in facts.datasets:
            if ds.role not in ("input", "output"):
                continue
            key = (run_id, ds.id.namespace, ds.id.name, "in" if ds.role == "input" else "out")
            old_version, old_time = self.run_io.get(key, (None, None))
            if ds.version is not None and (
                old_version is None
                or (time_key(facts.time), ds.version) > (time_key(old_time), old_version)
            ):
                self.run_io[key] = (ds.version, facts.time)
            else:
                self.run_io.setdefault(key, (old_version, old_time))

    def _facets(self, facts: EventFacts) -> None:
        owners: list[tuple[str, dict[str, Any], bool]] = []
        if facts.job is not None:
            owners.append(
                (entity("job", facts.job.namespace, facts.job.name), facts.job_facets, True)
            )
        if facts.run_id is not None:
            owners.append((entity("run", facts.run_id), facts.run_facets, False))
        for ds in facts.datasets:
            owners.append((entity("dataset", ds.id.namespace, ds.id.name), ds.facets, True))
            if facts.run_id is not None and ds.role_facets:
                owners.append(
                    (
                        entity(ds.role, facts.run_id, ds.id.namespace, ds.id.name),
                        ds.role_facets,
                        False,
                    )
                )
        for owner, values, honour_deleted in owners:
            if not values:
                continue
            records = [(name, facts.time, facts.event_id, value) for name, value in values.items()]
            folded = facet_rules.fold_facets(records, honour_deleted=honour_deleted)
            for name, slot in folded.items():
                item = slot.value or slot.deletion  # one record per name in one event
                assert item is not None
                self.facet_history.append(
                    (
                        owner,
                        name,
                        facts.event_id,
                        time_key(facts.time),
                        item.canonical_json().decode(),
                    )
                )
                old = self.facet_slots.get((owner, name))
                self.facet_slots[(owner, name)] = (
                    slot if old is None else facet_rules.merge_slots(old, slot)
                )

    def _column(self, fact: ColumnFact, job: JobId | None, time: EventTime | None) -> None:
        # Rows are keyed by the identities as sent and by derived-or-declared; aliases
        # resolve, and declared edges win over SQL-derived ones, when read.
        job_ns, job_name = (job.namespace, job.name) if job else ("", "")
        key: ColumnKey = (
            fact.target.namespace,
            fact.target.name,
            fact.target_field,
            fact.source.namespace,
            fact.source.name,
            fact.source_field,
            job_ns,
            job_name,
            fact.derived or "",
        )
        edge = column_lineage.edge_of(job, fact)
        old = self.columns.get(key)
        span = EdgeSpan() if old is None else old[1]
        span.add(time)
        self.columns[key] = (
            edge if old is None else column_lineage.merge_edges(old[0], edge),
            span,
        )


def contributions(new_events: Iterable[tuple[EventFacts, int, int]]) -> Contributions:
    result = Contributions()
    for facts, seq, idx in new_events:
        result.add_event(facts, seq, idx)
    return result


def column_row(edge: ColumnEdge, span: EdgeSpan) -> tuple[Any, ...]:
    """A column edge's stored value columns (graph_schema.COLUMNS["column_edges"])."""
    return (
        edge.kind,
        edge.klass,
        int(edge.masked),
        orjson.dumps(list(edge.subtypes)).decode(),
        span.first.key if span.first else None,
        time_text(span.first),
        span.last.key if span.last else None,
        time_text(span.last),
    )


def column_edge_of(
    key: ColumnKey, value: tuple[Any, ...], source: DatasetId, target: DatasetId
) -> tuple[ColumnEdge, EdgeSpan]:
    """A stored column edge back as a ColumnEdge (with ``source``/``target`` possibly
    resolved to their canonical nodes) and its span of eventTimes."""
    _, _, target_field, _, _, source_field, job_ns, job_name, derived = key
    kind, klass, masked, subtypes, f_key, f_text, l_key, l_text = value
    edge = ColumnEdge(
        source,
        source_field,
        target,
        target_field,
        JobId(job_ns, job_name) if job_name else None,
        kind,
        klass,
        bool(masked),
        tuple(orjson.loads(subtypes)),
        derived or None,
    )
    return edge, EdgeSpan(stored_time(f_key, f_text), stored_time(l_key, l_text))


def stored_time(key: str | None, text: str | None) -> EventTime | None:
    return EventTime(key, text) if key and text is not None else None
