"""Marquez's lineage graph (``GET /api/v1/lineage?nodeId=&depth=``, its
OpenLineageResource.getLineage; docs/marquez.md#lineage), from Embrasure's walk.

Marquez walks job-to-job hops through any dataset two jobs share, so the graph of a hub
holds every sibling reader of it and their neighbours. Embrasure's graph is walked as
its own API walks it (query/lineage.py): upstream and downstream apart, dataset ↔ job
edges, symlinked identities one node, hidden nodes left out. ``depth`` counts Marquez's
job hops; one hop is two edges (a job, the dataset it writes, the next job), so the walk
goes 2 * depth + 1 edges from a dataset (its writers and readers first), capped at
``MAX_EDGES``, and at ``MAX_NODES`` nodes (Marquez has no cap).

The answer is Marquez's shape (web/src/types/lineage.ts): ``{"graph": [{id, type:
DATASET|JOB, data, inEdges, outEdges}]}``, edges as ``{origin, destination}`` node ids,
jobs under Marquez's names (marquez/names.py). A job's ``data`` is its Job without
``latestRuns``; a dataset's is Marquez's DatasetData, its times from the walked edges.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez import names
from embrasure.marquez.datasets import (
    STREAM_TYPES,
    fields_json,
    find_dataset,
    named_as,
    shown_names,
)
from embrasure.marquez.http import bad_request, not_found, route
from embrasure.marquez.jobs import job_data_jsons
from embrasure.marquez.model import facet_text, instant, lifecycle_state, whole
from embrasure.marquez.sources import source_name
from embrasure.model import DatasetId, JobId
from embrasure.projector.graph_rows import entity
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph, MergedEdge
from embrasure.query.lineage import lineage
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.web.auth import requires
from embrasure.web.read_bounds import heavy
from embrasure.web.responses import answer

DEFAULT_DEPTH = 20  # Marquez's
MAX_EDGES = 41  # Marquez's default depth, 20 hops, in edges
MAX_NODES = 10_000  # Embrasure's own lineage cap (docs/queries.md#lineage)
KINDS = ("dataset", "datasetField", "job", "run")
# Marquez's NodeId.parts: a ':' followed by '//' (a URI's scheme) or a digit (a port)
# is inside a namespace, not between the parts.
_SEPARATOR = re.compile(r":(?!//|\d)")
DATASET_FACETS = ("schema", "dataSource", "documentation", "lifecycleStateChange", "datasetType")


class NodeId:
    """A Marquez node id: ``dataset:{ns}:{name}``, ``datasetField:{ns}:{name}:{field}``,
    ``job:{ns}:{name}``, ``run:{id}``, each maybe followed by ``#{version}``."""

    def __init__(self, text: str) -> None:
        kind, sep, rest = text.partition(":")
        if kind not in KINDS or not sep:
            raise bad_request(
                f"node ID ({text}) must start with 'dataset', 'datasetField', 'job' or 'run'"
            )
        self.text = text
        self.kind = kind
        self.version: str | None = None
        body, hash_sep, version = rest.rpartition("#")
        if hash_sep and _is_uuid(version):
            rest, self.version = body, version
        count = {"dataset": 2, "datasetField": 3, "job": 2, "run": 1}[kind]
        parts: list[str] = []
        at = 0
        for found in _SEPARATOR.finditer(rest):
            if len(parts) == count - 1:
                break
            parts.append(rest[at : found.start()])
            at = found.end()
        parts.append(rest[at:])
        if len(parts) != count or not all(parts):
            raise bad_request(f"Expected NodeId of type {kind} with {count + 1} parts. Got: {text}")
        self.parts = parts


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def dataset_node_id(d: DatasetId) -> str:
    return f"dataset:{d.namespace}:{d.name}"


def job_node_id(job: JobId, served: str) -> str:
    return f"job:{job.namespace}:{served}"


def root_of(graph: Graph, node: NodeId) -> DatasetId | JobId:
    """The graph node a Marquez node id names; 404 in Marquez's words."""
    if node.kind == "job":
        namespace, name = node.parts
        job = names.find(graph.reader, namespace, name)
        if job is None or graph.hidden.job(job):
            raise not_found(f"Job '{name}' not found.")
        return job
    if node.kind in ("dataset", "datasetField"):
        return find_dataset(graph, node.parts[0], node.parts[1])
    raise bad_request("the lineage of a run is at /api/v1/runlineage/upstream?runId=")


