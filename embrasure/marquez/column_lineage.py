"""Marquez's column-level graph (``GET /api/v1/column-lineage?nodeId=&depth=
&withDownstream=``, its ColumnLineageService; docs/marquez.md#column-lineage), from
Embrasure's column walk (query/columns.py).

The root's fields: a ``datasetField:`` id's field; a ``dataset:`` id's fields (its schema's
and those with lineage into them); a ``job:`` id's output fields it has lineage into.
The walk goes upstream ``depth`` field edges, and downstream too with
``withDownstream=true``, as Marquez's does. Node ids are
``datasetField:{namespace}:{dataset}:{field}``; as in Marquez, a node's ``inEdges`` go
from it to the fields it came from and its ``outEdges`` from it to the fields made from
it. Each input field carries Marquez's ``transformationType`` and
``transformationDescription`` (marquez/datasets.py ``transformation``) and what
Embrasure knows beyond them: ``kind`` (mapping / indirect), ``class``, ``masked``, the
INDIRECT ``subtypes``, ``derived`` (from SQL) and the ``job``.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez import names
from embrasure.marquez.datasets import find_dataset, shown_names, transformation
from embrasure.marquez.http import bad_request, not_found, route
from embrasure.marquez.lineage import MAX_NODES, NodeId, depth_param, node_param
from embrasure.marquez.runs import writer_version
from embrasure.model import DatasetId
from embrasure.projector.column_lineage import ColumnEdge
from embrasure.projector.graph_rows import entity
from embrasure.query.columns import Field, column_step
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph
from embrasure.query.walk import Walk
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import ColumnEdgeRow
from embrasure.web.auth import requires
from embrasure.web.read_bounds import heavy
from embrasure.web.responses import answer

# Marquez's strongest-first order of a field's transformations (docs/projection.md).
STRENGTH = {"AGGREGATION": 3, "TRANSFORMATION": 2, "IDENTITY": 1, "INDIRECT": 0}


def field_node_id(field: Field) -> str:
    dataset, name = field
    return f"datasetField:{dataset.namespace}:{dataset.name}:{name}"


def _fields_of(graph: Graph, node: DatasetId) -> list[Field]:
    """A dataset's fields: its schema's, and those with column lineage into them."""
    members = graph.ids.members([node])[node]
    schema = _types(graph, [node]).get(node, {})
    targets = graph.reader.pick(ColumnEdgeRow, ("tgt_field",), ("tgt_ns", "tgt_name"), members)
    return sorted({(node, f) for f in schema} | {(node, str(f)) for (f,) in targets})


def _types(graph: Graph, datasets: list[DatasetId]) -> dict[DatasetId, dict[str, str | None]]:
    """Each dataset's schema: field name → type (SchemaDatasetFacet)."""
    members = graph.ids.members(datasets)
    groups = {d: [entity("dataset", m.namespace, m.name) for m in members[d]] for d in datasets}
    out: dict[DatasetId, dict[str, str | None]] = {}
    for d, facets in facets_of_groups(graph.reader, groups, names=("schema",)).items():
        schema = facets.get("schema")
        fields = schema.get("fields") if isinstance(schema, dict) else None
        out[d] = {
            f["name"]: f.get("type") if isinstance(f.get("type"), str) else None
            for f in (fields if isinstance(fields, list) else [])
            if isinstance(f, dict) and isinstance(f.get("name"), str)
        }
    return out


def roots_of(graph: Graph, node: NodeId) -> list[Field]:
    if node.kind == "datasetField":
        namespace, name, field = node.parts
        return [(find_dataset(graph, namespace, name), field)]
    if node.kind == "dataset":
        return _fields_of(graph, find_dataset(graph, *node.parts))
    if node.kind == "job":
        namespace, name = node.parts
        job = names.find(graph.reader, namespace, name)
        if job is None or graph.hidden.job(job):
            raise not_found(f"Job '{name}' not found.")
        outputs = {e.dataset for e in graph.edges_of_jobs([job], "out")}
        return [f for d in sorted(outputs) for f in _fields_of(graph, d)]
    raise bad_request("column lineage is of a dataset, a dataset field or a job")


