"""``GET /api/v1/impact`` (docs/queries.md#column-lineage-and-impact): what breaks, and does
PII flow there, if this
dataset or column changes?

Everything downstream of the root, each item with its distance and one shortest path
from the root, and ``masked``: whether a masked mapping lies on that path.

- From a **dataset**: the dataset-level walk (the jobs and services reading it, the
  datasets they write, and on), paths alternating dataset and job ids; then the
  field-level walk from every field of the root that has column lineage, paths
  ``[root dataset, root field, job, field, job, field…]``.
- From a **field**: the field-level walk, paths ``[root field, job, field, …]``; the job
  on each column edge and the dataset of each field reached are items too (a job's path
  ends at the job, a dataset's is its nearest field's path followed by the dataset).

Both kinds of column edge are followed (an indirect dependency — a JOIN key, a FILTER —
breaks the output as surely as a mapping); ``masked`` is about mappings only. Distances
count edges walked: a dataset → job → dataset hop is two, a field → field edge one (its
job sits on it). Walks are breadth-first in sorted order, so among several shortest
paths the one returned is the same on every call.
"""

from __future__ import annotations

from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.query.columns import ColumnHop, Field, column_step
from embrasure.query.entities import dataset_node, job_node, named_as_asked
from embrasure.query.graph import Graph, Hop
from embrasure.query.lineage import Node, step
from embrasure.query.walk import Walk
from embrasure.store.base import GraphReader
from embrasure.store.rows import ColumnEdgeRow


class _Items:
    def __init__(self, limit: int) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.limit = limit
        self.truncated = False

    def add(self, node: dict[str, Any], distance: int, path: list[str], masked: bool) -> bool:
        """Record ``node`` unless it is known; False when it was (or there is no room)."""
        if node["id"] in self.items:
            return False
        if len(self.items) >= self.limit:
            self.truncated = True
            return False
        self.items[node["id"]] = {
            "node": node,
            "distance": distance,
            "path": path,
            "masked": masked,
        }
        return True


def impact(
    reader: GraphReader, root: DatasetId, field: str | None, depth: int, limit: int
) -> dict[str, Any]:
    graph = Graph(reader)
    asked, root = root, graph.ids.canonical([root])[root]
    found = _Items(limit)
    if field is None:
        root_id = dataset_node(root)["id"]
        _dataset_walk(graph, root, depth, found)
        starts = [
            ((root, f), [root_id, dataset_node(root, f)["id"]])
            for f in _fields_with_lineage(graph, root)
        ]
    else:
        root_id = dataset_node(root, field)["id"]
        starts = [((root, field), [root_id])]
    _field_walk(graph, starts, depth, found, with_containers=field is not None)
    found.items.pop(root_id, None)
    answer = {
        "root": root_id,
        "items": sorted(found.items.values(), key=lambda i: (i["distance"], i["node"]["id"])),
        "truncated": found.truncated,
        # What the walks stopped at outside the reader's grants (query/hidden.py).
        "hidden": graph.hidden.placeholder(),
    }
    return named_as_asked(answer, root, graph.shown_as(asked), field)


def _dataset_walk(graph: Graph, root: DatasetId, depth: int, found: _Items) -> None:
    paths: dict[Node, list[str]] = {root: [dataset_node(root)["id"]]}

    def admit(origin: Node, _hop: Hop, reached: Node, distance: int) -> bool:
        node = (
            job_node(reached, graph.job_type(reached))
            if isinstance(reached, JobId)
            else dataset_node(reached)
        )
        paths[reached] = [*paths[origin], node["id"]]
        return found.add(node, distance, paths[reached], False)

    def crossings(frontier: list[Node]) -> list[tuple[Node, Hop, Node]]:
        hops = step(graph, frontier, "downstream", None)
        graph.job_types(n for _origin, _hop, n in hops if isinstance(n, JobId))
        return sorted(hops, key=_hop_order)

    Walk(admit=admit).run([root], crossings, depth)


def _hop_order(crossing: tuple[Node, Hop, Node]) -> tuple[Any, ...]:
    _origin, hop, reached = crossing
    return (hop.job, hop.dataset, isinstance(reached, JobId))


def _fields_with_lineage(graph: Graph, dataset: DatasetId) -> list[str]:
    """The root's fields that are the source of some column edge (under any alias)."""
    members = graph.ids.members([dataset])[dataset]
    rows = graph.reader.rows(
        ColumnEdgeRow, ("src_ns", "src_name"), [(m.namespace, m.name) for m in members]
    )
    return sorted({row.src_field for row in rows})


def _field_walk(
    graph: Graph,
    starts: list[tuple[Field, list[str]]],
    depth: int,
    found: _Items,
    with_containers: bool,
) -> None:
    paths = {start: (path, False) for start, path in starts}

    def admit(origin: Field, hop: ColumnHop, target: Field, distance: int) -> bool:
        edge = hop[0]
        path, masked = paths[origin]
        masked = masked or (edge.kind == "mapping" and edge.masked)
        via = path
        if edge.job is not None:
            job = job_node(edge.job, graph.job_type(edge.job))
            via = [*path, job["id"]]
            if with_containers:
                found.add(job, distance, via, masked)
        node = dataset_node(edge.target, edge.target_field)
        paths[target] = ([*via, node["id"]], masked)
        if not found.add(node, distance, paths[target][0], masked):
            return False
        if with_containers:
            container = dataset_node(edge.target)
            found.add(container, distance, [*paths[target][0], container["id"]], masked)
        return True

    def crossings(frontier: list[Field]) -> list[tuple[Field, ColumnHop, Field]]:
        edges = column_step(graph, sorted(frontier), "downstream", None)
        # Every job of this hop's edges in two queries, not two per job (bench/query.py).
        graph.job_types(e.job for _origin, (e, _span), _target in edges if e.job is not None)
        return sorted(edges, key=lambda c: _edge_order(c[1][0]))

    Walk(admit=admit).run(sorted(paths), crossings, depth)


def _edge_order(edge: Any) -> tuple[Any, ...]:
    job = edge.job or JobId("", "")
    return (edge.source, edge.source_field, edge.target, edge.target_field, job)
