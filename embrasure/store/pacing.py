"""How a background writer (a retention pass: its run trims, body trims and vacuum steps)
shares SQLite's one write lock with the receiver (docs/operations.md#retention-and-the-archive).

SQLite queues no one for its write lock: a connection that finds it taken sleeps in its
busy handler (1, 2, 5, 10, 15, 20, 25 … then 100 ms at a time) and tries again. A pass
that commits one step and begins the next at once takes the lock back before the
receiver's group commit wakes up, and the receiver waits out the whole pass (measured:
appends waiting 4 s behind 2,600 back-to-back vacuum steps). So after each write
transaction a pass sleeps at least as long as it held the lock (so it never holds it
more than half the time) and at least ``PAUSE_S``: longer than the busy handler's sleeps
while a wait is still short, so the waiting group commit gets in. On PostgreSQL there is
no such lock, but the pause costs a pass little and keeps its share of the disk modest.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("embrasure.retention")

PAUSE_S = 0.03  # above the busy handler's sleeps (≤ 25 ms) for a wait under ~130 ms
MAX_PAUSE_S = 1.0  # a step that held the lock long (a slow disk) is followed by this at most


def pause_after(held_s: float, step: str) -> None:
    """Sleep after a write transaction (a ``step`` of a pass: what it did, for the debug
    log) that held the lock for ``held_s`` seconds."""
    log.debug(
        "retention step %s held the write lock %.1f ms",
        step,
        held_s * 1000,
        extra={"step": step, "held_ms": round(held_s * 1000, 1)},
    )
    time.sleep(min(MAX_PAUSE_S, max(PAUSE_S, held_s)))
