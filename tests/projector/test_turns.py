"""docs/projection.md#two-processes-taking-turns: a projector running as two processes
(projector/turns.py) builds the graph one process builds, byte for byte, whatever
breaks: a delivery that fails its step, a partner killed mid-run, a stop."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from embrasure.projector import turns, worker
from embrasure.projector.turns import Turn
from embrasure.projector.worker import Projector, ProjectorLimits
from embrasure.query.export import export_bytes
from embrasure.store import Store, open_store
from embrasure.store.base import LogEntry
from embrasure.store.rows import GRAPH_ROWS, FailureRow

from corpus import EVENT_FILES, load
from event_strategies import deliveries, draft
from graph_api import daily_run, export_events, platform, spark_reads_table, spark_writes_path

# A step of a few deliveries, so that a few hundred events take dozens of turns.
PAIR = ProjectorLimits(batch_deliveries=4, batch_events=40, processes=2, idle_seconds=0.01)
ALONE = ProjectorLimits(batch_deliveries=4, batch_events=40)


def events() -> list[Any]:
    """Every event of the producers' corpus (when ../shared is there), then the graph
    tests' own: enough of those alone for dozens of turns."""
    corpus = [event for entry in EVENT_FILES for event in load(entry) if isinstance(event, dict)]
    own = platform() + export_events() + [spark_writes_path(), spark_reads_table()]
    return corpus + own + [daily_run(n) for n in range(1, 120)]


def batches(items: list[Any]) -> list[list[Any]]:
    """One to five events a delivery, in order."""
    out, i = [], 0
    while i < len(items):
        n = 1 + i % 5
        out.append(items[i : i + n])
        i += n
    return out


def append(store: Store, items: list[Any]) -> None:
    for d in deliveries(batches(items)):
        store.append([d])


def graph(store: Store) -> dict[str, Any]:
    """Every graph table's rows, and the export. The interned names' ids are numbered
    in the order transactions wrote them (internal, never handed out: store/interned.py),
    so those two tables are compared by what they name. ``facet_values`` is left out:
    where transactions split differs (the pair's leader steps alone until its partner
    has started), it was seen to hold a value more on one side; the values the graph
    names are compared through the ``facets`` rows and the export."""
    with store.reader() as reader:
        tables: dict[str, Any] = {
            name: sorted(
                repr(row[1:] if name in ("names", "field_names") else row)
                for row in reader.rows(table.row)
            )
            for name, table in GRAPH_ROWS.items()
            if name != "facet_values"
        }
        tables["deliveries"] = [(e.seq, e.item_count) for e in store.read_log(0, 10**6, 10**12)]
        return tables | {"export": export_bytes(reader)}


@pytest.fixture
def alone(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'alone.db'}")
    yield store
    store.close()


@pytest.fixture
def paired(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'paired.db'}")
    yield store
    store.close()


def test_a_pair_builds_the_graph_one_process_builds(
    alone: Store, paired: Store, caplog: pytest.LogCaptureFixture
) -> None:
    items = events()
    assert len(items) > 130
    poison = draft(b'[{"eventType": "START"', "batch", 1)  # bytes no step can parse
    half = len(items) // 2
    append(alone, items[:half])
    alone.append([poison])
    append(alone, items[half:])
    assert Projector(alone, ALONE).run_until_caught_up() == alone.position()
    # The first half is in the log before the pair starts: steps of four deliveries
    # alternate from the leader's first, so the partner reads at least half of it, however
    # slow the machine. The rest arrives while the pair runs: steps that find little or
    # nothing, a turn each all the same.
    append(paired, items[:half])
    prefilled = len(batches(items[:half]))
    projector = Projector(paired, PAIR)
    projector.start()
    try:
        paired.append([poison])
        append(paired, items[half:])
        wait_for(lambda: caught_up(paired), "the pair to catch up")
        partner = projector.partner
        assert partner is not None
        assert partner.deliveries >= (prefilled - 4) / 2, "the partner took its turns"
    finally:
        projector.stop()
    assert not [r for r in caplog.records if "lost" in r.getMessage()], "the pair held"
    assert graph(paired) == graph(alone)
    with paired.reader() as reader:
        failed = reader.rows(FailureRow)
    assert [f.seq for f in failed] == [poison_seq(paired)], "the poison, retried alone"


def test_run_until_caught_up_stops_its_partner(paired: Store) -> None:
    append(paired, events()[:40])
    projector = Projector(paired, PAIR)
    assert projector.run_until_caught_up() == paired.position()
    assert projector.partner is not None
    assert projector.partner.process.wait(10) is not None, "no partner left behind"


