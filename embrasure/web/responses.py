"""JSON and RFC 9457 problem+json responses, serialised with orjson, and the exception
handlers that turn every error a route raises into its problem document.

Routes raise (``Problem``, ``StoreUnavailable``, ``LogUnavailable``, ``ReplayError``,
``ArchiveError``);
``ErrorHandlers`` renders each kind in one place, registered by app.build_app as the
app's ``exception_handlers`` (Starlette's ExceptionMiddleware calls them for a route's
exceptions, its ServerErrorMiddleware the one for ``Exception``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from embrasure.errors import (
    ArchiveError,
    ArchiveUnavailable,
    LogUnavailable,
    NoSuchDelivery,
    NoSuchItem,
    NotQuarantined,
    NotReplayable,
    Problem,
    ReadTooLong,
    ReplayError,
    StoreUnavailable,
)
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.web import read_bounds

PROBLEM_MEDIA_TYPE = "application/problem+json"
T = TypeVar("T")

log = logging.getLogger("embrasure")

# Each refusal of a replay as HTTP tells it: (status, problem type slug, title).
REPLAY_PROBLEMS: dict[type[ReplayError], tuple[int, str, str]] = {
    NoSuchDelivery: (404, "not-found", "No such delivery"),
    NoSuchItem: (404, "not-found", "No such item"),
    NotReplayable: (409, "not-replayable", "Item cannot be replayed"),
    NotQuarantined: (409, "not-quarantined", "Item is not quarantined"),
}


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


def problem_response(problem: Problem) -> Response:
    headers = dict(problem.headers)
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    return Response(
        orjson.dumps(problem.body()),
        problem.status,
        headers=headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


def store_unavailable(exc: Exception, retry_after: int) -> Problem:
    """503: the store is down, or locked past its timeout; the request may succeed later."""
    return Problem(503, "store-unavailable", "Store unavailable", str(exc), retry_after=retry_after)


def read_too_long(exc: ReadTooLong) -> Problem:
    """503: a read passed its time bound (web/read_bounds.py); asking again for the same
    will not help, so no Retry-After."""
    return Problem(503, "read-too-long", "Read took too long", str(exc))


def log_unavailable(exc: LogUnavailable, retry_after: int) -> Problem:
    """503: the delivery log could not commit; nothing was stored (docs/receiver.md#durability)."""
    return Problem(
        503, "log-unavailable", "Delivery log unavailable", str(exc), retry_after=retry_after
    )


def replay_refused(exc: ReplayError) -> Problem:
    """The 404 or 409 of a replay the projector refused."""
    for kind in type(exc).__mro__:
        if kind in REPLAY_PROBLEMS:
            status, slug, title = REPLAY_PROBLEMS[kind]
            return Problem(status, slug, title, str(exc))
    raise TypeError(f"no problem document for {type(exc).__name__}") from exc


def archive_failed(exc: ArchiveError, retry_after: int) -> Problem:
    """A body retention moved to the archive could not be read
    (docs/operations.md#retention-and-the-archive): 503 while the archive is unreachable
    (or none is configured), 500 when it lacks the body or a segment is damaged."""
    if isinstance(exc, ArchiveUnavailable):
        return Problem(
            503, "archive-unavailable", "Archive unavailable", str(exc), retry_after=retry_after
        )
    return Problem(500, "archive-corrupt", "Archive damaged", str(exc))


class ErrorHandlers:
    """Starlette exception handlers, one per kind of error; ``retry_after`` is the
    server's --retry-after, sent on every 503 a store or log failure causes."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after

    async def problem(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Problem)
        return problem_response(exc)

    async def read_too_long(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ReadTooLong)
        return problem_response(read_too_long(exc))

    async def store_unavailable(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StoreUnavailable)
        return problem_response(store_unavailable(exc, self.retry_after))

    async def log_unavailable(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LogUnavailable)
        return problem_response(log_unavailable(exc, self.retry_after))

    async def replay_refused(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ReplayError)
        return problem_response(replay_refused(exc))

    async def archive_failed(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ArchiveError)
        return problem_response(archive_failed(exc, self.retry_after))

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Starlette's own errors: no route for the path (404), none for the method (405)."""
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

    async def internal_error(self, request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(
            Problem(
                500,
                "internal-error",
                "Internal server error",
                "The server failed on this request; it has been logged.",
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


def graph_rebuilding() -> Problem:
    """503 while the projector rebuilds a graph an older Embrasure built: this code's
    reads do not fit the old tables (docs/operations.md#upgrading)."""
    return Problem(
        503,
        "graph-rebuilding",
        "Graph being rebuilt",
        "the graph was built by an older Embrasure and is being rebuilt from the log;"
        " reads answer once it is done, and ingest goes on meanwhile",
        retry_after=30,
    )


async def read(store: Store, work: Callable[[GraphReader], T]) -> T:
    """``work`` over one store snapshot, run in the thread pool: the stores' drivers block.
    Its queries are bounded in time by the request's read bounds (web/read_bounds.py)."""
    timeout = read_bounds.timeout()

    def run() -> T:
        # A store that cannot be read is a 503 from here; a read past its bound too.
        with store.reader(timeout) as reader:
            if not store.serves_current_graph():
                raise graph_rebuilding()
            return work(reader)

    return await run_in_threadpool(run)


async def answer(store: Store, work: Callable[[GraphReader], Any]) -> Response:
    """A read route's answer: ``work``'s result (``read``) as JSON, or the Response it
    returns."""
    result = await read(store, work)
    return result if isinstance(result, Response) else json_response(result)
