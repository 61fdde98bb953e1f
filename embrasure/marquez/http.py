"""The app on the Marquez port (``serve --marquez-port``, docs/marquez.md#mounting).

Marquez's routes name entities by path segments (``/namespaces/{namespace}/datasets/
{dataset}``), and its clients percent-encode them: marquez-python with ``quote(…,
safe='')``, marquez-web with ``encodeURIComponent``, so ``s3://bucket`` arrives as
``s3%3A%2F%2Fbucket``. ASGI servers hand the app the path already decoded, where that
``%2F`` is a ``/`` like any other; so these routes match the raw path and decode each
parameter on its own (``RawPathRoute``).

Several of Marquez's paths are also Embrasure's own with other meanings
(``GET /api/v1/lineage``, ``/api/v1/namespaces``, ``/api/v1/jobs``, ``/api/v1/search``),
so the two APIs cannot share a port without guessing from parameters; Marquez's gets a
port of its own in the same process (``PortDispatch``), sharing the store, the group
commit, the tokens and the lifespan of the main app.

Errors are Marquez's (Dropwizard's ``ErrorMessage``): ``{"code": 404, "message": …}``,
which marquez-web reads as ``code`` and ``message`` (its requests/index.ts), plus
``details`` where Embrasure has more to say.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from embrasure.errors import LogUnavailable, Problem, StoreUnavailable

log = logging.getLogger("embrasure")


class MarquezError(Exception):
    """An error a Marquez route answers with Marquez's body (``code``, ``message``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(message: str) -> MarquezError:
    return MarquezError(404, message)


def bad_request(message: str) -> MarquezError:
    return MarquezError(400, message)


def error_response(
    status: int, message: str, details: str | None = None, headers: Mapping[str, str] = {}
) -> Response:
    body: dict[str, Any] = {"code": status, "message": message}
    if details:
        body["details"] = details
    return Response(orjson.dumps(body), status, dict(headers), media_type="application/json")


class RawPathRoute(Route):
    """A route matched against the raw path, each path parameter percent-decoded on its
    own, so that an encoded ``/`` stays inside its segment (the module's docstring)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or raw is None:
            return super().matches(scope)
        path = raw.decode("latin-1").split("?", 1)[0]
        match, child = super().matches({**scope, "path": path, "root_path": ""})
        if match != Match.NONE:
            child["path_params"] = {
                k: unquote(v) if isinstance(v, str) else v for k, v in child["path_params"].items()
            }
        return match, child


Endpoint = Callable[[Request], Awaitable[Response]]


def route(path: str, endpoint: Endpoint, method: str = "GET", api: str = "v1") -> RawPathRoute:
    """One of Marquez's routes, under /api/v1 (or /api/{api}: its v2beta search)."""
    return RawPathRoute(f"/api/{api}{path}", endpoint, methods=[method])


class _Errors:
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after

    async def marquez(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, MarquezError)
        return error_response(exc.status, exc.message)

    async def problem(self, request: Request, exc: Exception) -> Response:
        """Embrasure's own refusals (a bound, a token, overload) in Marquez's body."""
        assert isinstance(exc, Problem)
        headers = dict(exc.headers)
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        return error_response(exc.status, exc.detail, exc.title, headers)

    async def unavailable(self, request: Request, exc: Exception) -> Response:
        what = "delivery log" if isinstance(exc, LogUnavailable) else "store"
        return error_response(
            503, f"The {what} is unavailable: {exc}", headers={"Retry-After": str(self.retry_after)}
        )

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        # Dropwizard's words for an unknown path or method.
        words = {404: "HTTP 404 Not Found", 405: "HTTP 405 Method Not Allowed"}
        status = exc.status_code
        return error_response(status, words.get(status, str(exc.detail)))

    async def internal(self, request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "The server failed on this request; it has been logged.")


def build_marquez_app(main: Starlette, routes: list[BaseRoute], retry_after: int) -> Starlette:
    """The Marquez port's app: ``routes``, and the main app's store, group commit and
    token guard (its lifespan runs them; this app has none of its own)."""
    errors = _Errors(retry_after)
    app = Starlette(
        routes=routes,
        exception_handlers={
            MarquezError: errors.marquez,
            Problem: errors.problem,
            StoreUnavailable: errors.unavailable,
            HTTPException: errors.http_error,
            Exception: errors.internal,
        },
    )
    for name in ("store", "committer", "kafka", "guard", "read_bounds"):
        setattr(app.state, name, getattr(main.state, name))
    # Marquez ignores query parameters a route does not take, and its clients send some
    # (marquez-web's ``lastRunStates`` beside ``limit``): not refused here
    # (web/params.refuse_unknown).
    app.state.foreign_api = True
    return app


class PortDispatch:
    """One process, two ports: a connection to ``port`` is served by ``other``, every
    other one (and the lifespan) by ``main``. The port is the socket's own, as the
    server puts it in the scope (``scope["server"]``); a Unix socket's is its path (a
    read process's: web/forward.py)."""

    def __init__(self, main: ASGIApp, port: int | str, other: ASGIApp) -> None:
        self.main = main
        self.port = port
        self.other = other

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] != "lifespan" and server is not None and self.port in server:
            await self.other(scope, receive, send)
        else:
            await self.main(scope, receive, send)
