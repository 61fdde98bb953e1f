"""The collector paused for a projection step (projector/collector.py)."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from embrasure.projector import collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_cycle_made_during_a_step_is_collected_by_the_next_full_collection() -> None:
    with collector.paused():
        assert not gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        gc.collect(0)  # an explicit collection still runs; the automatic ones do not
        assert alive() is None
        c, d = Node(), Node()
        c.other, d.other = d, c
        alive = weakref.ref(c)
        del c, d
    assert gc.isenabled()
    # Frozen with the step's survivors (collector.py says why), out of the collector's
    # view, until the periodic full collection.
    gc.collect()
    assert alive() is not None
    collector.settle(now=time.monotonic() + collector.FULL_EVERY_S)
    assert alive() is None


def test_what_a_step_leaves_alive_is_frozen_and_freed_by_reference_counting() -> None:
    with collector.paused():
        kept = [Node() for _ in range(1000)]
        alive = weakref.ref(kept[0])
    assert gc.get_freeze_count() >= 1000
    del kept
    assert alive() is None  # no collection needed: nothing else held them


def test_nested_and_concurrent_steps_resume_the_collector_once_all_end() -> None:
    inside, release = threading.Event(), threading.Event()

    def other_step() -> None:
        with collector.paused():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other_step)
    with collector.paused():
        thread.start()
        assert inside.wait(5)
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's step is still under way
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_disabled_by_someone_else_stays_disabled() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()