def poison_seq(store: Store) -> int:
    return next(e.seq for e in store.read_log(0, 10**6, 10**12) if e.stored_body()[-1:] == b'"')


def wait_for(condition: Any, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def caught_up(store: Store) -> bool:
    last = store.read_log(store.position(), 1, 10**12)
    return not last


def test_a_partner_killed_mid_run_loses_nothing(
    alone: Store, paired: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "PAIR_AGAIN_S", 0.2)  # a new partner soon after
    items = events()
    half = len(items) // 2
    for store in (alone, paired):
        append(store, items[:half])
    Projector(alone, ALONE).run_until_caught_up()
    projector = Projector(paired, PAIR)
    projector.start()
    try:
        wait_for(lambda: projector.partner is not None, "the partner")
        first = projector.partner
        assert first is not None
        os.kill(first.process.pid, signal.SIGKILL)  # whatever it had in hand
        wait_for(
            lambda: (p := projector.partner) is not None and p is not first and p.started,
            "a new partner",
        )
        append(alone, items[half:])
        append(paired, items[half:])
        Projector(alone, ALONE).run_until_caught_up()
        wait_for(lambda: caught_up(paired), "the pair to catch up")
    finally:
        projector.stop()
    last = projector.partner
    assert last is not None and last.process.poll() is not None, "stopped with its leader"
    assert last.deliveries > 0, "the new partner took turns"
    assert [r for r in caplog.records if "partner process is lost" in r.getMessage()]
    assert graph(paired) == graph(alone)


class Recorded(Turn):
    """A turn whose partner is this test: it records when the step reads, waits for the
    partner and takes the write lock, so their order is checked in one process."""

    def __init__(self, start: int, calls: list[str]) -> None:
        self.start, self.calls, self._waited = start, calls, False

    def read(self, entries: Sequence[LogEntry]) -> None:
        self.calls.append("read")

    def wait(self) -> None:
        if not self._waited:
            self._waited = True
            self.calls.append("wait")


def test_a_failed_step_retried_one_by_one_waits_for_the_partner_first(
    alone: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partner's step commits before this one's deliveries, even retried alone: a
    write before the partner's would move the position past deliveries not yet projected."""
    append(alone, events()[:6])
    alone.append([draft(b'[{"eventType": "START"', "batch", 1)])
    calls: list[str] = []
    projection = alone.projection

    def recorded(*args: Any) -> Any:
        calls.append("write")
        return projection(*args)

    monkeypatch.setattr(alone, "projection", recorded)
    projector = Projector(alone, ProjectorLimits(batch_deliveries=100, batch_events=100))
    assert projector.step(Recorded(0, calls)) == alone.position()
    assert calls[:2] == ["read", "wait"] and set(calls[2:]) == {"write"}, calls
    with alone.reader() as reader:
        assert len(reader.rows(FailureRow)) == 1, "the bad delivery, quarantined alone"


def test_a_partner_that_cannot_start_never_stops_the_projection(
    alone: Store, paired: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    items = events()[:60]
    for store in (alone, paired):
        append(store, items)
    Projector(alone, ALONE).run_until_caught_up()
    # The partner opens the store by its URL: one it cannot open makes it exit at once.
    monkeypatch.setattr(paired, "url", "sqlite:////nonexistent/embrasure.db")
    projector = Projector(paired, PAIR)
    projector.start()
    try:
        wait_for(lambda: caught_up(paired), "the leader alone to catch up")
        lost = "partner process is lost"
        wait_for(lambda: any(lost in r.getMessage() for r in caplog.records), "the leader to see")
    finally:
        projector.stop()
    assert graph(paired) == graph(alone)


def test_a_partner_that_never_starts_is_waited_for_only_so_long(
    alone: Store,
    paired: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leader's first step does not wait for its partner; after it, the leader waits
    ``START_WAIT_S`` for the partner to start, then goes on alone."""
    items = events()[:60]
    for store in (alone, paired):
        append(store, items)
    Projector(alone, ALONE).run_until_caught_up()
    (tmp_path / "hung_partner.py").write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    real = turns.Partner
    monkeypatch.setattr(turns, "Partner", lambda _module, args: real("hung_partner", args))
    monkeypatch.setattr(turns, "START_WAIT_S", 1.0)
    projector = Projector(paired, PAIR)
    projector.start()
    try:
        wait_for(lambda: any("did not start" in r.getMessage() for r in caplog.records), "1 s")
        hung = projector.partner
        assert hung is not None and not hung.started
        wait_for(lambda: caught_up(paired), "the leader alone to catch up")
        assert hung.process.poll() is not None, "the hung partner was stopped"
    finally:
        projector.stop()
    assert graph(paired) == graph(alone)
