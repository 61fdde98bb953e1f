"""Overload (docs/receiver.md): past the bound on projection backlog or on free disk
(``Backpressure``), or when the bodies held in memory would pass their bound
(``BodyBudget``, after a short wait), ingest is answered 429 with Retry-After and
nothing is stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from embrasure.errors import Problem
from embrasure.receiver.refresh import Refreshed
from embrasure.store import Store

# How long a body waits for room under BodyBudget before it is refused.
BODY_WAIT_SECONDS = 2.0
# How long Backpressure trusts what it measured (a COUNT over the unprojected log).
LOAD_CACHE_SECONDS = 1.0


def _overloaded(detail: str, retry_after: int, **extra: Any) -> Problem:
    return Problem(
        429,
        "overloaded",
        "Overloaded: retry later",
        f"{detail} Nothing was stored; retry after the delay.",
        retry_after=retry_after,
        **extra,
    )


class BodyBudget:
    """A bound on the request bodies held in memory at once: a body reserves its
    Content-Length (a chunked one, the body cap) from arrival until its receipt is sent.

    The event loop is one thread, so a body that fits while nobody waits takes its room
    with no lock and no timer (each asyncio primitive costs a request time on the hot
    path: docs/receiver.md#speed); only a body that must wait queues on the condition,
    for at most BODY_WAIT_SECONDS, and waiters go first, so a large body is not starved
    by small ones."""

    def __init__(self, limit_bytes: int, retry_after: int) -> None:
        self.limit = limit_bytes
        self.held = 0
        self.retry_after = retry_after
        self._waiting = 0
        self._room = asyncio.Condition()

    def hold(self, size: int) -> _Held:
        return _Held(self, min(size, self.limit))  # one body alone is always let through

    async def _take(self, size: int) -> None:
        if self._waiting or self.held + size > self.limit:
            await self._wait(size)
        self.held += size

    async def _wait(self, size: int) -> None:
        self._waiting += 1
        try:
            async with self._room:
                fits = lambda: self.held + size <= self.limit  # noqa: E731
                await asyncio.wait_for(self._room.wait_for(fits), BODY_WAIT_SECONDS)
        except TimeoutError:
            raise _overloaded(
                f"The server holds {self.held:,} bytes of request bodies, its bound is "
                f"{self.limit:,} and this one needs {size:,} more.",
                self.retry_after,
                limit=self.limit,
                actual=self.held + size,
            ) from None
        finally:
            self._waiting -= 1

    async def _give_back(self, size: int) -> None:
        self.held -= size
        if self._waiting:
            async with self._room:
                self._room.notify_all()


class _Held:
    """``async with budget.hold(size)``: the room, taken on entry and given back on exit."""

    __slots__ = ("budget", "size")

    def __init__(self, budget: BodyBudget, size: int) -> None:
        self.budget = budget
        self.size = size

    async def __aenter__(self) -> None:
        await self.budget._take(self.size)

    async def __aexit__(self, *exc: object) -> None:
        await self.budget._give_back(self.size)


@dataclasses.dataclass(frozen=True)
class Load:
    """What Backpressure measured: the projection backlog and the log's free disk."""

    backlog_deliveries: int
    backlog_items: int
    oldest_pending: str | None  # received_at of the oldest delivery not yet projected
    free_disk_bytes: int | None  # None: not on this machine (PostgreSQL)
    refusing: str | None  # why ingest is refused, or None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Backpressure:
    """Overload (docs/receiver.md#overload-429-nothing-stored): past ``max_backlog_items``
    items not yet projected, or under ``min_free_disk_bytes`` free beside the log, ingest is
    refused (429) until the projector catches up or space is freed. Measured at most once
    per LOAD_CACHE_SECONDS, off the event loop, one measurement at a time
    (receiver/refresh.py)."""

    def __init__(
        self, store: Store, max_backlog_items: int, min_free_disk_bytes: int, retry_after: int
    ) -> None:
        self.store = store
        self.max_backlog_items = max_backlog_items
        self.min_free_disk_bytes = min_free_disk_bytes
        self.retry_after = retry_after
        self._load = Refreshed(self._measure, lambda: LOAD_CACHE_SECONDS)

    async def load(self) -> Load:
        return await self._load.get()

    def _measure(self) -> Load:
        with self.store.reader() as reader:
            deliveries, items, oldest, _rejected = reader.backlog()
        free = self.store.free_disk_bytes()
        refusing = None
        if items > self.max_backlog_items:
            refusing = (
                f"The projection backlog is {items:,} items, over the bound of "
                f"{self.max_backlog_items:,}: the projector is behind."
            )
        elif free is not None and free < self.min_free_disk_bytes:
            refusing = (
                f"Only {free:,} bytes are free beside the delivery log, under the bound of "
                f"{self.min_free_disk_bytes:,}."
            )
        return Load(deliveries, items, oldest, free, refusing)

    def refusing_now(self) -> str | None:
        """Why ingest is refused now, or None, measured afresh (for a thread: the Kafka
        consumer pauses its partitions while it is refused)."""
        return self._measure().refusing

    async def check(self) -> None:
        load = await self.load()
        if load.refusing is not None:
            raise _overloaded(load.refusing, self.retry_after)
