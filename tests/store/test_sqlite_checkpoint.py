"""WAL checkpoints on a thread of their own (store/sqlite_checkpoint.py): no commit of a
store's connections checkpoints, and the thread copies the WAL into the database file."""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
import time
from pathlib import Path

from embrasure.store.sqlite import SQLiteStore
from embrasure.store.sqlite_checkpoint import Checkpointer


def _wal_database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (v BLOB)")
    return conn


def test_the_thread_copies_the_wal_into_the_database_file(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    writer = _wal_database(path)
    for _ in range(40):  # ~5 MiB of WAL, past the 1,000 pages an automatic one waits for
        writer.execute("INSERT INTO t VALUES (?)", (os.urandom(128 * 1024),))
    before = path.stat().st_size
    assert before < 64 * 1024, "nothing checkpointed yet: the pages are all in the WAL"

    checkpointer = Checkpointer(sqlite3.connect(path, check_same_thread=False), every_s=0.05)
    checkpointer.start()
    deadline = time.monotonic() + 10
    while path.stat().st_size < 5 * 1024 * 1024 and time.monotonic() < deadline:
        time.sleep(0.05)
    checkpointer.stop()
    assert path.stat().st_size >= 5 * 1024 * 1024
    assert not checkpointer.is_alive()
    # The WAL's frames are in the database now: a checkpoint has nothing left to copy.
    busy, frames, copied = writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, frames) == (0, copied)
    writer.close()


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "embrasure-wal-checkpoint"]


def test_a_store_checkpoints_off_its_commits_and_stops_when_closed_or_dropped(
    tmp_path: Path,
) -> None:
    before = len(_checkpointers())
    store = SQLiteStore(str(tmp_path / "e.db"))
    assert len(_checkpointers()) == before + 1
    with store.reader():  # a reader's connection is a store connection too
        pass
    for conn in (store._writer, store._read()):
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    store.close()
    assert len(_checkpointers()) == before

    SQLiteStore(str(tmp_path / "dropped.db"))  # never closed
    gc.collect()
    deadline = time.monotonic() + 5
    while len(_checkpointers()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_checkpointers()) == before
