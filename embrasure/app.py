"""build_app: the routes, the error handlers and the lifespan that runs group commit."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from embrasure import ui
from embrasure.errors import Problem
from embrasure.projector.worker import Projector
from embrasure.receiver.backpressure import Backpressure, BodyBudget
from embrasure.receiver.bounds import Limits, MiB
from embrasure.receiver.routes import Receiver
from embrasure.settings import Settings
from embrasure.store import Store
from embrasure.store.group_commit import GroupCommitter
from embrasure.web.admin import AdminApi
from embrasure.web.api import ReadApi
from embrasure.web.auth import Guard
from embrasure.web.metrics import Metrics
from embrasure.web.openapi import document as openapi
from embrasure.web.responses import problem_response

log = logging.getLogger("embrasure")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return problem_response(
        Problem(
            exc.status_code,
            f"http-{exc.status_code}",
            str(exc.detail),
            f"{request.method} {request.url.path}: {exc.detail}",
            headers=_allow(request) if exc.status_code == 405 else dict(exc.headers or {}),
        )
    )


def _allow(request: Request) -> dict[str, str]:
    """RFC 9110 §15.5.6: a 405 lists the methods the resource supports, from every route
    on its path (GET and POST /api/v1/lineage are two routes: Starlette names one)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods or set()
    return {"Allow": ", ".join(sorted(methods))}


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        Problem(
            500,
            "internal-error",
            "Internal server error",
            "The server failed on this request; it has been logged.",
        )
    )


def build_app(
    settings: Settings,
    store: Store,
    limits: Limits | None = None,
    projector: Projector | None = None,
    *,
    enforce_auth: bool = True,
) -> Starlette:
    """The ASGI app. With ``projector``, the lifespan also runs it in a thread. Without
    ``enforce_auth`` (a --db client command's in-process app) no token is asked for."""
    committer = GroupCommitter(store, settings.group_commit_max, settings.group_commit_max_bytes)
    backpressure = Backpressure(
        store, settings.max_backlog_items, settings.min_free_disk_mb * MiB, settings.retry_after
    )
    budget = BodyBudget(settings.max_body_memory_mb * MiB, settings.retry_after)
    receiver = Receiver(
        committer,
        limits or Limits(),
        settings.retry_after,
        backpressure,
        budget,
        settings.body_timeout_seconds,
    )
    read_api = ReadApi(store, settings.retry_after, backpressure)
    admin_api = AdminApi(store, committer, settings.retry_after, settings.body_timeout_seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        committer.start()
        if projector is not None:
            projector.start()
        try:
            yield
        finally:
            # Uvicorn has answered or dropped every request by now; commit what is queued.
            committer.stop()
            if projector is not None:
                projector.stop()

    metrics = Metrics(store, backpressure)
    routes: list[BaseRoute] = [
        *receiver.routes(),
        *read_api.routes(),
        *admin_api.routes(),
        *metrics.routes(),
        *ui.routes(),
    ]
    app = Starlette(
        routes=[*routes, *openapi.routes(limits, routes)],
        middleware=[metrics.middleware()],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    app.state.store = store
    app.state.committer = committer
    app.state.guard = Guard(store, enforce=enforce_auth)
    return app
