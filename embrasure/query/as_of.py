"""The graph as it stood at an instant: ``GET /api/v1/lineage?asOf=T`` (DESIGN §4).

"As if only the events with eventTime ≤ T had been received" — edges, aliases, states,
counts and job kinds alike. An event with an unknown eventTime orders before every known
time, so it is always part of the past. The served graph is the merge of every event;
this reads the history the projector keeps beside it instead:

- ``events`` (each event's time, run, job, kind and ``io_key``) and ``io_sets`` (the job ↔
  dataset edges an io_key names) give the edges at T, their first/last seen, their runs;
- ``events`` by run give each run's state at T (projector/runs.py over those events);
- ``links.first_key`` gives the aliases at T (projector/symlinks.py over those links);
- ``facet_history`` gives the jobType facet at T (projector/facets.py over that history).

``AsOfGraph`` answers the questions ``query.Graph`` answers, so ``query.lineage`` walks
it unchanged. It is slower than the served graph (it aggregates events on every hop):
asOf is for looking back, not for every page view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from embrasure.model import DatasetId, EventTime, JobId
from embrasure.projector import facets as facet_rules
from embrasure.projector.graph_rows import entity
from embrasure.projector.runs import RunEventFact, resolve_run
from embrasure.projector.symlinks import Link, resolve_group
from embrasure.query.graph import Graph, Hop, MergedEdge, edge_order
from embrasure.store.base import GraphReader, Row


class AsOfIdentities:
    """``views.Identities`` over the links first seen at or before ``key``."""

    def __init__(self, reader: GraphReader, key: str) -> None:
        self.reader = reader
        self.key = key
        self._groups: dict[DatasetId, dict[DatasetId, DatasetId]] = {}

    def _neighbours(self, x: DatasetId) -> list[Link]:
        rows = self.reader.rows("links", ("a_ns", "a_name"), [x]) + self.reader.rows(
            "links", ("b_ns", "b_name"), [x]
        )
        return [
            Link(DatasetId(a, b), DatasetId(c, d), kind, type_)
            for a, b, c, d, kind, type_, first in sorted(set(rows))
            if first <= self.key
        ]

    def _group(self, x: DatasetId) -> dict[DatasetId, DatasetId]:
        if x not in self._groups:
            group = {m: r.canonical for m, r in resolve_group(x, self._neighbours).items()}
            for member in group:
                self._groups[member] = group
        return self._groups[x]

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
        self.key = key
        self.ids = AsOfIdentities(reader, key)
        self._run_states: dict[str, str] = {}  # run → its state at the instant
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
            rows = self.reader.rows("io_sets", ("ds_ns", "ds_name"), raw)
            out += [(h, h.job) for h in self._hops([r for r in rows if r[5] == wanted_ds])]
        if jobs:
            keys = [(j.namespace, j.name) for j in jobs]
            rows = self.reader.rows("io_sets", ("job_ns", "job_name"), keys)
            out += [(h, h.dataset) for h in self._hops([r for r in rows if r[5] == wanted_job])]
        return out

    def _hops(self, io_rows: list[Row]) -> list[Hop]:
        hops = []
        for edge in self._edges(io_rows):
            hop = Hop(edge.job, edge.dataset, edge.direction, edge.static, [])
            self._whole[hop.key] = edge
            hops.append(hop)
        return hops

    def complete(self, hops: Iterable[Hop]) -> list[MergedEdge]:
        return sorted((self._whole[hop.key] for hop in hops), key=edge_order)

    def _edges(self, io_rows: list[Row]) -> list[MergedEdge]:
        by_key: dict[bytes, list[Row]] = {}
        for row in io_rows:
            by_key.setdefault(row[0], []).append(row)
        events = self._events(("io_key",), [(k,) for k in by_key])
        canonical = self.ids.canonical(DatasetId(r[3], r[4]) for r in io_rows)
        merged: dict[tuple[JobId, DatasetId, str, bool], MergedEdge] = {}
        runs: dict[tuple[JobId, DatasetId, str, bool], set[str]] = {}
        for event in events:
            time_key, time_text, run_id = event[3], event[4], event[7]
            for _key, job_ns, job_name, ds_ns, ds_name, direction, static in by_key[event[10]]:
                job, ds = JobId(job_ns, job_name), canonical[DatasetId(ds_ns, ds_name)]
                key = (job, ds, direction, bool(static))
                edge = merged.setdefault(key, MergedEdge(job, ds, direction, bool(static)))
                if time_key:
                    span = (time_key, time_text)
                    edge.first = span if edge.first is None or span < edge.first else edge.first
                    edge.last = span if edge.last is None or span > edge.last else edge.last
                if run_id is not None and not static:
                    runs.setdefault(key, set()).add(run_id)
                    edge.last_run = max(edge.last_run, (time_key, run_id))
        for key, edge_runs in runs.items():
            merged[key].run_count = len(edge_runs)
        return sorted(merged.values(), key=edge_order)

    def _events(self, columns: tuple[str, ...], values: list[tuple[Any, ...]]) -> list[Row]:
        """Events (graph_schema.COLUMNS order) whose ``columns`` equal one of ``values``,
        at or before the instant."""
        if not values:
            return []
        return [r for r in self.reader.rows("events", columns, values) if r[3] <= self.key]

    # -- runs and kinds ---------------------------------------------------------------------

    def last_states(self, edges: list[MergedEdge]) -> dict[int, str | None]:
        """The state at the instant of each edge's latest run (as Graph.last_states)."""
        runs = sorted({e.last_run[1] for e in edges if e.last_run[1]} - set(self._run_states))
        by_run: dict[str, list[Row]] = {}
        for event in self._events(("run_id",), [(r,) for r in runs]):
            by_run.setdefault(event[7], []).append(event)
        for run_id, events in by_run.items():
            self._run_states[run_id] = resolve_run(
                RunEventFact(e[0], e[2], EventTime(e[3], e[4]) if e[3] else None) for e in events
            ).state
        return {i: self._run_states.get(e.last_run[1]) for i, e in enumerate(edges)}

    def job_types(self, jobs: Iterable[JobId]) -> dict[JobId, str]:
        jobs = list(jobs)
        for job in jobs:
            if job not in self._kinds:
                self._kinds[job] = self._job_kind(job)
        return {j: self._kinds[j] for j in jobs}

    def _job_kind(self, job: JobId) -> str:
        # views.job_kind's rule, over the history up to the instant.
        job_type = self._facet_at(entity("job", job.namespace, job.name), "jobType")
        if isinstance(job_type, dict) and job_type.get("processingType") == "SERVICE":
            return "service"
        events = self._events(("job_ns", "job_name"), [(job.namespace, job.name)])
        if not events or any(e[1] != "JobEvent" for e in events):
            return "job"
        keys = [(e[10],) for e in events if e[10] is not None]
        io = self.reader.rows("io_sets", ("io_key",), keys) if keys else []
        writes = any(r[5] == "out" and JobId(r[1], r[2]) == job for r in io)
        return "job" if writes else "service"

    def _facet_at(self, owner: str, name: str) -> Any:
        history = [
            r
            for r in self.reader.rows("facet_history", ("entity", "name"), [(owner, name)])
            if r[3] <= self.key
        ]
        if not history:
            return None
        values = {
            r[0]: r[1]
            for r in self.reader.rows("facet_values", ("hash",), [(h[4],) for h in history])
        }
        records = [
            (name, EventTime(r[3], r[3]) if r[3] else None, r[2], orjson.loads(values[r[4]]))
            for r in history
        ]
        current = facet_rules.current_facets(records).get(name)
        return current.value if current is not None else None
