"""The dataset-level graph as the read side sees it (docs/queries.md).

Edges are stored under the dataset identities producers sent; here they are resolved to
canonical nodes and merged: an edge's first/last seen are the min/max over its aliases'
edges, its run_count the runs that used it, its last_state the state of the run that
named it last (by eventTime, then runId) — both kept on the edge rows by the projector.
``Graph`` reads a whole frontier's edges in one store query, only in the direction walked.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any, Protocol

from embrasure.model import DatasetId, JobId
from embrasure.query.entities import Identities, job_kinds, node_id
from embrasure.query.hidden import Hidden
from embrasure.store.base import GraphReader, Key
from embrasure.store.rows import GRAPH_ROWS, EdgeRow, RunIoRow, RunRow, columns_of


@dataclasses.dataclass
class MergedEdge:
    job: JobId
    dataset: DatasetId  # canonical
    direction: str  # "in": dataset → job; "out": job → dataset
    static: bool
    first: tuple[str, str] | None = None
    last: tuple[str, str] | None = None
    run_count: int = 0
    last_run: tuple[str, str] = ("", "")  # (eventTime key, runId) of the run naming it last
    identities: int = 0  # stored rows merged into it: more than one for an aliased node

    def add(self, row: EdgeRow) -> None:
        if row.first_key and row.first_text is not None:
            first = (row.first_key, row.first_text)
            if self.first is None or first < self.first:
                self.first = first
        if row.last_key and row.last_text is not None:
            last = (row.last_key, row.last_text)
            if self.last is None or last > self.last:
                self.last = last
        self.run_count += row.run_count  # exact for one identity; see Graph.count_runs
        self.last_run = max(self.last_run, (row.last_run_key, row.last_run))
        self.identities += 1


@dataclasses.dataclass(slots=True, eq=False)
class Hop:
    """An edge a walk crosses, known by its key until ``Graph.complete`` reads the rest."""

    job: JobId
    dataset: DatasetId  # canonical
    direction: str
    static: bool
    stored: list[Key]  # EDGE_KEY of the stored rows merged into it (one per identity as sent)

    @property
    def key(self) -> tuple[JobId, DatasetId, str, bool]:
        return (self.job, self.dataset, self.direction, self.static)


def edge_order(e: MergedEdge) -> tuple[str, str, DatasetId, str, bool]:
    """Edges by job, dataset, direction, static (strings compare in C; JobId would not)."""
    return (e.job.namespace, e.job.name, e.dataset, e.direction, e.static)


# The edges table's key: (job_ns, job_name, ds_ns, ds_name, direction, static).
EDGE_KEY = columns_of(GRAPH_ROWS["edges"])[0]


class Resolver(Protocol):
    """Dataset identity resolution: entities.Identities (now), as_of.AsOfIdentities (then)."""

    def canonical(self, ids: Iterable[DatasetId]) -> dict[DatasetId, DatasetId]: ...

    def members(self, canonical: Iterable[DatasetId]) -> dict[DatasetId, list[DatasetId]]: ...

    def is_renamed(self, identity: DatasetId) -> bool: ...


class Graph:
    """The dataset-level graph around some nodes, resolved and merged, in one snapshot."""

    def __init__(self, reader: GraphReader) -> None:
        self.reader = reader
        self.ids: Resolver = Identities(reader)
        self._kinds: dict[JobId, str] = {}

    @functools.cached_property
    def hidden(self) -> Hidden:
        """What admins hid, resolved by this graph's identities (now, or as of then)."""
        return Hidden(self.reader, self.ids)

    def shown_as(self, asked: DatasetId) -> DatasetId:
        """The name a walk asked from ``asked`` shows its root under: as asked, unless a
        rename left that name behind, or its namespace is hidden or outside the reader's
        grants (docs/queries.md#conventions, docs/security.md): then the canonical one."""
        node = self.ids.canonical([asked])[asked]
        if self.ids.is_renamed(asked) or not self.hidden.may_name(asked.namespace):
            return node
        return asked

    def job_type(self, job: JobId) -> str:
        kind = self._kinds.get(job)
        return kind if kind is not None else self.job_types([job])[job]

    def job_types(self, jobs: Iterable[JobId]) -> dict[JobId, str]:
        """Job or service, for many jobs in two queries (entities.job_kinds)."""
        jobs = list(jobs)
        todo = [j for j in dict.fromkeys(jobs) if j not in self._kinds]
        if todo:
            self._kinds.update(job_kinds(self.reader, todo))
        return {j: self._kinds[j] for j in jobs}

    def edges_of_datasets(self, nodes: Iterable[DatasetId], direction: str) -> list[MergedEdge]:
        """The edges of the datasets (every identity of each) in one direction."""
        members = self.ids.members(nodes)
        raw = [(m.namespace, m.name, direction) for ms in members.values() for m in ms]
        return self._merge(self.reader.rows(EdgeRow, ("ds_ns", "ds_name", "direction"), raw))

    def edges_of_jobs(self, jobs: Iterable[JobId], direction: str) -> list[MergedEdge]:
        """The edges of the jobs in one direction."""
        raw = [(j.namespace, j.name, direction) for j in jobs]
        return self._merge(self.reader.rows(EdgeRow, ("job_ns", "job_name", "direction"), raw))

    def hops(
        self, datasets: list[DatasetId], jobs: list[JobId], walk: str
    ) -> list[tuple[Hop, DatasetId | JobId]]:
        """The edges one step of a walk crosses from ``datasets`` and ``jobs``, in
        edge_order, each with the node it reaches. Only their keys are read (from the
        edges' covering indexes): a walk keeps a few hundred of a hub's thousands of
        edges, and reads the rest of those (``complete``) only."""
        # Upstream of a dataset: the jobs writing it; upstream of a job: the datasets it reads.
        wanted_ds = "out" if walk == "upstream" else "in"
        wanted_job = "in" if walk == "upstream" else "out"
        out: list[tuple[Hop, DatasetId | JobId]] = []
        if datasets:
            members = self.ids.members(datasets)
            raw = [(m.namespace, m.name, wanted_ds) for ms in members.values() for m in ms]
            found = self._group(
                self.reader.pick(EdgeRow, EDGE_KEY, ("ds_ns", "ds_name", "direction"), raw)
            )
            out += [(hop, hop.job) for hop in found]
        if jobs:
            raw = [(j.namespace, j.name, wanted_job) for j in jobs]
            found = self._group(
                self.reader.pick(EdgeRow, EDGE_KEY, ("job_ns", "job_name", "direction"), raw)
            )
            out += [(hop, hop.dataset) for hop in found]
        return out

    def _group(self, stored: list[Key]) -> list[Hop]:
        """Stored edge keys grouped by the edge they merge into, in edge_order."""
        canonical = self._canonical(stored)
        # Keyed and sorted by plain strings: JobId's dataclass hash and order run in
        # Python, and a hub's walk groups thousands of rows (bench/query.py).
        groups: dict[tuple[str, str, DatasetId, str, int], list[Key]] = {}
        for k in stored:
            job_ns, job_name, ds_ns, ds_name, direction, static = k
            key = (job_ns, job_name, canonical[ds_ns, ds_name], direction, static)
            groups.setdefault(key, []).append(k)
        hops = []
        for key in sorted(groups):
            job_ns, job_name, dataset, direction, static = key
            hops.append(Hop(JobId(job_ns, job_name), dataset, direction, bool(static), groups[key]))
        return hops

    def _canonical(self, rows: list[EdgeRow] | list[Key]) -> dict[tuple[str, str], DatasetId]:
        """The canonical node of each edge row's or key's dataset, by its (ns, name) as
        stored: a hub's thousands of rows name a handful of datasets."""
        pairs = {(ds_ns, ds_name) for _job_ns, _job_name, ds_ns, ds_name, *_rest in rows}
        found = self.ids.canonical(DatasetId(*p) for p in pairs)
        return {(d.namespace, d.name): c for d, c in found.items()}

    def complete(self, hops: Iterable[Hop]) -> list[MergedEdge]:
        """The merged edges of ``hops`` (one read of their stored rows), in edge_order."""
        keys = [k for hop in hops for k in hop.stored]
        return self._merge(self.reader.rows(EdgeRow, EDGE_KEY, keys)) if keys else []

    def _merge(self, rows: list[EdgeRow]) -> list[MergedEdge]:
        canonical = self._canonical(rows)
        merged: dict[tuple[str, str, DatasetId, str, int], MergedEdge] = {}
        for row in rows:
            ds = canonical[row.ds_ns, row.ds_name]
            key = (row.job_ns, row.job_name, ds, row.direction, row.static)
            edge = merged.get(key)
            if edge is None:
                job = JobId(row.job_ns, row.job_name)
                edge = merged[key] = MergedEdge(job, ds, row.direction, bool(row.static))
            edge.add(row)
        return [merged[k] for k in sorted(merged)]

    def last_states(self, edges: list[MergedEdge]) -> dict[int, str | None]:
        """The state of each edge's latest run (the run that named it last)."""
        run_ids = sorted({e.last_run[1] for e in edges if e.last_run[1]})
        states: dict[str, str | None] = dict(
            self.reader.pick(RunRow, ("run_id", "state"), ("run_id",), [(x,) for x in run_ids])
        )
        return {i: states.get(e.last_run[1]) for i, e in enumerate(edges)}

    def count_runs(self, edges: list[MergedEdge]) -> None:
        """Recount the runs of edges merged from several identities of one dataset: the
        stored counts are per identity as sent, and one run naming two aliases would
        count twice. Rare (aliased nodes only), so counted here from run_io."""
        aliased = [e for e in edges if e.identities > 1 and not e.static]
        if not aliased:
            return
        members = self.ids.members({e.dataset for e in aliased})
        keys = [(m.namespace, m.name, e.direction) for e in aliased for m in members[e.dataset]]
        runs: dict[tuple[JobId, str, str, str], set[str]] = {}
        for io in self.reader.rows(RunIoRow, ("ds_ns", "ds_name", "direction"), keys):
            used = (JobId(io.job_ns, io.job_name), io.ds_ns, io.ds_name, io.direction)
            runs.setdefault(used, set()).add(io.run_id)
        for e in aliased:
            found: set[str] = set()
            for m in members[e.dataset]:
                found |= runs.get((e.job, m.namespace, m.name, e.direction), set())
            e.run_count = len(found)

    def edge_json(self, edges: list[MergedEdge]) -> list[dict[str, Any]]:
        states = self.last_states(edges)
        self.count_runs(edges)
        self.job_types(e.job for e in edges)
        out = []
        for i, e in enumerate(edges):
            job_id = node_id(self.job_type(e.job), e.job.namespace, e.job.name)
            ds_id = node_id("dataset", e.dataset.namespace, e.dataset.name)
            source, target = (ds_id, job_id) if e.direction == "in" else (job_id, ds_id)
            out.append(
                {
                    "source": source,
                    "target": target,
                    "static": e.static,
                    "first_seen": e.first[1] if e.first else None,
                    "last_seen": e.last[1] if e.last else None,
                    "run_count": e.run_count,
                    "last_state": states[i],
                }
            )
        return out
