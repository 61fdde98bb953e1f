"""CPython's cyclic collector held off while a batch is projected, and kept off the
projector's long-lived objects afterwards.

A projection step parses deliveries of hundreds of events (some 300 objects each) that
live until its transaction commits. Young collections, every 50,000 allocations
(``tune_gc``), walk all of them each time and promote them, so that older
collections walk them again: measured 9-10% of projection time on the bench platform
(bench/README.md). So the collector is paused for the step.

What survives a step is the projector's caches — the memo of what each job and dataset
content declares, the shapes, the store's interned ids — hundreds of thousands of
objects on a platform whose every event names a new job. A young collection after each
step walked them all once more, and found nothing: 7.5% of projection time on bench/
query.py's platform events, 0.3-0.5 s a step. The projector makes
no reference cycles, and reference counting frees a batch, and a cache entry dropped,
the moment nothing holds it. So after a step its survivors are frozen
(``gc.freeze``: out of every later collection's view, freed by reference counting as
before) instead of collected. A cycle something made meanwhile would then wait for the
full collection this module runs every ``FULL_EVERY_S`` seconds of steps (unfreeze,
collect everything, freeze again): bounded, and on a heap of millions of objects a
pause of about a second every ten minutes.

The pause is the process's: in ``serve --single-process`` the receiver's garbage is not
collected during a step either, which lasts a transaction (bounded by
``ProjectorLimits``).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

FULL_EVERY_S = 600.0

_lock = threading.Lock()
_steps = 0  # projection steps under way in this process
_paused = False  # whether this module disabled the collector (not someone else)
_last_full = time.monotonic()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off while the body runs (nested and threaded uses counted); what
    the body leaves alive frozen once the last step ends."""
    global _steps, _paused
    with _lock:
        if _steps == 0 and gc.isenabled():
            gc.disable()
            _paused = True
        _steps += 1
    try:
        yield
    finally:
        with _lock:
            _steps -= 1
            resume = _steps == 0 and _paused
            if resume:
                _paused = False
                gc.enable()
        if resume:
            settle()


def settle(now: float | None = None) -> None:
    """Freeze what is alive; every ``FULL_EVERY_S`` collect everything first (a cycle
    made since the last full collection is freed then)."""
    global _last_full
    now = time.monotonic() if now is None else now
    if now - _last_full >= FULL_EVERY_S:
        _last_full = now
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def tune_gc() -> None:
    """Fit CPython's cyclic collector to a server that parses large JSON bodies.

    Parsing a 500-event batch allocates some 150,000 objects that live until the request
    ends; with the default thresholds that triggers hundreds of young collections and
    repeated full ones that walk every object the process holds (measured: up to 39% of
    the event loop's time in bench/results/ingest.md). The hot paths create no reference
    cycles, so collecting young objects every 50,000 allocations instead of 700 loses
    nothing; and what start-up loaded (modules, compiled facet schemas) is frozen out of
    the collector's view for good.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
