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
from . import facets as facet_rules
from .canonical import canonical_json
from .symlinks import Link, links_of

SEP = "\x1f"  # joins the parts of a facet owner's key; never in a JSON-escaped string

CLASS_RANK = {None: 0, "direct": 1, "expression": 2, "aggregate": 3}
KIND_RANK = {"indirect": 0, "mapping": 1}


def time_key(time: EventTime | None) -> str:
    """Stored sort key: '' for an unknown time, which sorts before every known one."""
    return "" if time is None else time.key


def time_text(time: EventTime | None) -> str | None:
    return None if time is None else time.text


def entity(kind: str, *parts: str) -> str:
    return SEP.join((kind, *parts))


def dumps(value: Any) -> str:
    return canonical_json(value).decode()


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


@dataclasses.dataclass
class ColumnEdge:
    """One column edge's merged value: monotonic in every field (DESIGN §3)."""

    kind_rank: int
    class_rank: int
    masked: bool
    subtypes: frozenset[str]
    first: EventTime | None
    last: EventTime | None

    def merge(self, other: ColumnEdge) -> ColumnEdge:
        span = EdgeSpan(self.first, self.last)
        span.add(other.first)
        span.add(other.last)
        return ColumnEdge(
            max(self.kind_rank, other.kind_rank),
            max(self.class_rank, other.class_rank),
            self.masked or other.masked,
            self.subtypes | other.subtypes,
            span.first,
            span.last,
        )


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
    columns: dict[ColumnKey, ColumnEdge] = dataclasses.field(default_factory=dict)

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
            for name, _, _, value in records:
                self.facet_history.append(
                    (owner, name, facts.event_id, time_key(facts.time), dumps(value))
                )
            folded = facet_rules.fold_facets(records, honour_deleted=honour_deleted)
            for name, slot in folded.items():
                old = self.facet_slots.get((owner, name))
                self.facet_slots[(owner, name)] = (
                    slot if old is None else facet_rules.merge_slots(old, slot)
                )

    def _column(self, fact: ColumnFact, job: JobId | None, time: EventTime | None) -> None:
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
        edge = ColumnEdge(
            KIND_RANK[fact.kind],
            CLASS_RANK.get(fact.klass, 2),
            fact.masked,
            frozenset(fact.subtypes),
            time,
            time,
        )
        old = self.columns.get(key)
        self.columns[key] = edge if old is None else old.merge(edge)


def contributions(new_events: Iterable[tuple[EventFacts, int, int]]) -> Contributions:
    result = Contributions()
    for facts, seq, idx in new_events:
        result.add_event(facts, seq, idx)
    return result


def dataset_id(ns: str, name: str) -> DatasetId:
    return DatasetId(ns, name)


def subtypes_json(subtypes: frozenset[str]) -> str:
    return orjson.dumps(sorted(subtypes)).decode()
