"""CPython's cyclic collector held off while a batch is projected.

A projection step parses deliveries of hundreds of events (some 300 objects each) that
live until its transaction commits. Young collections, every 50,000 allocations
(cli/main.py ``tune_gc``), walk all of them each time and promote them, so that older
collections walk them again: measured 9-10% of projection time on the bench platform
(bench/README.md). The projector makes no reference cycles and reference counting frees
a batch when its step ends, so the collector is paused for the step and one young
collection afterwards sees only what survived it (the store's caches, and any cycle
made meanwhile).

The pause is the process's: in ``serve`` the receiver's garbage is not collected during
a step either, which lasts a transaction (bounded by ``ProjectorLimits``); its cycles
are collected right after.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_steps = 0  # projection steps under way in this process
_paused = False  # whether this module disabled the collector (not someone else)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off while the body runs (nested and threaded uses counted)."""
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
            gc.collect(0)
