"""A retention pass shares the write lock with ingest
(docs/operations.md#retention-and-the-archive): its write transactions are small, each
followed by a pause, and the vacuum returns the pages free when it began, not the ones
the projector keeps freeing meanwhile."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embrasure.lifecycle import retention, run_retention
from embrasure.lifecycle.run_retention import trim_runs
from embrasure.projector.worker import Projector
from embrasure.store import Store, lifecycle_sql, open_store, pacing
from embrasure.store.rows import RunRow

from event_strategies import deliveries
from graph_api import Api, at, run_event, run_id

HORIZON = "2026-11-30T11:00:00.000000000Z"


def test_a_pause_is_at_least_as_long_as_the_lock_was_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr(time, "thread_time", lambda: 0.0)  # no CPU used: the lock decides
    monkeypatch.setattr(pacing, "_rested", threading.local())
    for held in (0.0, pacing.PAUSE_S / 2, 0.2, 5.0):
        pacing.pause_after(held, "a test step")
    assert slept == [pacing.PAUSE_S, pacing.PAUSE_S, 0.2, pacing.MAX_PAUSE_S]
    # Work that takes no lock (the next step's reads) fills the pause, and may outlast it.
    slept.clear()
    pacing.pause_after(0.2, "a test step", spent_s=0.05)
    pacing.pause_after(0.0, "a test step", spent_s=1.0)
    assert slept == [pytest.approx(0.15), 0.0]


def test_a_pause_keeps_the_pass_within_its_share_of_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    cpu = [0.0]
    monkeypatch.setattr(time, "thread_time", lambda: cpu[0])
    monkeypatch.setattr(pacing, "_rested", threading.local())
    with pacing.sharing_the_cpu(0.25):
        # A thread's first pause knows only the step: its hold and its reads, 2 + 3 ms.
        pacing.pause_after(0.002, "a test step", spent_s=0.003)
        # Then the CPU the thread used since it last paused, whatever the lock says: 20
        # ms of CPU → 60 ms of rest (20 of 80 is the share); 1 ms → the lock's 15 ms.
        cpu[0] += 0.020
        pacing.pause_after(0.002, "a test step", spent_s=0.003)
        cpu[0] += 0.001
        pacing.pause_after(0.002, "a test step")
        cpu[0] += 10.0  # a long stretch of work: rest at most MAX_PAUSE_S
        pacing.pause_after(0.0, "a test step")
    assert slept == pytest.approx([0.015, 0.060, pacing.PAUSE_S, pacing.MAX_PAUSE_S])
    # A thread with no share (a pass of its own process) keeps to the lock's pauses.
    slept.clear()
    cpu[0] += 0.020
    pacing.pause_after(0.002, "a test step", spent_s=0.003)
    assert slept == pytest.approx([0.012])


def test_the_passes_of_a_server_share_the_cpu_and_those_of_the_cli_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shares: list[float | None] = []
    ran = threading.Event()

    def record(_store: object, horizon: str, **_: object) -> run_retention.RunsReport:
        shares.append(getattr(pacing._rested, "share", None))
        ran.set()
        return run_retention.RunsReport(horizon)

    monkeypatch.setattr(retention, "trim_runs", record)
    store = open_store(f"sqlite:///{tmp_path / 'share.db'}")
    loop = retention.RetentionLoop(store, "", None, 3600, retain_runs=datetime.timedelta(0))
    try:
        loop.start()  # serve's and project's passes, in the loop's thread
        assert ran.wait(30)
        loop.stop()
        loop.run_once()  # as `embrasure retention` runs one, in a thread of its own
    finally:
        store.close()
    assert shares == [pacing.CPU_SHARE, None]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # (items, seconds held) of the steps → the size after them
        ([(16, 0.016)], 11),  # twice too slow: halfway (geometrically) to 8
        ([(16, 0.016)] * 6, 8),  # steady: settles on what holds 8 ms
        ([(64, 0.001)] * 2, 100),  # fast: grows, up to high
        ([(16, 2.0)], 1),  # a stall: down to low, not below
        ([(0, 0.5)], 16),  # a step of nothing says nothing
    ],
)
def test_a_pacer_sizes_steps_to_hold_the_lock_about_the_target(
    steps: list[tuple[int, float]], expected: int
) -> None:
    pacer = pacing.Pacer(start=16, low=1, high=100)
    for items, held in steps:
        pacer.held(held, items)
    assert pacer.size == expected


def test_runs_are_trimmed_a_batch_a_transaction_with_a_pause_between(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Four jobs of three runs at 09:00, 10:00 and 12:00: the first two of each go.
    for job in range(4):
        for n, hour in enumerate((9, 10, 12)):
            api.ingest(run_event("COMPLETE", f"job{job}", run_id(job * 10 + n), at(hour)))
    pauses: list[str] = []
    monkeypatch.setattr(
        run_retention, "pause_after", lambda _held, step, spent_s=0.0: pauses.append(step)
    )
    # However slow the machine: 3 a step.
    monkeypatch.setattr(api.store, "step_hold_s", 60.0)
    monkeypatch.setattr(api.store, "step_runs", 3)
    report = trim_runs(api.store, HORIZON)
    assert report.runs == 8
    # 3 + 3 + 2 runs: a pause after each full batch, none after the last; then one
    # statement for the shapes the removed runs named (each job's shape, which its kept
    # run still names: none goes), and none for values (the runs named none).
    assert pauses == ["trim of 3 runs", "trim of 3 runs", "deletion of 4 unnamed shapes"]
    with api.store.reader() as reader:
        kept = sorted(r.run_id for r in reader.rows(RunRow))
    assert kept == sorted(run_id(job * 10 + 2) for job in range(4))


@contextlib.contextmanager
def store_with_filler(path: Path) -> Iterator[tuple[Store, sqlite3.Connection]]:
    """A store, and another connection to its file with 2,000 rows of ~3 KiB in table
    ``filler``: deleting some frees pages for a vacuum to give back."""
    store = open_store(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("CREATE TABLE filler (n INTEGER PRIMARY KEY, blob BLOB)")
        rows = [(n, hashlib.sha256(str(n).encode()).digest() * 100) for n in range(2000)]
        other.executemany("INSERT INTO filler VALUES (?, ?)", rows)
        yield store, other
    finally:
        other.close()
        store.close()


def test_the_vacuum_steps_are_bounded_and_do_not_chase_new_free_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store_with_filler(tmp_path / "vacuum.db") as (store, other):
        other.execute("DELETE FROM filler WHERE n < 1000")
        (free,) = other.execute("PRAGMA freelist_count").fetchone()
        assert free > 100
        steps: list[float] = []

        def pause(held: float, _step: str) -> None:
            # While the pass pauses, another writer frees pages (as the projector does).
            steps.append(held)
            low = 1000 + 40 * (len(steps) - 1)
            other.execute("DELETE FROM filler WHERE n >= ? AND n < ?", (low, low + 40))

        monkeypatch.setattr(lifecycle_sql, "VACUUM_PAGES", 32)
        monkeypatch.setattr(pacing, "TARGET_HOLD_S", 60.0)  # steps of VACUUM_PAGES
        monkeypatch.setattr(lifecycle_sql, "pause_after", pause)
        with store.log_trimmer() as trimmer:
            assert trimmer is not None
            given_back = trimmer.give_back("")
        page_size = other.execute("PRAGMA page_size").fetchone()[0]
        assert given_back == free * page_size
        # Steps of 32 pages (the last one shorter), a pause between two steps: the
        # pages freed meanwhile are left to the next pass.
        assert len(steps) + 1 == -(-free // 32)
        (left,) = other.execute("PRAGMA freelist_count").fetchone()
        assert left > 0


def test_a_servers_vacuum_gives_back_only_the_pages_free_when_its_pass_began(
    tmp_path: Path,
) -> None:
    with store_with_filler(tmp_path / "reserve.db") as (store, other):
        other.execute("DELETE FROM filler WHERE n < 500")  # free before the pass
        at_start = store.free_pages()
        assert at_start is not None and at_start > 50
        other.execute("DELETE FROM filler WHERE n < 1000")  # what the pass frees
        (free,) = other.execute("PRAGMA freelist_count").fetchone()
        assert free > at_start + 50
        with store.log_trimmer() as trimmer:
            assert trimmer is not None
            given_back = trimmer.give_back("", free_at_start=at_start)
        page_size = other.execute("PRAGMA page_size").fetchone()[0]
        assert given_back == at_start * page_size
        assert other.execute("PRAGMA freelist_count").fetchone() == (free - at_start,)


def test_a_run_step_times_its_hold_from_when_the_lock_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer of the process (the projector, the receiver) holds its turn at the
    # write lock for 0.6 s just as the pass's first step asks for it: the step waits,
    # but that wait is not a hold, so the pacer does not shrink the steps for it and
    # the pause after it stays the floor.
    store = open_store(f"sqlite:///{tmp_path / 'turns.db'}")
    try:
        events = [
            run_event("COMPLETE", f"job{job}", run_id(job * 10 + n), at(hour))
            for job in range(2)
            for n, hour in enumerate((9, 10, 12))
        ]
        for draft in deliveries([events]):
            store.append([draft])
        Projector(store).run_until_caught_up()
        holds: list[tuple[str, float]] = []
        monkeypatch.setattr(
            run_retention, "pause_after", lambda held, step, spent_s=0.0: holds.append((step, held))
        )
        monkeypatch.setattr(store, "step_runs", 1)  # a step a run: a pause after the first
        snapshot = store.projection_snapshot
        taken = threading.Event()

        def hold_the_turn() -> None:
            with store.projection():
                taken.set()
                time.sleep(0.6)

        @contextlib.contextmanager
        def then_another_writer(generation: int | None = None) -> Iterator[Any]:
            with snapshot(generation) as tx:
                yield tx
            if not taken.is_set():
                threading.Thread(target=hold_the_turn).start()
                taken.wait(5)

        monkeypatch.setattr(store, "projection_snapshot", then_another_writer)
        started = time.monotonic()
        assert trim_runs(store, HORIZON).runs == 4
        assert time.monotonic() - started >= 0.6, "the first step waited for the turn"
        first_step, held = holds[0]
        assert first_step == "trim of 1 runs" and held < 0.3
    finally:
        store.close()


def test_while_a_step_holds_the_lock_the_gil_switches_every_tenth_of_a_millisecond(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # store/pacing.py HELD_SWITCH_INTERVAL_S: each sqlite3 call lets the GIL go, and the
    # thread holding the lock every writer waits for gets it back within 0.1 ms, not 1.
    for n, hour in enumerate((9, 10, 12)):
        api.ingest(run_event("COMPLETE", "etl", run_id(n), at(hour)))
    monkeypatch.setattr(run_retention, "pause_after", lambda *_a, **_k: None)
    seen: list[float] = []
    projection = api.store.projection

    @contextlib.contextmanager
    def watched(generation: int | None = None) -> Iterator[Any]:
        with projection(generation) as tx:
            seen.append(sys.getswitchinterval())
            yield tx

    monkeypatch.setattr(api.store, "projection", watched)
    sys.setswitchinterval(pacing.SWITCH_INTERVAL_S)  # as a retention process has it
    try:
        assert trim_runs(api.store, HORIZON).runs == 2
        # The horizon's transaction is no step; the trim of the two runs is.
        held = pytest.approx(pacing.HELD_SWITCH_INTERVAL_S)
        assert seen[0] == pytest.approx(pacing.SWITCH_INTERVAL_S)
        assert seen[1:] == [held] * (len(seen) - 1) and len(seen) >= 2
        assert sys.getswitchinterval() == pytest.approx(pacing.SWITCH_INTERVAL_S)
        # Overlapping holders (a pass and a reproject's trims) restore it once, at the end.
        with pacing.holding_the_lock():
            with pacing.holding_the_lock():
                assert sys.getswitchinterval() == held
            assert sys.getswitchinterval() == held
        assert sys.getswitchinterval() == pytest.approx(pacing.SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(0.005)  # CPython's default
