"""``serve``'s receiver hands reads to the read processes (docs/operations.md#reads-under-load).

A read — a walk over a big graph, an export, a page of marquez-web — runs Python for
hundreds of milliseconds. In the receiver's process it held the GIL its event loop
needs for every ingest request: 16 clients walking the graph brought single-event ingest
from ~1,600 requests/s to ~120 (bench/README.md, "Reads under load"). So under ``serve`` the
receiver answers ingest, health and metrics itself, and forwards every read (a GET of
a route that needs the ``read`` scope: the read API, the deliveries' views, Marquez's
API) over a Unix socket to the read processes, which run the same app at a lower CPU
priority (``--read-nice``): the kernel gives the receiver and the projector the CPU
first. The receiver only copies bytes.

Before forwarding a heavy read (web/read_bounds.py) the receiver takes its place among
``--heavy-reads`` for the whole server (waiting its turn, or refused with a 429): a
heavy read that waits or is refused costs the read processes nothing. The read
processes authenticate the request themselves (the same guard, the same database) and
bound it in time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from embrasure.errors import Problem
from embrasure.web.read_bounds import ReadBounds, too_many
from embrasure.web.responses import problem_response

# RFC 9110 §7.6.1: headers about one connection, never passed on by an intermediary.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
CONNECT_TIMEOUT_S = 5.0
# Past the read's own bound (the read process answers 503 read-too-long by then), how
# long the receiver waits for the answer to start, or between two of its pieces.
GRACE_S = 15.0


class Forwarder:
    """Forwards requests to the read processes listening on ``socket_path``."""

    def __init__(self, socket_path: str, read_timeout: float | None) -> None:
        wait = None if read_timeout is None else read_timeout + GRACE_S
        self.client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=socket_path),
            timeout=httpx.Timeout(wait, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=32),
        )

    async def forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request, answered by a read process."""
        query = scope.get("query_string", b"")
        raw_path = scope.get("raw_path") or scope["path"].encode()
        url = httpx.URL("http://reads").copy_with(
            raw_path=raw_path + (b"?" + query if query else b"")
        )
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        request = self.client.build_request(
            scope["method"], url, headers=headers, content=_body(receive)
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            problem = Problem(
                503,
                "reads-unavailable",
                "Reads unavailable",
                f"No read process answered ({type(exc).__name__}): retry shortly.",
                retry_after=1,
            )
            await problem_response(problem)(scope, receive, send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP
                    ],
                }
            )
            async for piece in response.aiter_raw():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self.client.aclose()


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    """The request's body as it arrives (a read has none, mostly)."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return
        body = message.get("body", b"")
        if body:
            yield body
        if not message.get("more_body", False):
            return


def forward_reads(routes: list[BaseRoute], forwarder: Forwarder, bounds: ReadBounds) -> int:
    """Make each read route of ``routes`` (a GET that needs the ``read`` scope) forward
    to the read processes, a heavy one within ``bounds``; return how many."""
    count = 0
    for route in routes:
        if not isinstance(route, Route) or not _is_read(route):
            continue
        heavy = getattr(route.endpoint, "heavy", False)
        route.app = _Forwarded(forwarder, bounds if heavy else None)
        count += 1
    return count


def _is_read(route: Route) -> bool:
    scopes = getattr(route.endpoint, "required_scopes", ())
    return "read" in scopes and set(route.methods or ()) <= {"GET", "HEAD"}


class _Forwarded:
    def __init__(self, forwarder: Forwarder, bounds: ReadBounds | None) -> None:
        self.forwarder = forwarder
        self.bounds = bounds  # a heavy read's

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        bounds = self.bounds
        if bounds is None:
            await self.forwarder.forward(scope, receive, send)
            return
        if not await bounds.take():
            await problem_response(too_many(bounds.heavy))(scope, receive, send)
            return
        try:
            await self.forwarder.forward(scope, receive, send)
        finally:
            bounds.give_back()
