"""Marquez's namespaces (its NamespaceResource; docs/marquez.md#namespaces): every
namespace a dataset or job of the graph is in, hidden ones left out.

Marquez records an owner per namespace (``anonymous`` for those OpenLineage events
create) and a description; Embrasure has neither, so every namespace answers
``ownerName: "anonymous"`` and ``description: null``. ``createdAt`` and ``updatedAt``
are the first and last eventTime of the edges naming it (GraphReader.namespace_spans).
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

# Namespaces a listing reads at most: Marquez lists with limit/offset, and the graph's
# namespaces are few (a handful per platform), so one read serves any page.
MAX_NAMESPACES = 100_000
# Marquez always has this namespace (its migrations create it), and marquez-web opens on
# it: its datasets and jobs pages ask for /namespaces/default/… before any other.
DEFAULT = "default"
# Its description there (Marquez's V1 migration), which marquez-web shows.
DEFAULT_DESCRIPTION = (
    "The default global namespace for dataset, job, and run metadata not belonging to a"
    " user-specified namespace."
)


def namespace_jsons(reader: GraphReader) -> list[dict[str, Any]]:
    """Every shown namespace as Marquez's Namespace, by name, ``default`` among them
    (empty unless producers use it)."""
    hidden = Hidden.of(reader).namespaces
    spans = {s.namespace: s for s in reader.namespace_spans()}
    names = {row.namespace for row in reader.namespaces(None, MAX_NAMESPACES)} | {DEFAULT}
    # An unused default is dated by the graph's first edge, as if made before it.
    first = min((s.first_key for s in spans.values() if s.first_key), default=None)
    out = []
    for name in sorted(names - hidden):
        span = spans.get(name)
        out.append(
            {
                "name": name,
                "createdAt": instant(span.first_key if span else first),
                "updatedAt": instant(span.last_key if span else first),
                "ownerName": "anonymous",
                "description": DEFAULT_DESCRIPTION if name == DEFAULT else None,
                "isHidden": False,
            }
        )
    return out


class NamespaceRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit, offset = paging(request)
            return {"namespaces": namespace_jsons(reader)[offset : offset + limit]}

        return await answer(self.store, work)

    async def get(self, request: Request) -> Response:
        name = request.path_params["namespace"]

        def work(reader: GraphReader) -> Any:
            for namespace in namespace_jsons(reader):
                if namespace["name"] == name:
                    return namespace
            raise not_found(f"Namespace '{name}' not found.")

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = NamespaceRoutes(store)
    read = requires("read")
    return [
        route("/namespaces", read(api.list)),
        route("/namespaces/{namespace}", read(api.get)),
    ]
