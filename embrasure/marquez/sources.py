"""Marquez's sources (``GET /api/v1/sources``, ``/api/v1/sources/{source}``, its
SourceResource; docs/marquez.md#sources-and-tags).

Marquez makes a source per OpenLineage dataset namespace (named by the ``datasource``
facet when a dataset carries one). Here every namespace that holds a dataset is a
source: ``name`` and ``connectionUrl`` the namespace, ``type`` its URI scheme in capitals
(``POSTGRES``, ``S3``; ``DEFAULT`` without one), times those of the namespace. The
``datasource`` facet's own name is served on each dataset as ``sourceName``
(datasets.py), not listed here: listing it would read every dataset's facets.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez.http import not_found, route
from embrasure.marquez.model import instant, paging
from embrasure.query.hidden import Hidden
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.web.auth import requires
from embrasure.web.responses import answer

MAX_SOURCES = 100_000


def source_jsons(reader: GraphReader) -> list[dict[str, Any]]:
    hidden = Hidden.of(reader).namespaces
    spans = {s.namespace: s for s in reader.namespace_spans()}
    out = []
    for row in reader.namespaces(None, MAX_SOURCES):
        if not row.datasets or row.namespace in hidden:
            continue
        scheme, sep, _ = row.namespace.partition("://")
        span = spans.get(row.namespace)
        out.append(
            {
                "type": scheme.upper() if sep and scheme else "DEFAULT",
                "name": row.namespace,
                "createdAt": instant(span.first_key) if span else None,
                "updatedAt": instant(span.last_key) if span else None,
                "connectionUrl": row.namespace,
                "description": None,
            }
        )
    return out


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
