"""Group commit: many concurrent deliveries share one transaction and one fsync.

Request handlers hand their draft to ``GroupCommitter.append`` and wait. One thread takes
everything queued, appends it in a single ``Store.append`` transaction, and settles every
waiting handler after the commit returns (docs/architecture.md#storage). While it commits,
new drafts queue up and form the next group, so the group size follows the load with no
timer: one delivery alone is committed at once, a thousand concurrent ones share a few
fsyncs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Sequence

from embrasure.errors import EmbrasureError, StoreUnavailable
from embrasure.model import DeliveryDraft, Receipt
from embrasure.store.base import AppendResult, Store

log = logging.getLogger("embrasure.log")

# A handler's future (asyncio, settled on its loop) or a consumer thread's (receiver/kafka.py).
_Future = asyncio.Future[Receipt] | concurrent.futures.Future[Receipt]
_Pending = tuple[DeliveryDraft, _Future]
_STOP = object()


def _settle(waiters: Sequence[_Pending], results: Sequence[AppendResult | Exception]) -> None:
    for (_, future), result in zip(waiters, results, strict=True):
        if future.done():  # the handler went away (client disconnected, shutdown)
            continue
        if isinstance(result, Receipt):
            future.set_result(result)
        else:
            future.set_exception(result)


class GroupCommitter:
    def __init__(self, store: Store, max_group: int, max_group_bytes: int) -> None:
        self.store = store
        self.max_group = max_group
        self.max_group_bytes = max_group_bytes
        self._queue: queue.SimpleQueue[_Pending | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = True  # until started
        self.groups_committed = 0

    def start(self) -> None:
        """Start the commit thread (again after a stop: an app's lifespan may run more
        than once, as in-process test clients run it)."""
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="embrasure-group-commit")
        self._thread.start()

    async def append(self, draft: DeliveryDraft) -> Receipt:
        """Return the receipt once the delivery is durable (or a duplicate was found)."""
        if self._closed:
            raise StoreUnavailable("the server is shutting down")
        future: asyncio.Future[Receipt] = asyncio.get_running_loop().create_future()
        self._queue.put((draft, future))
        return await future

    def submit(self, drafts: Sequence[DeliveryDraft]) -> list[concurrent.futures.Future[Receipt]]:
        """From a thread of its own (a Kafka consumer): queue ``drafts`` into the groups
        the HTTP handlers' deliveries join; each future is settled once its delivery is
        durable (or the commit failed: StoreUnavailable)."""
        if self._closed:
            raise StoreUnavailable("the server is shutting down")
        futures: list[concurrent.futures.Future[Receipt]] = []
        for draft in drafts:
            future: concurrent.futures.Future[Receipt] = concurrent.futures.Future()
            self._queue.put((draft, future))
            futures.append(future)
        return futures

    def stop(self) -> None:
        """Commit what is queued, then end the thread."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            group: list[_Pending] = [first]  # type: ignore[list-item]
            size = len(group[0][0].body)
            while len(group) < self.max_group and size < self.max_group_bytes:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                group.append(item)  # type: ignore[arg-type]
                size += len(group[-1][0].body)
            self._commit(group)

    def _commit(self, group: list[_Pending]) -> None:
        results: Sequence[AppendResult | Exception]
        try:
            results = self.store.append([draft for draft, _ in group])
            self.groups_committed += 1
        except EmbrasureError as exc:
            # Nothing of the group is stored, so no delivery id exists yet: name the
            # producers and keys the failed requests came with.
            log.error(
                "group commit of %d deliveries failed: %s",
                len(group),
                exc,
                extra={"providers": sorted({d.provider_key for d, _ in group})},
            )
            results = [exc] * len(group)
        except Exception as exc:  # a bug must not leave handlers waiting forever
            log.exception("group commit crashed")
            results = [StoreUnavailable(f"internal error: {exc!r}")] * len(group)
        by_loop: dict[asyncio.AbstractEventLoop, list[int]] = {}
        for i, (_, future) in enumerate(group):
            if isinstance(future, concurrent.futures.Future):  # thread-safe: settle it here
                _settle([group[i]], [results[i]])
            else:
                by_loop.setdefault(future.get_loop(), []).append(i)
        for loop, indexes in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(
                    _settle, [group[i] for i in indexes], [results[i] for i in indexes]
                )
