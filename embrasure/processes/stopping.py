"""How a command that runs until stopped learns of SIGTERM and SIGINT
(docs/operations.md#processes).

CPython runs a signal's Python handler only in the main thread, at its next bytecode.
The C part of the handler runs in whichever thread the kernel delivered the signal to;
when that is another thread, it only trips the handler, and a main thread blocked in a
lock with no timeout — a bare ``Event.wait()`` — never wakes to run it. `embrasure
project` with its partner process slept through SIGTERM that way, in 1 of 10 runs of
tests/lifecycle/test_retention.py's ``test_project_runs_passes_too``: every thread
idle, the main one still in ``stop.wait()``. So the main thread waits in slices.
"""

from __future__ import annotations

import signal
import threading

WAKE_S = 0.5  # the longest a tripped handler waits for the main thread to run it


def stop_event() -> threading.Event:
    """An event SIGTERM and SIGINT set (call from the main thread)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    return stop


def wait_until_set(stop: threading.Event) -> None:
    """Until ``stop`` is set, waking every WAKE_S (module doc)."""
    while not stop.wait(WAKE_S):
        pass
