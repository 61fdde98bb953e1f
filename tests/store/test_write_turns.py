"""Writers of one process take turns at SQLite's write lock (store/write_turns.py)."""

from __future__ import annotations

import threading
import time

import pytest

from embrasure.store.write_turns import WriteTurns


def test_writers_get_their_turns_in_the_order_they_asked() -> None:
    turns = WriteTurns()
    order: list[int] = []
    waiting = threading.Semaphore(0)

    def writer(n: int) -> None:
        waiting.release()
        with turns.turn():
            order.append(n)

    threads = []
    with turns.turn():  # the lock is held while they line up, one after another
        for n in range(5):
            thread = threading.Thread(target=writer, args=(n,))
            thread.start()
            assert waiting.acquire(timeout=5)
            time.sleep(0.02)  # this one is waiting before the next one asks
            threads.append(thread)
        assert order == []
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]


def test_a_thread_holding_a_turn_takes_another_without_waiting_on_itself() -> None:
    turns = WriteTurns()
    with turns.turn(), turns.turn():
        pass
    done = threading.Event()

    def other() -> None:
        with turns.turn():
            done.set()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(5)
    assert done.is_set()  # the nested turn gave the turn back once, at the outer end


def test_a_writer_that_stops_waiting_does_not_hold_up_the_ones_behind_it() -> None:
    turns = WriteTurns()
    interrupted = threading.Event()
    later = threading.Event()

    class Stop(Exception):
        pass

    def impatient() -> None:
        # Stands for an interrupt arriving while the writer waits for its turn.
        with pytest.raises(Stop), turns.turn():
            pass

    original_wait = turns._changed.wait
    raised = False

    def wait_then_stop(timeout: float | None = None) -> bool:
        nonlocal raised
        if threading.current_thread().name == "impatient" and not raised:
            raised = True
            interrupted.set()
            raise Stop
        return original_wait(timeout)

    turns._changed.wait = wait_then_stop  # type: ignore[method-assign]
    with turns.turn():
        first = threading.Thread(target=impatient, name="impatient")
        first.start()
        assert interrupted.wait(5)
        first.join(5)

        def patient() -> None:
            with turns.turn():
                later.set()

        second = threading.Thread(target=patient)
        second.start()
    second.join(5)
    assert later.is_set()
