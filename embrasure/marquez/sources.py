"""Marquez's sources (``GET /api/v1/sources``, ``/api/v1/sources/{source}``, its
SourceResource; docs/marquez.md#sources-and-tags).

Marquez records a source for each OpenLineage dataset it reads: the ``dataSource``
facet's name and URI (OpenLineage DatasourceDatasetFacet 1-0-0; Marquez's
``LineageEvent.DatasetFacets.dataSource``), or one source named ``default`` with an
empty URL for every dataset without the facet (its OpenLineageDao). A dataset's source
is what its Dataset answers as ``sourceName`` (datasets.py ``source_name``), the same
rule, so every ``sourceName`` a client reads can be looked up here. A source is listed
while a shown dataset names it:

- ``connectionUrl``: the facet's ``uri`` (the first by value when the datasets naming
  the source disagree), ``""`` for ``default``;
- ``type``: the connection URL's scheme in capitals (``POSTGRES``, ``S3``; ``DEFAULT``
  without one). Marquez answers ``POSTGRESQL`` for every source an OpenLineage event
  made, which says nothing;
- ``createdAt``, ``updatedAt``: the first and last eventTime of the namespaces its
  datasets' identities are in (GraphReader.namespace_spans), as a namespace's; never
  null (Marquez's Source has them ``@NonNull``): a source none of whose namespaces an
  edge names (datasets known from DatasetEvents only) takes the graph's first and last;
- ``description``: null (OpenLineage has no source description).

A listing reads every dataset's ``dataSource`` facet (a key lookup each): the route is
for clients' occasional listing (marquez-python ``list_sources``), not a page marquez-web
polls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez.http import not_found, route
from embrasure.marquez.model import facet_text, instant, paging
from embrasure.model import DatasetId
from embrasure.projector.graph_rows import entity
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import DatasetRow
from embrasure.web.auth import requires
from embrasure.web.responses import answer

FACET = "dataSource"  # OpenLineage's name for DatasourceDatasetFacet (its spec's key)
DEFAULT = "default"  # the source of every dataset without the facet, as Marquez names it
BATCH = 1000  # dataset nodes whose facets one read asks for


class Source(NamedTuple):
    name: str
    url: str
    first_key: str | None  # eventTime keys
    last_key: str | None


def sources(reader: GraphReader) -> list[Source]:
    """Every source a shown dataset names, by name (what stats.py counts too)."""
    graph = Graph(reader)
    urls: dict[str, set[str]] = {}
    namespaces: dict[str, set[str]] = {}
    for members, facets in _datasources(graph):
        name = source_name(facets)
        url = "" if name == DEFAULT else facet_text(facets, FACET, "uri") or ""
        urls.setdefault(name, set()).add(url)
        namespaces.setdefault(name, set()).update(m.namespace for m in members)
    spans = {s.namespace: s for s in reader.namespace_spans()}
    everything = (
        min((s.first_key for s in spans.values() if s.first_key), default=None),
        max((s.last_key for s in spans.values() if s.last_key), default=None),
    )
    out = []
    for name in sorted(urls):
        known = [spans[n] for n in namespaces[name] if n in spans]
        out.append(
            Source(
                name,
                min((u for u in urls[name] if u), default=""),
                min((s.first_key for s in known if s.first_key), default=everything[0]),
                max((s.last_key for s in known if s.last_key), default=everything[1]),
            )
        )
    return out


def source_jsons(reader: GraphReader) -> list[dict[str, Any]]:
    """Every source a shown dataset names, as Marquez's Source, by name."""
    out = []
    for source in sources(reader):
        scheme, sep, _ = source.url.partition("://")
        out.append(
            {
                "type": scheme.upper() if sep and scheme else "DEFAULT",
                "name": source.name,
                "createdAt": instant(source.first_key),
                "updatedAt": instant(source.last_key),
                "connectionUrl": source.url,
                "description": None,
            }
        )
    return out


def source_name(facets: dict[str, Any]) -> str:
    """A dataset's source as Marquez names it: the dataSource facet's name, else
    ``default``."""
    return facet_text(facets, FACET, "name") or DEFAULT


def _datasources(graph: Graph) -> list[tuple[list[DatasetId], dict[str, Any]]]:
    """Each shown dataset node's identities with its facets, of which only
    ``dataSource``."""
    sent = [DatasetId(r.ns, r.name) for r in graph.reader.rows(DatasetRow)]
    canonical = graph.ids.canonical(sent)
    nodes = [d for d in sent if canonical[d] == d]
    hidden = graph.hidden.datasets_hidden(nodes)
    shown = [d for d in nodes if d not in hidden]
    out: list[tuple[list[DatasetId], dict[str, Any]]] = []
    for start in range(0, len(shown), BATCH):
        out += _facets(graph, shown[start : start + BATCH])
    return out


def _facets(
    graph: Graph, nodes: Sequence[DatasetId]
) -> list[tuple[list[DatasetId], dict[str, Any]]]:
    members = graph.ids.members(nodes)
    groups = {n: [entity("dataset", m.namespace, m.name) for m in members[n]] for n in nodes}
    found = facets_of_groups(graph.reader, groups, names=[FACET])
    return [(members[node], found[node]) for node in nodes]


class SourceRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit, offset = paging(request)
            return {"sources": source_jsons(reader)[offset : offset + limit]}

        return await answer(self.store, work)

    async def get(self, request: Request) -> Response:
        name = request.path_params["source"]

        def work(reader: GraphReader) -> Any:
            for source in source_jsons(reader):
                if source["name"] == name:
                    return source
            raise not_found(f"Source '{name}' not found.")

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = SourceRoutes(store)
    read = requires("read")
    return [route("/sources", read(api.list)), route("/sources/{source}", read(api.get))]
