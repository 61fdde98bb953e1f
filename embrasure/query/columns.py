"""Column lineage (DESIGN §5 ``GET /api/v1/column-lineage``): field → field edges, resolved
to canonical datasets and merged, and the walk over them."""

from __future__ import annotations

from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.projector import graph_rows
from embrasure.projector.column_lineage import ColumnEdge, ColumnEdgeKey, merge_edges
from embrasure.projector.graph_rows import EdgeSpan
from embrasure.query.entities import dataset_node, node_id
from embrasure.query.graph import Graph
from embrasure.store.base import GraphReader


def column_edges_of(
    graph: Graph, fields: list[tuple[DatasetId, str]], side: str
) -> list[tuple[ColumnEdge, EdgeSpan]]:
    """Column edges whose ``side`` ("src" or "tgt") is one of ``fields``, resolved to
    canonical nodes and merged (a declared edge wins over a SQL-derived one); none
    through a hidden dataset or job."""
    reader, ids = graph.reader, graph.ids
    members = ids.members({d for d, _ in fields})
    keys = [(m.namespace, m.name, f) for d, f in fields for m in members[d]]
    rows = reader.rows("column_edges", (f"{side}_ns", f"{side}_name", f"{side}_field"), keys)
    canonical = ids.canonical(
        [DatasetId(r[0], r[1]) for r in rows] + [DatasetId(r[3], r[4]) for r in rows]
    )
    merged: dict[ColumnEdgeKey, tuple[ColumnEdge, EdgeSpan]] = {}
    for row in rows:
        key, value = row[:9], row[9:]
        edge, span = graph_rows.column_edge_of(
            key, value, canonical[DatasetId(row[3], row[4])], canonical[DatasetId(row[0], row[1])]
        )
        old = merged.get(edge.key)
        if old is not None:
            edge = merge_edges(old[0], edge)
            span.add(old[1].first)
            span.add(old[1].last)
        merged[edge.key] = (edge, span)
    if graph.hidden:
        hidden = graph.hidden.nodes_hidden(
            {n for e in merged for n in (e.source, e.target, e.job) if n is not None}
        )
        return [m for k, m in merged.items() if not {k.source, k.target, k.job} & hidden]
    return list(merged.values())


def column_lineage(
    reader: GraphReader,
    root: DatasetId,
    field: str,
    direction: str,
    depth: int,
    kinds: set[str],
    limit: int = 500,
) -> dict[str, Any]:
    graph = Graph(reader)
    root = graph.ids.canonical([root])[root]
    start = (root, field)
    nodes: dict[tuple[DatasetId, str], int] = {start: 0}
    truncated = False
    edges: dict[ColumnEdgeKey, tuple[ColumnEdge, EdgeSpan]] = {}
    for walk in ("upstream", "downstream") if direction == "both" else (direction,):
        seen = {start}  # per walk, as in ``lineage``
        frontier = [start]
        for distance in range(1, depth + 1):
            side = "tgt" if walk == "upstream" else "src"
            nxt: list[tuple[DatasetId, str]] = []
            for edge, span in column_edges_of(graph, frontier, side):
                if edge.kind not in kinds:
                    continue
                other = (
                    (edge.source, edge.source_field)
                    if walk == "upstream"
                    else (edge.target, edge.target_field)
                )
                if other not in nodes and len(nodes) >= limit:
                    truncated = True
                    continue
                edges[edge.key] = (edge, span)
                nodes[other] = min(nodes.get(other, distance), distance)
                if other not in seen:
                    seen.add(other)
                    nxt.append(other)
            frontier = nxt
            if not frontier:
                break
    return {
        "root": dataset_node(root, field)["id"],
        "nodes": [dataset_node(d, f) for d, f in sorted(nodes)],
        "edges": [column_edge_json(graph, *edges[k]) for k in sorted(edges, key=_column_order)],
        "truncated": truncated,
    }


def _column_order(key: ColumnEdgeKey) -> tuple[Any, ...]:
    return (key.source, key.source_field, key.target, key.target_field, key.job or JobId("", ""))


def column_edge_json(graph: Graph, edge: ColumnEdge, span: EdgeSpan) -> dict[str, Any]:
    job = edge.job
    out = {
        "source": dataset_node(edge.source, edge.source_field)["id"],
        "target": dataset_node(edge.target, edge.target_field)["id"],
        "kind": edge.kind,
        "class": edge.klass,
        "masked": edge.masked,
        "indirect": list(edge.indirect),
        "job": node_id(graph.job_type(job), job.namespace, job.name) if job else None,
        "first_seen": span.first.text if span.first else None,
        "last_seen": span.last.text if span.last else None,
    }
    if edge.derived:
        out["derived"] = edge.derived
    return out
