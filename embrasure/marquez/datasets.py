"""Marquez's datasets (its DatasetResource): a namespace's datasets, one dataset, its
versions (docs/marquez.md#datasets).

A dataset is Embrasure's node: symlinked identities (a Spark path and its warehouse
table) are one node, but Marquez keeps a row per identity, and clients look a dataset
up by the name they wrote. So a namespace lists every identity sent as a dataset in it,
and a dataset is answered under the identity asked (any of the node's), each with the
node's data and ``physicalName`` its primary identity's name (``primaries``).
Its versions are the runs that wrote it (marquez/model.py); one that no run wrote has
one version, standing for the dataset as first seen, with no ``createdByRun``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez.http import not_found, route
from embrasure.marquez.model import (
    dataset_version,
    facet_text,
    instant,
    lifecycle_state,
    paging,
    schema_version,
)
from embrasure.marquez.runs import run_json, shown_run
from embrasure.marquez.sources import source_name
from embrasure.model import DatasetId
from embrasure.projector.graph_rows import entity
from embrasure.projector.symlinks import RENAME, TABLE
from embrasure.query.columns import column_edges_of
from embrasure.query.dataset_runs import writer_runs
from embrasure.query.entities import run_views
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph
from embrasure.query.hidden import Hidden
from embrasure.query.tags import entity_tags, field_tags
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import (
    ColumnEdgeRow,
    DatasetRow,
    FacetRow,
    JobRow,
    LinkRow,
    RunIoRow,
    RunRow,
)
from embrasure.web.auth import requires
from embrasure.web.responses import answer

# Marquez's DatasetType: a table unless the dataset says it is a stream (the
# datasetType facet, OpenLineage DatasetTypeDatasetFacet 1-0-0).
STREAM_TYPES = ("STREAM", "TOPIC")


def find_dataset(graph: Graph, namespace: str, name: str) -> DatasetId:
    """The node a Marquez path names (by any identity); 404 as Marquez says it."""
    given = DatasetId(namespace, name)
    node = graph.ids.canonical([given])[given]
    if not graph.reader.rows(DatasetRow, ("ns", "name"), [node]) or graph.hidden.datasets_hidden(
        [node]
    ):
        raise not_found(f"Dataset '{name}' not found.")
    return node


def dataset_json(graph: Graph, identity: DatasetId) -> dict[str, Any]:
    return dataset_jsons(graph, [identity])[0]


def dataset_jsons(graph: Graph, identities: list[DatasetId]) -> list[dict[str, Any]]:
    """Marquez's Dataset (web/src/types/api.ts ``Dataset``) of each identity: its
    node's (symlinked identities are one node), named as asked — ``id``, ``name`` and
    ``namespace`` the identity's, ``physicalName`` the node's primary identity's name
    (``primaries``) — as Marquez answers each of its rows (docs/marquez.md#symlinks)."""
    canonical = graph.ids.canonical(identities)
    nodes = list(dict.fromkeys(canonical[i] for i in identities))
    built = dict(zip(nodes, _node_jsons(graph, nodes), strict=True))
    primary = primaries(graph, nodes)
    return [named_as(built[canonical[i]], i, primary[canonical[i]]) for i in identities]


def primaries(graph: Graph, nodes: Iterable[DatasetId]) -> dict[DatasetId, DatasetId | None]:
    """Each node's primary identity on the port, from the set of what was sent, whatever
    the order it came in: among the identities a producer sent as a dataset (never one
    only a ``symlinks`` facet names) in a namespace the reader may see (readable, not
    hidden: docs/security.md), those no other sent identity's facet names as its table
    and no rename left behind — the path a Spark job wrote, as Marquez's
    ``dataset_symlinks.is_primary`` marks it, not the table its facet names — the
    smallest of them (of all, when every one is named so); None when there is none."""
    members = graph.ids.members(nodes)
    named = sorted({(m.namespace, m.name) for group in members.values() for m in group})
    sent = graph.reader.sent_datasets(named)
    links = graph.reader.rows(LinkRow, ("a_ns", "a_name"), sorted(sent))
    aliases = {(k.b_ns, k.b_name) for k in links if k.kind == TABLE}
    aliases |= {(k.a_ns, k.a_name) for k in links if k.kind == RENAME}
    may_name = graph.hidden.may_name

    def primary(group: list[DatasetId]) -> DatasetId | None:
        candidates = [m for m in group if m in sent and may_name(m.namespace)]
        return min([m for m in candidates if m not in aliases] or candidates, default=None)

    return {n: primary(group) for n, group in members.items()}


def shown_names(
    graph: Graph, nodes: Iterable[DatasetId], asked: DatasetId | None
) -> tuple[dict[DatasetId, DatasetId], dict[DatasetId, DatasetId | None]]:
    """The identity each node of a graph answer is named by — its primary (else the
    node), but the asked root's node by the identity asked — and each node's primary."""
    primary = primaries(graph, nodes)
    shown = {n: p or n for n, p in primary.items()}
    if asked is not None:
        shown[graph.ids.canonical([asked])[asked]] = asked
    return shown, primary


def named_as(doc: dict[str, Any], identity: DatasetId, primary: DatasetId | None) -> dict[str, Any]:
    """A dataset's Marquez answer (Dataset, DatasetData) under ``identity``, its
    ``physicalName`` the ``primary`` identity's name (without one, its own)."""
    ns, name = identity
    return doc | {
        "id": {"namespace": ns, "name": name},
        "name": name,
        "namespace": ns,
        "physicalName": (primary or identity).name,
    }


def _node_jsons(graph: Graph, nodes: list[DatasetId]) -> list[dict[str, Any]]:
    """The Datasets of canonical nodes, named by the node: a page in a few queries
    (facets, edges, tags and column lineage for all of it), plus one per identity for
    its latest writer."""
    reader = graph.reader
    lineage = column_lineage_jsons(graph, nodes)
    members = graph.ids.members(nodes)
    owners = {n: [entity("dataset", m.namespace, m.name) for m in members[n]] for n in nodes}
    facets = facets_of_groups(reader, owners)
    spans = _spans(graph, nodes, owners)
    keys = [(n.namespace, n.name) for n in nodes]
    tags = entity_tags(reader, graph.ids, "dataset", keys)
    fields_tags = field_tags(reader, graph.ids, keys)
    return [
        _dataset_json(
            graph,
            node,
            members[node],
            facets[node],
            spans[node],
            (tags[key], fields_tags[key]),
            lineage[node],
        )
        for node, key in zip(nodes, keys, strict=True)
    ]


def _dataset_json(
    graph: Graph,
    node: DatasetId,
    members: list[DatasetId],
    facets: dict[str, Any],
    span: tuple[str | None, str | None],
    tagged: tuple[list[str], dict[str, list[str]]],
    column_lineage: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    created, updated = span
    tags, fields_tags = tagged
    writer = _latest_writer(graph, members)
    lifecycle = lifecycle_state(facets)
    dataset_type = facet_text(facets, "datasetType", "datasetType")
    return {
        "id": {"namespace": node.namespace, "name": node.name},
        "type": "STREAM" if (dataset_type or "").upper() in STREAM_TYPES else "DB_TABLE",
        "name": node.name,
        "physicalName": node.name,
        "createdAt": created,
        "updatedAt": updated,
        "namespace": node.namespace,
        "sourceName": source_name(facets),
        "fields": fields_json(facets.get("schema"), fields_tags),
        "tags": tags,
        "lastModifiedAt": instant(writer.ended_key or writer.started_key) if writer else None,
        "lastLifecycleState": lifecycle,
        "description": facet_text(facets, "documentation", "description"),
        "currentVersion": dataset_version(
            node.namespace, node.name, writer.run_id if writer else ""
        ),
        "columnLineage": column_lineage,
        "facets": facets,
        "deleted": False,  # hidden datasets are not served (marquez/model.py)
    }


def fields_json(schema: Any, tags: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Marquez's fields from the schema facet (SchemaDatasetFacet): top-level fields."""
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        return []
    out = []
    for f in schema["fields"]:
        if isinstance(f, dict) and isinstance(f.get("name"), str):
            description = f.get("description")
            out.append(
                {
                    "name": f["name"],
                    "type": f.get("type") if isinstance(f.get("type"), str) else None,
                    "tags": tags.get(f["name"], []),
                    "description": description if isinstance(description, str) else None,
                }
            )
    return out


# Marquez's transformationType and description for Embrasure's classes
# (docs/projection.md#column-lineage): its own words for the old facet's types.
TRANSFORMATIONS = {
    "direct": ("IDENTITY", "identical"),
    "expression": ("TRANSFORMATION", "transformed"),
    "aggregate": ("AGGREGATION", "aggregated"),
}


def transformation(klass: str | None, kind: str) -> tuple[str, str]:
    if kind == "indirect" or klass is None:
        return ("INDIRECT", "indirect")
    return TRANSFORMATIONS.get(klass, TRANSFORMATIONS["expression"])


def column_lineage_jsons(
    graph: Graph, nodes: list[DatasetId]
) -> dict[DatasetId, list[dict[str, Any]] | None]:
    """Marquez's ``columnLineage`` of each dataset: per field, the input fields it came
    from (ColumnLineageService.enrichWithColumnLineage); None when it has none, as
    Marquez. One read for a page of datasets."""
    members = graph.ids.members(nodes)
    node_of = {m: node for node in nodes for m in members[node]}
    # The fields with lineage into them, read along column_edges' key (target first).
    keys = [(m.namespace, m.name) for m in node_of]
    targets = graph.reader.pick(
        ColumnEdgeRow, ("tgt_ns", "tgt_name", "tgt_field"), ("tgt_ns", "tgt_name"), keys
    )
    fields = sorted({(node_of[DatasetId(ns, n)], str(f)) for ns, n, f in targets})
    by_field: dict[DatasetId, dict[str, list[dict[str, Any]]]] = {n: {} for n in nodes}
    edges = column_edges_of(graph, fields, "tgt")
    for edge, _span in sorted(edges, key=lambda e: (e[0].target_field, e[0].source_field)):
        kind, description = transformation(edge.klass, edge.kind)
        by_field[edge.target].setdefault(edge.target_field, []).append(
            {
                "namespace": edge.source.namespace,
                "dataset": edge.source.name,
                "field": edge.source_field,
                "transformationDescription": description,
                "transformationType": kind,
            }
        )
    return {
        node: [
            {
                "name": field,
                "inputFields": inputs,
                "transformationDescription": inputs[0]["transformationDescription"],
                "transformationType": inputs[0]["transformationType"],
            }
            for field, inputs in sorted(by_field[node].items())
        ]
        or None
        for node in nodes
    }


def _spans(
    graph: Graph, nodes: list[DatasetId], owners: dict[DatasetId, list[str]]
) -> dict[DatasetId, tuple[str | None, str | None]]:
    """Each node's earliest and latest eventTime that named it: its edges' first and
    last seen, and its facets' times."""
    keys: dict[DatasetId, list[str]] = {n: [] for n in nodes}
    for direction in ("in", "out"):
        for edge in graph.edges_of_datasets(nodes, direction):
            if edge.dataset in keys:
                keys[edge.dataset] += [t[0] for t in (edge.first, edge.last) if t is not None]
    node_of = {owner: n for n, listed in owners.items() for owner in listed}
    rows = graph.reader.rows(FacetRow, ("entity",), [(o,) for o in node_of])
    for row in rows:
        if row.value_key:
            keys[node_of[row.entity]].append(row.value_key)
    return {n: (instant(min(k)), instant(max(k))) if k else (None, None) for n, k in keys.items()}


def _latest_writer(graph: Graph, members: list[DatasetId]) -> RunRow | None:
    rows, _ = writer_runs(graph.reader, members, None, 1, shown_run(graph))
    return rows[0] if rows else None


def version_json(
    graph: Graph, node: DatasetId, row: RunRow | None, base: dict[str, Any]
) -> dict[str, Any]:
    """Marquez's DatasetVersion: what run ``row`` wrote (None: the dataset as first
    seen, which no run wrote); ``base`` is the dataset's ``dataset_json``, named as
    asked. Versions are the node's: the same ids by whichever identity."""
    version = dataset_version(node.namespace, node.name, row.run_id if row else "")
    sent: dict[str, Any] = base["facets"]
    created = base["createdAt"]
    run = None
    if row is not None:
        run = run_json(graph, row)
        # What the run sent about the dataset (its dataset facets, as of its events).
        view = run_views(graph.reader, [row], 0, graph.ids)[0]  # type: ignore[arg-type]
        mine = next((o for o in view["outputs"] if (o["namespace"], o["name"]) == node), None)
        sent = mine["facets"] if mine is not None else {}
        created = run["updatedAt"]
    fields = fields_json(sent.get("schema"), {}) if "schema" in sent else base["fields"]
    return {
        "id": base["id"],
        "type": base["type"],
        "name": base["name"],
        "physicalName": base["physicalName"],
        "createdAt": created,
        "version": version,
        "namespace": base["namespace"],
        "sourceName": source_name(sent) if sent else base["sourceName"],
        "fields": fields,
        "tags": base["tags"],
        "lifecycleState": lifecycle_state(sent),
        "description": facet_text(sent, "documentation", "description") or base["description"],
        "currentSchemaVersion": schema_version(
            node.namespace, node.name, [(f["name"], f["type"]) for f in fields]
        )
        if fields
        else None,
        "createdByRun": run,
        "facets": sent,
    }


def _writers(graph: Graph, node: DatasetId, offset: int, limit: int) -> list[RunRow]:
    members = graph.ids.members([node])[node]
    rows, _ = writer_runs(graph.reader, members, None, offset + limit, shown_run(graph))
    return rows[offset:]


def _writer_count(graph: Graph, node: DatasetId) -> int:
    members = graph.ids.members([node])[node]
    keys = [(m.namespace, m.name, "out") for m in members]
    return len(
        set(graph.reader.pick(RunIoRow, ("run_id",), ("ds_ns", "ds_name", "direction"), keys))
    )


class DatasetRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, request: Request) -> Response:
        namespace = request.path_params["namespace"]

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            limit, offset = paging(request)
            total, nodes = listed_datasets(graph, namespace, offset, limit)
            if not total and not namespace_known(reader, namespace):
                raise not_found(f"Namespace '{namespace}' not found.")
            return {"totalCount": total, "datasets": dataset_jsons(graph, nodes)}

        return await answer(self.store, work)

    async def get(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            self._node(graph, request)
            return dataset_json(graph, _asked(request))

        return await answer(self.store, work)

    async def versions(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            node = self._node(graph, request)
            limit, offset = paging(request)
            total = _writer_count(graph, node)
            base = dataset_json(graph, _asked(request))
            if total == 0:  # the one version of a dataset no run wrote
                versions = [version_json(graph, node, None, base)][offset : offset + limit]
                return {"totalCount": 1, "versions": versions}
            rows = _writers(graph, node, offset, limit)
            return {
                "totalCount": total,
                "versions": [version_json(graph, node, r, base) for r in rows],
            }

        return await answer(self.store, work)

    async def version(self, request: Request) -> Response:
        wanted = request.path_params["version"]

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            node = self._node(graph, request)
            members = graph.ids.members([node])[node]
            keys = [(m.namespace, m.name, "out") for m in members]
            writers = reader.pick(RunIoRow, ("run_id",), ("ds_ns", "ds_name", "direction"), keys)
            for (run_id,) in writers:
                if dataset_version(node.namespace, node.name, str(run_id)) == wanted:
                    row = reader.rows(RunRow, ("run_id",), [(run_id,)])[0]
                    return version_json(graph, node, row, dataset_json(graph, _asked(request)))
            if not writers and wanted == dataset_version(node.namespace, node.name, ""):
                return version_json(graph, node, None, dataset_json(graph, _asked(request)))
            raise not_found(f"Dataset version '{wanted}' not found.")

        return await answer(self.store, work)

    def _node(self, graph: Graph, request: Request) -> DatasetId:
        namespace = request.path_params["namespace"]
        if not namespace_known(graph.reader, namespace):
            raise not_found(f"Namespace '{namespace}' not found.")
        return find_dataset(graph, namespace, request.path_params["dataset"])


def _asked(request: Request) -> DatasetId:
    return DatasetId(request.path_params["namespace"], request.path_params["dataset"])


def listed_datasets(
    graph: Graph, namespace: str, offset: int, limit: int
) -> tuple[int, list[DatasetId]]:
    """How many datasets a namespace lists as Marquez does, and the page from
    ``offset``: every dataset identity in it, sent as a dataset or named as a table by
    a symlinks facet (Marquez keeps a row per identity, ``dataset_symlinks``), those
    of hidden nodes left out, by name. A node of a shown namespace is
    hidden only by name (one of its identities hidden: query/hidden.py), so its few
    identities are skipped by the store."""
    if namespace in graph.hidden.namespaces:
        return 0, []
    nodes = set(graph.ids.canonical(graph.hidden.datasets).values())
    members = graph.ids.members(nodes)
    skip = sorted(
        {(m.namespace, m.name) for n in nodes for m in members[n] if m.namespace == namespace}
    )
    total, rows = graph.reader.datasets_in(namespace, skip, offset, limit)
    return total, [DatasetId(r.ns, r.name) for r in rows]


def namespace_known(reader: GraphReader, namespace: str) -> bool:
    """Whether any dataset or job is in the namespace, and it is not hidden; Marquez's
    ``default`` always is (marquez/namespaces.py)."""
    if namespace in Hidden.of(reader).namespaces:
        return False
    return namespace == "default" or bool(
        reader.page(DatasetRow, None, 1, namespace) or reader.page(JobRow, None, 1, namespace)
    )


def routes(store: Store) -> list[BaseRoute]:
    api = DatasetRoutes(store)
    read = requires("read")
    base = "/namespaces/{namespace}/datasets"
    return [
        route(base, read(api.list)),
        route(base + "/{dataset}", read(api.get)),
        route(base + "/{dataset}/versions", read(api.versions)),
        route(base + "/{dataset}/versions/{version}", read(api.version)),
    ]
