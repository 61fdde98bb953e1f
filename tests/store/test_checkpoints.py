"""SQLite's WAL is checkpointed by a thread of its own, not inside a writer's commit
(store/checkpoints.py)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from embrasure.store.checkpoints import BACKSTOP_PAGES, RESTART_PAGES
from embrasure.store.sqlite import SQLiteStore
from embrasure.store.write_turns import WriteTurns

from event_strategies import draft, incompressible


def _in_the_database_file(path: Path) -> int | None:
    """Deliveries the database file itself holds, its WAL left out (``immutable=1``
    reads the file as it is: https://www.sqlite.org/uri.html#uriimmutable); None while
    the file has no deliveries table yet."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0])
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def test_what_writers_commit_reaches_the_database_file_while_the_store_is_open(
    db_path: Path,
) -> None:
    store = SQLiteStore(str(db_path))
    try:
        # A few pages, far under a writer's autocheckpoint: only the store's checkpoint
        # thread copies them out of the WAL before the store closes.
        store.append([draft(f'{{"n": {n}}}'.encode()) for n in range(20)])
        deadline = time.monotonic() + 10
        while _in_the_database_file(db_path) != 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _in_the_database_file(db_path) == 20
        wal_pages = store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        assert wal_pages == BACKSTOP_PAGES  # the writers' own checkpoints only a backstop
    finally:
        store.close()
    thread = store._checkpoints._thread
    assert thread is not None and not thread.is_alive()  # close stops it


def test_a_store_that_only_reads_starts_no_checkpoint_thread(db_path: Path) -> None:
    SQLiteStore(str(db_path)).close()  # creates the database
    store = SQLiteStore(str(db_path))
    try:
        store.position()
        assert store._checkpoints._thread is None
    finally:
        store.close()


def test_the_turns_call_after_once_when_the_outermost_turn_ends() -> None:
    ended: list[bool] = []
    turns = WriteTurns(after=lambda: ended.append(True))
    with turns.turn():
        with turns.turn():
            pass
        assert ended == []  # the thread still holds its turn
    assert ended == [True]


def test_the_wal_starts_over_under_a_writer_that_never_pauses(db_path: Path) -> None:
    # Back-to-back appends: a checkpoint beside them never sees the WAL whole, so the
    # thread finishes one in a turn of its own once the WAL holds RESTART_PAGES, and
    # the WAL starts over there, not at the writers' own bound (BACKSTOP_PAGES).
    store = SQLiteStore(str(db_path))
    wal = Path(f"{db_path}-wal")
    largest = 0
    try:
        page = store._writer.execute("PRAGMA page_size").fetchone()[0]
        for _ in range(2 * BACKSTOP_PAGES * page // 100_000):
            store.append([draft(incompressible(100_000))])
            largest = max(largest, wal.stat().st_size)
    finally:
        store.close()
    # Between the two bounds, with the room a gap between checkpoints lets pile up.
    assert largest < (RESTART_PAGES + BACKSTOP_PAGES) // 2 * page
