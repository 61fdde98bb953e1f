"""How a background writer (a retention pass: its run trims, body trims and vacuum steps)
shares SQLite's one write lock with the receiver (docs/operations.md#retention-and-the-archive).

SQLite queues no one for its write lock: a connection that finds it taken sleeps in its
busy handler (1, 2, 5, 10, 15, 20, 25 … then 100 ms at a time) and tries again. A pass
that commits one step and begins the next at once takes the lock back before the
receiver's group commit wakes up, and the receiver waits out the whole pass (measured:
appends waiting 4 s behind 2,600 back-to-back vacuum steps). So after each write
transaction a pass sleeps at least as long as it held the lock (so it never holds it
more than half the time) and at least ``PAUSE_S``. Within one process the writers queue
for the lock in order (store/write_turns.py), so a receipt waiting there gets the lock
as soon as the step commits; a receiver of another process (two servers on one file,
docs/operations.md) is served by the busy handler alone, whose first sleeps (1, 2, 5, 10
ms) fit in the pause. The floor sets how much of a pass's time the lock is held, which
the soak (bench/README.md) measured at both ends: 30 ms trimmed 20 runs per ~38 ms,
slower than the soak makes them (the database grew 3.96% per 10 min), and 5 ms kept up
(1.09%) but held the lock so much of a pass that receipt p99 during passes was 2.04 times
that between them (a step took ~16 ms besides the pause). At 15 ms, with a statement per
table in each run trim (store/run_retention.py), the soak at 519cf83 grew 0.14% per 10 min
and its receipt p99 during passes was 1.50 times that between them. On PostgreSQL there
is no such lock, but the pause keeps a pass's share of the disk modest.

A receipt that finds the lock taken waits out the rest of the step, so steps are also
kept short: a ``Pacer`` sizes each step (runs, pages) from how fast the last ones went,
so that it holds the lock about ``TARGET_HOLD_S`` (``Store.step_hold_s``). Fixed sizes
held it 40 ms (100 runs; the pass's thread also waits for the GIL between statements
while it holds the lock) to 95 ms in the soak (bench/README.md), and receipts waited as long.

A pass also takes a share of the process's CPU, and in a server that is the receiver's:
the GIL runs one thread's Python at a time, in turns, so a receipt's Python took about
1 / (1 - u) times as long while the pass's thread kept the GIL busy a fraction u of the
time. In seven-minute soaks (the next step's reads filling each pause) receipts during
passes took 11.6 ms at p50 against 6.8 between them, and with a switch interval of 0.2 ms
instead of 1, 11.7 against 6.6 (during the run trims alone 12.8): it is the share, not
the turns' length. So the passes of a server (and of `embrasure project`) also rest in
proportion to the CPU their thread used since its last pause (``time.thread_time``): at
most ``CPU_SHARE`` of the time (bench/README.md "The pass's share of the CPU"). A pass
of `embrasure retention`, a process of its own, shares no GIL with a receiver, and a
reproject's run trims are a small part of a rebuild: both keep to the lock's pauses.

PostgreSQL has no such lock: a run trim locks the rows it deletes, which nothing else
writes, so its steps may be long (``PostgresStore.step_hold_s``). Paced for SQLite there,
a step took ~9.8 ms whatever its size, most of it round trips, and 741 of the first 1,087
steps of the second PostgreSQL soak took one run each: tens of runs a second against the
250 the soak makes, and the database grew 38.7% per 10 min
(bench/results/storage-soak-postgres.md).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator

log = logging.getLogger("embrasure.retention")

TARGET_HOLD_S = 0.008  # under half the receipt p99 without a pass (~20 ms, the soak)
PAUSE_S = 0.015  # see above: the soak's figures at 5 and 30 ms
MAX_PAUSE_S = 1.0  # a step that held the lock long (a slow disk) is followed by this at most
CPU_SHARE = 0.15  # of one core, at most, for the thread of a server's passes (see above)
# The GIL's switch interval in a process that runs retention passes (cli/retention.py). The
# sqlite3 module lets the GIL go around every statement and every row it steps, and a
# thread that lets it go while another is busy (the projector's folds) waits out that
# thread's whole interval, 5 ms by default, to get it back: beside a busy thread a
# one-run step held the write lock 104.7 ms at p50 (about 20 such waits). Measured
# (bench/README.md "Run trims and the GIL"): one pass over 9,500 runs beside a busy
# thread took 699 s at 5 ms and 147 s at 1 ms (3.6 s with no busy thread).
SWITCH_INTERVAL_S = 0.001
# And while one of a pass's write transactions holds the lock, a tenth of that: the
# thread holding it gets the GIL back within 0.1 ms of each sqlite3 call, instead of 1
# ms, while every writer waits for it. bench/run_trims.py beside a busy thread, 1,500
# runs: 2.37 ms of lock a run at 1 ms, 0.25 at 0.2 ms, 0.18 at 0.1 ms (7.9, 1.2 and 0.9 s
# a pass). Only for the step: the rest of the time the process switches at the
# interval above, and none of its other threads pays for switching more often.
HELD_SWITCH_INTERVAL_S = 0.0001


_held = threading.Lock()
_holders = 0  # threads inside holding_the_lock
_interval_before = SWITCH_INTERVAL_S  # to restore when the last one leaves


@contextlib.contextmanager
def holding_the_lock() -> Iterator[None]:
    """Around one of a pass's write transactions (from its wait for the lock to its
    commit): the GIL switches every ``HELD_SWITCH_INTERVAL_S`` meanwhile. Counted, so
    that two passes of one process (a retention pass and a reproject's run trims)
    overlapping leave the interval as they found it."""
    global _holders, _interval_before
    with _held:
        if _holders == 0:
            _interval_before = sys.getswitchinterval()
            sys.setswitchinterval(HELD_SWITCH_INTERVAL_S)
        _holders += 1
    try:
        yield
    finally:
        with _held:
            _holders -= 1
            if _holders == 0:
                sys.setswitchinterval(_interval_before)


# .share: the thread's CPU_SHARE (``sharing_the_cpu``), else none;
# .cpu: its time.thread_time() when it last paused.
_rested = threading.local()


@contextlib.contextmanager
def sharing_the_cpu(share: float = CPU_SHARE) -> Iterator[None]:
    """The pauses of the passes this thread runs meanwhile keep its CPU within ``share``."""
    _rested.share = share
    try:
        yield
    finally:
        del _rested.share


def pause_after(held_s: float, step: str, spent_s: float = 0.0) -> None:
    """Sleep after a write transaction (a ``step`` of a pass: what it did, for the debug
    log) that held the lock for ``held_s`` seconds, less the ``spent_s`` of the pause
    the pass spent on work that takes no lock (the next step's reads); and at least as
    long as keeps the thread's CPU since its last pause within its share, if it has one
    (``sharing_the_cpu``)."""
    now = time.thread_time()
    last: float | None = getattr(_rested, "cpu", None)
    used = held_s + spent_s if last is None else now - last  # a thread's first pause: the step
    share: float = getattr(_rested, "share", 1.0)
    cpu_s = used * (1.0 / share - 1.0)
    lock_s = max(PAUSE_S, held_s) - spent_s
    log.debug(
        "retention step %s held the write lock %.1f ms",
        step,
        held_s * 1000,
        extra={
            "step": step,
            "held_ms": round(held_s * 1000, 1),
            "cpu_ms": round(used * 1000, 1),
        },
    )
    time.sleep(max(0.0, min(MAX_PAUSE_S, max(lock_s, cpu_s))))
    _rested.cpu = time.thread_time()


class Pacer:
    """The size of a pass's next step: as many items (runs, pages) as the recent steps
    went through in ``target_s``, between ``low`` and ``high``, starting at ``start``."""

    def __init__(self, start: int, low: int, high: int, target_s: float | None = None) -> None:
        self.low, self.high = low, high
        self.target_s = TARGET_HOLD_S if target_s is None else target_s
        self.size = max(low, min(high, start))

    def held(self, held_s: float, items: int) -> None:
        """A step of ``items`` held the lock ``held_s``: size the next one."""
        if items <= 0:
            return
        wanted = items * self.target_s / max(held_s, 1e-4)
        # Halfway (geometrically) to the new estimate: one slow step (a checkpoint,
        # the GIL) does not throw the size to the floor.
        self.size = max(self.low, min(self.high, round((self.size * wanted) ** 0.5)))
