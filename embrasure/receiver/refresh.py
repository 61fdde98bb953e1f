"""A value read off the event loop, at most once per interval, one read at a time.

Every request consults the tokens table (auth.Guard) and the projection backlog
(receiver/backpressure.py). Read per request, that is a query on the hot ingest path; read
by each request that finds the cached value stale, 64 concurrent clients start 64 reads
at once, on up to 40 threadpool threads with a database connection each (measured: 23%
fewer single-event receipts per second, and p99 tripled). So: one read in flight; every
caller that needs a fresh value awaits that same read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")


class Refreshed(Generic[T]):
    def __init__(self, read: Callable[[], T], seconds: Callable[[], float]) -> None:
        self._read = read
        self._seconds = seconds  # a callable, so tests can change the interval
        self._value: T | None = None
        self._read_at = 0.0
        self._pending: asyncio.Future[T] | None = None

    async def get(self) -> T:
        if self._value is not None and time.monotonic() - self._read_at < self._seconds():
            return self._value
        pending = self._pending
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = self._pending = asyncio.ensure_future(self._refresh())
        # shield: one caller cancelled (its client left) must not cancel the others' read.
        return await asyncio.shield(pending)

    async def _refresh(self) -> T:
        try:
            value = await run_in_threadpool(self._read)
            self._value, self._read_at = value, time.monotonic()
            return value
        finally:
            self._pending = None