def column_graph(
    graph: Graph, roots: list[Field], depth: int, downstream: bool, asked: DatasetId | None = None
) -> dict[str, Any]:
    """The field graph around ``roots``; a dataset's fields named under its primary
    identity, the asked root's under ``asked`` (docs/marquez.md#symlinks)."""
    found: Walk[Field, Any] = Walk(limit=MAX_NODES)
    for walk in ("upstream", "downstream") if downstream else ("upstream",):
        found.run(roots, functools.partial(column_step, graph, walk=walk, kinds=None), depth)
    edges: dict[Any, ColumnEdge] = {edge.key: edge for edge, _span in found.edges}
    fields = sorted(set(found.distance) | set(roots))
    datasets = sorted({d for d, _ in fields})
    shown, _primary = shown_names(graph, datasets, asked)

    def field_id(field: Field) -> str:
        return field_node_id((shown[field[0]], field[1]))

    types = _types(graph, datasets)
    versions = {d: writer_version(graph, d) for d in datasets}
    inputs: dict[Field, list[ColumnEdge]] = {f: [] for f in fields}
    outputs: dict[Field, list[ColumnEdge]] = {f: [] for f in fields}
    for edge in edges.values():
        inputs[(edge.target, edge.target_field)].append(edge)
        outputs[(edge.source, edge.source_field)].append(edge)
    nodes = []
    for field in fields:
        dataset, name = field
        mine = sorted(inputs[field], key=lambda e: (e.source, e.source_field))
        input_fields = [_input_json(graph, e, versions, shown) for e in mine]
        strongest = max(input_fields, key=lambda i: STRENGTH[i["transformationType"]], default=None)
        me = field_id(field)
        nodes.append(
            {
                "id": me,
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": shown[dataset].namespace,
                    "dataset": shown[dataset].name,
                    "datasetVersion": versions[dataset],
                    "field": name,
                    "fieldType": types.get(dataset, {}).get(name),
                    "transformationDescription": strongest["transformationDescription"]
                    if strongest
                    else None,
                    "transformationType": strongest["transformationType"] if strongest else None,
                    "inputFields": input_fields,
                },
                "inEdges": _edges(me, [field_id((e.source, e.source_field)) for e in mine]),
                "outEdges": _edges(
                    me, [field_id((e.target, e.target_field)) for e in outputs[field]]
                ),
            }
        )
    return {"graph": nodes}


def _edges(me: str, others: list[str]) -> list[dict[str, str]]:
    """Marquez's column edges of a node: from it to each of ``others`` (node ids)."""
    return [{"origin": me, "destination": other} for other in sorted(others)]


def _input_json(
    graph: Graph,
    edge: ColumnEdge,
    versions: dict[DatasetId, str],
    shown: dict[DatasetId, DatasetId],
) -> dict[str, Any]:
    kind, description = transformation(edge.klass, edge.kind)
    job = edge.job
    out: dict[str, Any] = {
        "namespace": shown[edge.source].namespace,
        "dataset": shown[edge.source].name,
        "datasetVersion": versions.get(edge.source),
        "field": edge.source_field,
        "transformationDescription": description,
        "transformationType": kind,
        # Embrasure's own (docs/projection.md#column-lineage).
        "kind": edge.kind,
        "class": edge.klass,
        "masked": edge.masked,
        "subtypes": list(edge.subtypes),
        "job": {"namespace": job.namespace, "name": job.name} if job else None,
    }
    if edge.derived:
        out["derived"] = edge.derived
    return out


class ColumnLineageRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def lineage(self, request: Request) -> Response:
        node, depth = node_param(request), depth_param(request)
        downstream = (request.query_params.get("withDownstream") or "false").lower() == "true"
        if node.version is not None and downstream:
            raise bad_request("Node version cannot be specified when withDownstream is true")

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            roots = roots_of(graph, node)
            if not roots:
                raise not_found("Could not find node")
            asked = DatasetId(*node.parts[:2]) if node.kind in ("dataset", "datasetField") else None
            return column_graph(graph, roots, depth, downstream, asked)

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = ColumnLineageRoutes(store)
    return [route("/column-lineage", requires("read")(heavy(api.lineage)))]
