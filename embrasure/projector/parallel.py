"""A rebuild's validation and folding in worker processes
(docs/architecture.md#reprojection-a-new-generation-then-a-swap).

Most of a projection's CPU is ``apply.prepare`` — parsing, validating and folding the
events, pure Python holding the GIL — and the rest ``apply.commit``'s SQL. A reprojection
reads the whole log, so it can prepare the next batches in other processes while this one
commits the current one: a pipeline. Batches are read and committed in log order, with the
same batch limits as the projector loop, so the graph (and every delivery's outcome) is
exactly the sequential one's; only the waiting overlaps.

Worker processes are spawned, not forked: ``serve`` may rebuild at start-up with threads
running, and a forked child would inherit their locks. What goes to a worker is a batch of
log entries (bodies included); what comes back is its ``Prepared`` batch.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import multiprocessing
import os
from collections.abc import Callable

from embrasure.projector.apply import Prepared, commit, prepare
from embrasure.store.base import LogEntry, Store

log = logging.getLogger("embrasure.projector")

AHEAD = 2  # batches read ahead per worker: enough to keep each busy while one commits


def auto_processes() -> int:
    """One worker per CPU but the one that commits."""
    return max(1, (os.cpu_count() or 2) - 1)


def build(
    store: Store,
    generation: int,
    read: Callable[[Callable[[int, int, int, int], list[LogEntry]], int], list[LogEntry]],
    processes: int,
) -> None:
    """Project the log into ``generation`` up to its end, preparing batches in
    ``processes`` worker processes. A batch a worker fails on stops the pipeline where
    it is: the caller's sequential projector goes on from the committed position, and
    retries that batch one delivery at a time as it always does."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
        pending: collections.deque[concurrent.futures.Future[Prepared]] = collections.deque()
        read_through = store.position(generation)
        ended = False
        while True:
            while not ended and len(pending) < processes * AHEAD:
                entries = read(store.read_log, read_through)
                if not entries:
                    ended = True
                    break
                read_through = entries[-1].seq
                pending.append(pool.submit(prepare, entries))
            if not pending:
                return
            try:
                prepared = pending.popleft().result()
            except Exception:
                log.exception("a rebuild worker failed; going on in this process")
                for future in pending:
                    future.cancel()
                return
            with store.projection(generation) as tx:
                commit(tx, prepared)