def lineage_graph(
    graph: Graph, root: DatasetId | JobId, depth: int, asked: DatasetId | None = None
) -> dict[str, Any]:
    """The graph around ``root``; a dataset named by its primary identity, the root by
    ``asked``, the identity the node id named (docs/marquez.md#symlinks)."""
    edges_walked = min(MAX_EDGES, 2 * depth + (1 if isinstance(root, DatasetId) else 0))
    found = lineage(graph, root, "both", edges_walked, None, MAX_NODES)
    datasets = [
        DatasetId(n["namespace"], n["name"]) for n in found["nodes"] if n["type"] == "dataset"
    ]
    jobs = [JobId(n["namespace"], n["name"]) for n in found["nodes"] if n["type"] != "dataset"]
    job_data = dict(zip(jobs, job_data_jsons(graph, jobs), strict=True))
    shown, primary = shown_names(graph, datasets, asked)
    ids: dict[DatasetId | JobId, str] = {d: dataset_node_id(shown[d]) for d in datasets}
    ids |= {j: job_node_id(j, job_data[j]["name"]) for j in jobs}
    merged = _merged_edges(graph, datasets, jobs)
    in_edges: dict[Any, list[dict[str, str]]] = {n: [] for n in ids}
    out_edges: dict[Any, list[dict[str, str]]] = {n: [] for n in ids}
    for edge in merged:
        source, target = (
            (edge.dataset, edge.job) if edge.direction == "in" else (edge.job, edge.dataset)
        )
        pair = {"origin": ids[source], "destination": ids[target]}
        if pair not in out_edges[source]:
            out_edges[source].append(pair)
            in_edges[target].append(pair)
    data = _dataset_data(graph, datasets, merged)
    data = {d: named_as(data[d], shown[d], primary[d]) for d in datasets}
    nodes: list[dict[str, Any]] = [
        {
            "id": ids[d],
            "type": "DATASET",
            "data": data[d],
            "inEdges": _sorted(in_edges[d]),
            "outEdges": _sorted(out_edges[d]),
        }
        for d in datasets
    ]
    for job in jobs:
        nodes.append(
            {
                "id": ids[job],
                "type": "JOB",
                "data": job_data[job],
                "inEdges": _sorted(in_edges[job]),
                "outEdges": _sorted(out_edges[job]),
            }
        )
    nodes.sort(key=lambda n: n["id"])
    return {"graph": nodes}


def _sorted(edges: list[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(edges, key=lambda e: (e["origin"], e["destination"]))


def _merged_edges(graph: Graph, datasets: list[DatasetId], jobs: list[JobId]) -> list[MergedEdge]:
    """The edges between the walk's nodes, merged over aliases (both directions, static
    ones too): every edge the walk crossed, and those between two nodes it reached."""
    shown_ds, shown_jobs = set(datasets), set(jobs)
    out = []
    for direction in ("in", "out"):
        for edge in graph.edges_of_jobs(jobs, direction):
            if edge.dataset in shown_ds and edge.job in shown_jobs:
                out.append(edge)
    return out


def _dataset_data(
    graph: Graph, datasets: list[DatasetId], edges: list[MergedEdge]
) -> dict[DatasetId, dict[str, Any]]:
    """Marquez's DatasetData of each node, in one facet read: its times are those of the
    walked edges touching it (first seen, last seen, last written)."""
    members = graph.ids.members(datasets)
    groups = {d: [entity("dataset", m.namespace, m.name) for m in members[d]] for d in datasets}
    facets = facets_of_groups(graph.reader, groups, names=DATASET_FACETS)
    first: dict[DatasetId, str] = {}
    last: dict[DatasetId, str] = {}
    written: dict[DatasetId, str] = {}
    for edge in edges:
        d = edge.dataset
        if edge.first is not None:
            first[d] = min(first.get(d, edge.first[0]), edge.first[0])
        if edge.last is not None:
            last[d] = max(last.get(d, edge.last[0]), edge.last[0])
            if edge.direction == "out" and not edge.static:
                written[d] = max(written.get(d, edge.last[0]), edge.last[0])
    out = {}
    for d in datasets:
        f = facets[d]
        kind = (facet_text(f, "datasetType", "datasetType") or "").upper()
        out[d] = {
            "id": {"namespace": d.namespace, "name": d.name},
            "type": "STREAM" if kind in STREAM_TYPES else "DB_TABLE",
            "name": d.name,
            "physicalName": d.name,
            "createdAt": instant(first.get(d)),
            "updatedAt": instant(last.get(d)),
            "namespace": d.namespace,
            "sourceName": source_name(f),
            "fields": fields_json(f.get("schema"), {}),
            "facets": f,
            "tags": [],
            "lastModifiedAt": instant(written.get(d)),
            "description": facet_text(f, "documentation", "description"),
            "lastLifecycleState": lifecycle_state(f),
        }
    return out


def depth_param(request: Request) -> int:
    """Marquez takes any int as a depth (no ``@Min``); below 0 walks nothing beyond the
    node's own edges, as 0."""
    return max(0, whole(request, "depth", DEFAULT_DEPTH, low=None))


def node_param(request: Request) -> NodeId:
    text = request.query_params.get("nodeId")
    if not text:
        raise bad_request("query param nodeId must not be null")
    return NodeId(text)


class LineageRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def lineage(self, request: Request) -> Response:
        node, depth = node_param(request), depth_param(request)

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            asked = DatasetId(*node.parts[:2]) if node.kind in ("dataset", "datasetField") else None
            return lineage_graph(graph, root_of(graph, node), depth, asked)

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = LineageRoutes(store)
    return [route("/lineage", requires("read")(heavy(api.lineage)))]
