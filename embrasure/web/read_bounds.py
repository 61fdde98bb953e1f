"""What one read may cost (docs/operations.md#reads-under-load): in time, and for the
heavy ones — walks over the graph and the export — in how many run at once.

A handful of people opening a big graph at once must not stop every producer. So a read
is bounded three ways:

- **Time.** Every query of a read's snapshot runs within ``--read-timeout-seconds`` of
  its start: past it the database stops the query (store.reader's ``timeout``) and the
  answer is a 503 ``read-too-long`` problem saying to ask for less. The export streams
  the whole graph, however long that takes, and is not bounded in time but in number
  (one at a time: query/export.py).
- **Number.** At most ``--heavy-reads`` heavy reads run at once (in this process, or,
  behind ``serve``'s receiver, on the whole server: web/forward.py counts them before
  forwarding); the next ones wait their turn, a bounded time behind a bounded queue,
  and past that are refused, 429 with ``Retry-After``.
- **Size.** Walks are capped already by their own bounds (depth, the node limit:
  web/params.py), and the export streams in pieces.

A route marks its endpoint ``heavy``; ``requires`` (web/auth.py) hands the app's bounds
to the read it runs (``CURRENT``), so no route passes them along.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import functools
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from embrasure.errors import Problem

Endpoint = Callable[[Request], Awaitable[Response]]
E = TypeVar("E", bound=Endpoint)

RETRY_AFTER_S = 1
POLL_S = 0.02  # how often a waiting heavy read looks for its place


@dataclasses.dataclass
class ReadBounds:
    """One app's bounds (settings: read_timeout_seconds, heavy_reads)."""

    timeout: float | None  # seconds; None: unbounded
    heavy: int  # heavy reads running at once; 0: unbounded
    # A heavy read that finds every place taken waits for one, first come first served,
    # at most ``wait`` seconds and behind at most ``queue`` others: a page of the web UI
    # asks for a dozen walks at once. Past either, it is refused.
    queue: int = 64
    wait: float = 10.0
    _running: int = 0
    _waiting: collections.deque[int] = dataclasses.field(default_factory=collections.deque)
    _tickets: itertools.count[int] = dataclasses.field(default_factory=itertools.count)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @contextlib.asynccontextmanager
    async def heavy_slot(self) -> AsyncIterator[None]:
        """A heavy read's place among the ``heavy`` that may run at once, or a 429."""
        if not await self.take():
            raise too_many(self.heavy)
        try:
            yield
        finally:
            self.give_back()

    async def take(self) -> bool:
        """Take a heavy read's place, waiting for one (the class docstring); False when
        none came. Polled, not awaited on a future: the bounds outlive any one event
        loop (a test client's), and a place's wait is a read's length anyway."""
        if self._take(None):
            return True
        with self._lock:
            if len(self._waiting) >= self.queue:
                return False
            ticket = next(self._tickets)
            self._waiting.append(ticket)
        deadline = time.monotonic() + self.wait
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                if self._take(ticket):
                    return True
            return False
        finally:
            with self._lock:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)

    def _take(self, ticket: int | None) -> bool:
        """A place, if one is free and no one waits before ``ticket`` (None: a newcomer,
        behind everyone waiting)."""
        with self._lock:
            if self.heavy and self._running >= self.heavy:
                return False
            first = self._waiting[0] if self._waiting else None
            if first is not None and first != ticket:
                return False
            if ticket is not None:
                self._waiting.popleft()
            self._running += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._running -= 1


def too_many(limit: int) -> Problem:
    return Problem(
        429,
        "too-many-heavy-reads",
        "Too many heavy reads at once",
        f"{limit} walks of the graph or exports are running already (--heavy-reads), and"
        " more wait for their turn: retry shortly.",
        limit=limit,
        retry_after=RETRY_AFTER_S,
    )


# The bounds of the read a request runs (set by web/auth.py ``requires``).
CURRENT: contextvars.ContextVar[ReadBounds | None] = contextvars.ContextVar(
    "read_bounds", default=None
)


def timeout() -> float | None:
    """The current read's time bound."""
    bounds = CURRENT.get()
    return None if bounds is None else bounds.timeout


def heavy(endpoint: E) -> E:
    """Mark a read as heavy (a walk, the export): at most ``heavy_reads`` at once."""

    @functools.wraps(endpoint)
    async def bounded(request: Request) -> Response:
        bounds: ReadBounds | None = getattr(request.app.state, "read_bounds", None)
        if bounds is None:
            return await endpoint(request)
        async with bounds.heavy_slot():
            return await endpoint(request)

    bounded.heavy = True  # type: ignore[attr-defined]
    return bounded  # type: ignore[return-value]
