"""Marquez's raw events (``GET /api/v1/events/lineage``, its
OpenLineageResource.getLineageEvents; docs/marquez.md#events): the events as producers
sent them, read back from Embrasure's log, filtered on eventTime (``after`` ≤ eventTime
< ``before``), newest first unless ``sortDirection=asc``, ``limit``/``offset`` pages and
``totalCount``.

Marquez defaults ``before`` to 2030-01-01 and ``after`` to 1970-01-01; here either end is
open when not given, so an event dated after 2029 is listed too. An event without an
eventTime (Embrasure keeps it, docs/projection.md#validation) is in no time range, as in
Marquez, which refuses it. JobEvents and DatasetEvents are counted in ``totalCount`` but
not listed, as Marquez does (marquez-web reads each listed event's ``run``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.marquez.http import bad_request, route
from embrasure.marquez.model import paging
from embrasure.query import raw_events
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.web.auth import requires
from embrasure.web.params import time_param
from embrasure.web.responses import answer

FIRST_KEY = "0001"  # sorts after '' (an unknown eventTime) and before every known one


class EventRoutes:
    def __init__(self, store: Store, archived: ArchivedBodies) -> None:
        self.store = store
        self.archived = archived

    async def lineage_events(self, request: Request) -> Response:
        direction = (request.query_params.get("sortDirection") or "desc").lower()
        if direction not in ("asc", "desc"):
            raise bad_request("query param sortDirection must be asc or desc")
        after = time_param(request, "after") or FIRST_KEY
        before = time_param(request, "before")

        def work(reader: GraphReader) -> Any:
            limit, offset = paging(request)
            places = reader.events(after, before, None, limit, direction == "desc", offset)
            documents = raw_events.documents(reader, self.archived, places)
            return {
                # Marquez lists RunEvents only (its LineageEvent), and counts them all:
                # marquez-web reads every listed event's run.runId, and a JobEvent's
                # absence left its events page blank.
                "events": [d for d in documents if isinstance(d, dict) and "run" in d],
                "totalCount": reader.count_events(after, before),
            }

        return await answer(self.store, work)


def routes(store: Store, archived: ArchivedBodies) -> list[BaseRoute]:
    api = EventRoutes(store, archived)
    return [route("/events/lineage", requires("read", everywhere=True)(api.lineage_events))]
