"""The graph as it stood at an instant: ``GET /api/v1/lineage?asOf=T`` (docs/queries.md#asof).

"As if only the events with eventTime ≤ T had been received" — edges, aliases, states,
counts and job kinds alike. An event with an unknown eventTime orders before every known
time, so it is always part of the past. The served graph is the merge of every event;
this reads the history the projector keeps beside it instead:

- ``events`` (each event's time, run and shape), ``shapes`` (an event's kind, job,
  ``io_key`` and ``facets_key``, shared by every event naming the same) and ``io_sets``
  (the job ↔ dataset edges an io_key names) give the edges at T, their first/last seen,
  their runs;
- ``events`` by run give each run's state at T (projector/runs.py over those events);
- ``links.first_key`` gives the aliases at T (projector/symlinks.py over those links);
- ``facet_sets`` (the job and dataset facet values a facets_key names) and the events of
  the shapes naming them give the jobType facet at T (projector/facets.py over that
  history).

``AsOfGraph`` answers the questions ``graph.Graph`` answers, so ``lineage.lineage`` walks
it unchanged. It is slower than the served graph (it aggregates events on every hop):
asOf is for looking back, not for every page view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from embrasure.errors import Problem
from embrasure.model import JOB_EVENT, DatasetId, EventTime, JobId
from embrasure.projector import facets as facet_rules
from embrasure.projector.graph_rows import stored_time
from embrasure.projector.runs import RunEventFact, resolve_run
from embrasure.projector.shapes import entity
from embrasure.projector.symlinks import Link, resolve_group
from embrasure.query.graph import Graph, Hop, MergedEdge, edge_order
from embrasure.store.base import GraphReader, Key
from embrasure.store.rows import (
    EventRow,
    FacetSetRow,
    IoSetRow,
    LinkRow,
    ShapeRow,
    TrimmedEdgeRow,
)


class AsOfIdentities:
    """``entities.Identities`` over the links first seen at or before ``key``."""

    def __init__(self, reader: GraphReader, key: str) -> None:
        self.reader = reader
        self.key = key
        self._groups: dict[DatasetId, dict[DatasetId, DatasetId]] = {}
        self._renamed: set[DatasetId] = set()

    def _neighbours(self, x: DatasetId) -> list[Link]:
        rows = self.reader.rows(LinkRow, ("a_ns", "a_name"), [x]) + self.reader.rows(
            LinkRow, ("b_ns", "b_name"), [x]
        )
        return [
            Link(DatasetId(r.a_ns, r.a_name), DatasetId(r.b_ns, r.b_name), r.kind, r.type)
            for r in sorted(set(rows))
            if r.first_key <= self.key
        ]

    def _group(self, x: DatasetId) -> dict[DatasetId, DatasetId]:
        if x not in self._groups:
            resolved = resolve_group(x, self._neighbours)
            group = {m: r.canonical for m, r in resolved.items()}
            for member in group:
                self._groups[member] = group
            self._renamed |= {m for m, r in resolved.items() if r.renamed}
        return self._groups[x]

    def is_renamed(self, identity: DatasetId) -> bool:
        self._group(identity)
        return identity in self._renamed

    def canonical(self, ids: Iterable[DatasetId]) -> dict[DatasetId, DatasetId]:
        return {i: self._group(i)[i] for i in ids}

    def members(self, canonical: Iterable[DatasetId]) -> dict[DatasetId, list[DatasetId]]:
        out = {}
        for c in canonical:
            others = sorted(m for m, to in self._group(c).items() if to == c and m != c)
            out[c] = [c, *others]
        return out


class AsOfGraph(Graph):
    def __init__(self, reader: GraphReader, key: str) -> None:
        super().__init__(reader)
        horizon = reader.run_horizon()
        if horizon is not None and key < horizon:
            # The runs (and their events) before the horizon were removed by
            # --retain-runs: the graph as it was then cannot be built again.
            raise Problem(
                422,
                "as-of-before-horizon",
                "asOf before the run horizon",
                f"Runs whose latest eventTime is before {horizon} were removed by"
                " --retain-runs (docs/operations.md#retention-and-the-archive): ask for an"
                f" asOf at or after {horizon}.",
                horizon=horizon,
            )
        self.key = key
        self.horizon = horizon
        self.ids = AsOfIdentities(reader, key)
        self._run_states: dict[str, str | None] = {}  # run → its state at the instant
        self._whole: dict[tuple[JobId, DatasetId, str, bool], MergedEdge] = {}  # by Hop.key

    # -- edges ------------------------------------------------------------------------------

    def hops(
        self, datasets: list[DatasetId], jobs: list[JobId], walk: str
    ) -> list[tuple[Hop, DatasetId | JobId]]:
        """As Graph.hops, from the events up to the instant; the edges are whole already
        (``complete`` returns them)."""
        wanted_ds = "out" if walk == "upstream" else "in"
        wanted_job = "in" if walk == "upstream" else "out"
        out: list[tuple[Hop, DatasetId | JobId]] = []
        if datasets:
            members = self.ids.members(datasets)
            raw = [(m.namespace, m.name) for ms in members.values() for m in ms]
            rows = self.reader.rows(IoSetRow, ("ds_ns", "ds_name"), raw)
            out += [(h, h.job) for h in self._hops([r for r in rows if r.direction == wanted_ds])]
        if jobs:
            keys = [(j.namespace, j.name) for j in jobs]
            rows = self.reader.rows(IoSetRow, ("job_ns", "job_name"), keys)
            wanted = [r for r in rows if r.direction == wanted_job]
            out += [(h, h.dataset) for h in self._hops(wanted)]
        return out

    def _hops(self, io_rows: list[IoSetRow]) -> list[Hop]:
        hops = []
        for edge in self._edges(io_rows):
            hop = Hop(edge.job, edge.dataset, edge.direction, edge.static, [])
            self._whole[hop.key] = edge
            hops.append(hop)
        return hops

    def complete(self, hops: Iterable[Hop]) -> list[MergedEdge]:
        return sorted((self._whole[hop.key] for hop in hops), key=edge_order)

    def _edges(self, io_rows: list[IoSetRow]) -> list[MergedEdge]:
        by_key: dict[bytes, list[IoSetRow]] = {}
        for row in io_rows:
            by_key.setdefault(row.io_key, []).append(row)
        shapes = self._shapes(("io_key",), [(k,) for k in by_key])
        events = self._events_of(shapes)
        canonical = self.ids.canonical(DatasetId(r.ds_ns, r.ds_name) for r in io_rows)
        merged: dict[tuple[JobId, DatasetId, str, bool], MergedEdge] = {}
        runs: dict[tuple[JobId, DatasetId, str, bool], set[str]] = {}
        for event in events:
            time_key, time_text, run_id = event.time_key, event.time_text, event.run_id
            io_key = shapes[event.shape_key].io_key
            assert io_key is not None  # found by it
            for io in by_key[io_key]:
                job, ds = JobId(io.job_ns, io.job_name), canonical[DatasetId(io.ds_ns, io.ds_name)]
                static = bool(io.static)
                key = (job, ds, io.direction, static)
                edge = merged.setdefault(key, MergedEdge(job, ds, io.direction, static))
                if time_key and time_text is not None:  # '' and NULL: no known time
                    span = (time_key, time_text)
                    edge.first = span if edge.first is None or span < edge.first else edge.first
                    edge.last = span if edge.last is None or span > edge.last else edge.last
                if run_id is not None and not static:
                    runs.setdefault(key, set()).add(run_id)
                    edge.last_run = max(edge.last_run, (time_key, run_id))
        for key, edge_runs in runs.items():
            merged[key].run_count = len(edge_runs)
        if self.horizon is not None:
            self._add_removed_runs(io_rows, canonical, merged)
        return sorted(merged.values(), key=edge_order)

    def _add_removed_runs(
        self,
        io_rows: list[IoSetRow],
        canonical: dict[DatasetId, DatasetId],
        merged: dict[tuple[JobId, DatasetId, str, bool], MergedEdge],
    ) -> None:
        """What the runs --retain-runs removed gave these edges (lifecycle/run_retention.py):
        every one of them ended before the horizon, so before the instant."""
        wanted = {(r.job_ns, r.job_name, r.ds_ns, r.ds_name, r.direction) for r in io_rows}
        columns = ("job_ns", "job_name", "ds_ns", "ds_name", "direction")
        for row in self.reader.rows(TrimmedEdgeRow, columns, sorted(wanted)):
            job, ds = JobId(row.job_ns, row.job_name), canonical[DatasetId(row.ds_ns, row.ds_name)]
            key = (job, ds, row.direction, False)
            edge = merged.setdefault(key, MergedEdge(job, ds, row.direction, False))
            if row.first_key and row.first_text is not None:
                first = (row.first_key, row.first_text)
                edge.first = first if edge.first is None or first < edge.first else edge.first
            if row.last_key and row.last_text is not None:
                last = (row.last_key, row.last_text)
                edge.last = last if edge.last is None or last > edge.last else edge.last
            edge.run_count += row.run_count  # runs apart from those the events left
            edge.last_run = max(edge.last_run, (row.last_run_key, row.last_run))
            if edge.last_run == (row.last_run_key, row.last_run):
                self._run_states[row.last_run] = row.last_state

    def _shapes(self, columns: tuple[str, ...], values: list[Key]) -> dict[bytes, ShapeRow]:
        """Shapes whose ``columns`` equal one of ``values``, by key."""
        rows = self.reader.rows(ShapeRow, columns, values) if values else []
        return {r.shape_key: r for r in rows}

    def _events_of(self, shapes: Iterable[bytes]) -> list[EventRow]:
        """Events of one of ``shapes``, at or before the instant."""
        return self._events(("shape_key",), [(k,) for k in sorted(shapes)])

    def _events(self, columns: tuple[str, ...], values: list[Key]) -> list[EventRow]:
        """Events whose ``columns`` equal one of ``values``, at or before the instant."""
        if not values:
            return []
        rows = self.reader.rows(EventRow, columns, values)
        return [r for r in rows if r.time_key <= self.key]

    # -- runs and kinds ---------------------------------------------------------------------

    def last_states(self, edges: list[MergedEdge]) -> dict[int, str | None]:
        """The state at the instant of each edge's latest run (as Graph.last_states)."""
        runs = sorted({e.last_run[1] for e in edges if e.last_run[1]} - set(self._run_states))
        by_run: dict[str, list[EventRow]] = {}
        for event in self._events(("run_id",), [(r,) for r in runs]):
            assert event.run_id is not None  # found by it
            by_run.setdefault(event.run_id, []).append(event)
        for run_id, events in by_run.items():
            self._run_states[run_id] = resolve_run(
                RunEventFact(e.event_id, e.event_type, stored_time(e.time_key, e.time_text))
                for e in events
            ).state
        return {i: self._run_states.get(e.last_run[1]) for i, e in enumerate(edges)}

    def job_types(self, jobs: Iterable[JobId]) -> dict[JobId, str]:
        jobs = list(jobs)
        for job in jobs:
            if job not in self._kinds:
                self._kinds[job] = self._job_kind(job)
        return {j: self._kinds[j] for j in jobs}

    def _job_kind(self, job: JobId) -> str:
        # entities.job_kind's rule, over the history up to the instant.
        shapes = self._shapes(("job_ns", "job_name"), [(job.namespace, job.name)])
        job_type = self._facet_at(shapes, entity("job", job.namespace, job.name), "jobType")
        if isinstance(job_type, dict) and job_type.get("processingType") == "SERVICE":
            return "service"
        events = self._events_of(shapes)
        if not events or any(shapes[e.shape_key].kind != JOB_EVENT for e in events):
            return "job"
        io_keys = {shapes[e.shape_key].io_key for e in events}
        keys = [(k,) for k in sorted(k for k in io_keys if k is not None)]
        io = self.reader.rows(IoSetRow, ("io_key",), keys) if keys else []
        writes = any(r.direction == "out" and JobId(r.job_ns, r.job_name) == job for r in io)
        return "job" if writes else "service"

    def _facet_at(self, shapes: dict[bytes, ShapeRow], owner: str, name: str) -> Any:
        # The facet's history is every event of ``shapes`` (a job's: its own facets are in
        # its shapes' sets alone) whose facet set holds a value for it.
        keys = sorted({s.facets_key for s in shapes.values() if s.facets_key is not None})
        in_sets = self.reader.rows(
            FacetSetRow, ("facets_key", "entity", "name"), [(k, owner, name) for k in keys]
        )
        hash_of = {r.facets_key: r.value_hash for r in in_sets}
        value_of = {k: hash_of[s.facets_key] for k, s in shapes.items() if s.facets_key in hash_of}
        history = self._events_of(value_of)
        if not history:
            return None
        values = self.reader.facet_values(sorted(set(value_of.values())))
        records = [
            (
                name,
                EventTime(r.time_key, r.time_key) if r.time_key else None,
                r.event_id,
                orjson.loads(values[bytes(value_of[r.shape_key])]),
            )
            for r in history
        ]
        current = facet_rules.current_facets(records).get(name)
        return current.value if current is not None else None
