"""Column lineage (docs/queries.md ``GET /api/v1/column-lineage``): field → field edges, resolved
to canonical datasets and merged, and the walk over them."""

from __future__ import annotations

import difflib
import functools
from typing import Any

from embrasure.errors import Problem
from embrasure.model import DatasetId, JobId
from embrasure.projector import graph_rows
from embrasure.projector.column_lineage import ColumnEdge, ColumnEdgeKey, merge_edges
from embrasure.projector.graph_rows import EdgeSpan
from embrasure.query.entities import dataset_node, named_as_asked, node_id
from embrasure.query.graph import Graph, Resolver
from embrasure.query.walk import Walk
from embrasure.store.base import GraphReader
from embrasure.store.rows import ColumnEdgeRow, FieldNameRow, FieldRow

Field = tuple[DatasetId, str]  # a dataset's field: a node of the column graph
ColumnHop = tuple[ColumnEdge, EdgeSpan]  # a column edge and when it was seen


def column_edges_of(
    graph: Graph, fields: list[tuple[DatasetId, str]], side: str
) -> list[tuple[ColumnEdge, EdgeSpan]]:
    """Column edges whose ``side`` ("src" or "tgt") is one of ``fields``, resolved to
    canonical nodes and merged (a declared edge wins over a SQL-derived one); none
    through a hidden dataset or job."""
    reader, ids = graph.reader, graph.ids
    members = ids.members({d for d, _ in fields})
    keys = [(m.namespace, m.name, f) for d, f in fields for m in members[d]]
    rows = reader.rows(ColumnEdgeRow, (f"{side}_ns", f"{side}_name", f"{side}_field"), keys)
    canonical = ids.canonical(
        [DatasetId(r.tgt_ns, r.tgt_name) for r in rows]
        + [DatasetId(r.src_ns, r.src_name) for r in rows]
    )
    merged: dict[ColumnEdgeKey, tuple[ColumnEdge, EdgeSpan]] = {}
    for row in rows:
        edge, span = graph_rows.column_edge_of(
            row,
            canonical[DatasetId(row.src_ns, row.src_name)],
            canonical[DatasetId(row.tgt_ns, row.tgt_name)],
        )
        old = merged.get(edge.key)
        if old is not None:
            edge = merge_edges(old[0], edge)
            span.add(old[1].first)
            span.add(old[1].last)
        merged[edge.key] = (edge, span)
    if not graph.hidden:
        return list(merged.values())
    hidden = graph.hidden.nodes_hidden(
        {n for e in merged for n in (e.source, e.target, e.job) if n is not None}
    )
    shown = []
    for k, m in merged.items():
        through = {k.source, k.target, k.job} & hidden
        if not through:
            shown.append(m)
        elif any(graph.hidden.outside(n) for n in through if n is not None):
            # The walk stops at the far field, or at the job when only the job lies
            # outside the reader's grants: the placeholder's count (query/hidden.py).
            near, far = (k.source, k.source_field), (k.target, k.target_field)
            if side == "tgt":
                near, far = far, near
            stopped = far if graph.hidden.outside(far[0]) else k.job
            graph.hidden.stop(stopped, dataset_node(*near)["id"])
    return shown


CLOSEST_FIELDS = 5  # how many near names a field-not-found problem offers


def known_field(reader: GraphReader, ids: Resolver, dataset: DatasetId, field: str) -> None:
    """404 ``field-not-found`` unless a schema facet or column lineage ever named ``field``
    on some identity of ``dataset`` (the ``fields`` table); the problem names the dataset
    as asked.

    Without it a mistyped field (``emial``) answered 200 with nothing downstream, which
    reads as "safe to change". The near names offered are the dataset's own: the
    distinct field names (``field_names``, hundreds on a platform, as search scans them)
    matched by difflib, then kept if the dataset holds them, by the ``fields`` key; no
    read scans ``fields`` itself, whose key does not lead with the dataset."""
    node = ids.canonical([dataset])[dataset]
    members = ids.members([node])[node]
    if reader.rows(
        FieldRow, ("ns", "name", "field"), [(m.namespace, m.name, field) for m in members]
    ):
        return
    names = [name for (name,) in reader.distinct(FieldNameRow, ("field",))]
    near = difflib.get_close_matches(field, names, n=len(names) or 1, cutoff=0.6)
    keys = [(m.namespace, m.name, f) for m in members for f in near]
    held = (
        {row.field for row in reader.rows(FieldRow, ("ns", "name", "field"), keys)}
        if keys
        else set()
    )
    closest = [f for f in near if f in held][:CLOSEST_FIELDS]
    hint = (
        f" Closest known: {', '.join(closest)}."
        if closest
        else " None of its known fields is close to that (GET /api/v1/datasets?namespace=…"
        "&name=… lists its schema)."
    )
    raise Problem(
        404,
        "field-not-found",
        "Field not found",
        f"No field {field!r} is known on dataset {dataset.namespace} {dataset.name}: no schema"
        f" facet or column lineage named it.{hint}",
        closest=closest,
    )


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
    asked, root = root, graph.ids.canonical([root])[root]
    found: Walk[Field, ColumnHop] = Walk(limit=limit)
    for walk in ("upstream", "downstream") if direction == "both" else (direction,):
        # ``both`` is two complete walks sharing the node limit, as in ``lineage``.
        found.run(
            [(root, field)], functools.partial(column_step, graph, walk=walk, kinds=kinds), depth
        )
    edges = {edge.key: (edge, span) for edge, span in found.edges}
    placeholder = graph.hidden.placeholder()
    answer = {
        "root": dataset_node(root, field)["id"],
        "nodes": [dataset_node(d, f) for d, f in sorted(found.distance)]
        + ([placeholder] if placeholder else []),
        "edges": [column_edge_json(graph, *edges[k]) for k in sorted(edges, key=_column_order)],
        "truncated": found.truncated,
    }
    return named_as_asked(answer, root, graph.shown_as(asked), field)


def column_step(
    graph: Graph, frontier: list[Field], walk: str, kinds: set[str] | None
) -> list[tuple[Field, ColumnHop, Field]]:
    """One breadth-first step of a column walk: the column edges (of ``kinds``, or of
    every kind) leaving ``frontier`` in the walk's direction, each as (the field it
    leaves, the edge, the field it reaches)."""
    upstream = walk == "upstream"
    out: list[tuple[Field, ColumnHop, Field]] = []
    for edge, span in column_edges_of(graph, frontier, "tgt" if upstream else "src"):
        if kinds is not None and edge.kind not in kinds:
            continue
        source, target = (edge.source, edge.source_field), (edge.target, edge.target_field)
        out.append((target, (edge, span), source) if upstream else (source, (edge, span), target))
    return out


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
