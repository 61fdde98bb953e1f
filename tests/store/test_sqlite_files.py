"""SQLite's two files (store/sqlite_files.py): the log, and the graph beside it. Appends
never wait for a projection; an older database's graph moves out on `db upgrade`; a
log without its graph gets it rebuilt; a backup copies both."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from embrasure.errors import SchemaError
from embrasure.projector.worker import Projector
from embrasure.store import sqlite_files
from embrasure.store.sqlite import SQLiteStore

from conftest import as_one_sqlite_file
from event_strategies import draft, graph_bytes

EVENT = {
    "eventType": "COMPLETE",
    "eventTime": "2026-11-30T09:00:00Z",
    "run": {"runId": "0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f8091"},
    "job": {"namespace": "spark", "name": "orders"},
    "inputs": [{"namespace": "s3://lake", "name": "raw/orders"}],
    "outputs": [{"namespace": "warehouse", "name": "db.orders"}],
}


def _tables(path: Path | str) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _filled(path: Path) -> bytes:
    """A store at ``path`` with one projected event and an outbox row; its graph."""
    store = SQLiteStore(str(path))
    try:
        store.append([draft(orjson.dumps(EVENT))])
        Projector(store).run_until_caught_up()
        with store._short_write(graph=True) as conn:
            conn.execute(
                "INSERT INTO notifications VALUES ('s1', 'c1', 'n1', 'check.failed', '{}',"
                " '2026-11-30T09:00:00Z', 'sent', 1, '2026-11-30T09:00:00Z', NULL, NULL)"
            )
        with store.reader() as reader:
            return graph_bytes(reader)
    finally:
        store.close()


def _graph(path: Path) -> bytes:
    store = SQLiteStore(str(path))
    try:
        Projector(store).run_until_caught_up()
        with store.reader() as reader:
            return graph_bytes(reader)
    finally:
        store.close()


def test_the_graph_lives_in_a_file_of_its_own(db_path: Path) -> None:
    _filled(db_path)
    log, graph = _tables(db_path), _tables(sqlite_files.graph_path_of(str(db_path)))
    assert {"deliveries", "delivery_bodies", "tokens", "subscriptions"} <= log
    assert {"graph_meta", "run_horizon", "notifications", "g1_runs", "g1_edges"} <= graph
    assert not log & graph
    assert not [n for n in log if re.fullmatch(r"g\d+_\w+", n)]


def test_an_append_does_not_wait_for_a_projection_transaction(db_path: Path) -> None:
    store = SQLiteStore(str(db_path))
    appended = threading.Event()
    try:
        with store.projection() as tx:  # the graph's write lock, held
            tx.set_position(tx.position())

            def append() -> None:
                store.append([draft(orjson.dumps(EVENT))])
                appended.set()

            thread = threading.Thread(target=append)
            thread.start()
            # The append commits while the projection transaction is still open (with
            # one file, it waited for the commit below: busy_timeout is 10 s).
            assert appended.wait(5)
        thread.join()
    finally:
        store.close()


def test_an_older_database_is_refused_until_upgraded_then_its_graph_moves_out(
    db_path: Path,
) -> None:
    served = _filled(db_path)
    as_one_sqlite_file(db_path)
    with pytest.raises(SchemaError, match="embrasure db upgrade"):
        SQLiteStore(str(db_path))
    subprocess.run(
        [sys.executable, "-m", "embrasure", "db", "upgrade", "--db", f"sqlite:///{db_path}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    graph = sqlite_files.graph_path_of(str(db_path))
    assert "g1_runs" not in _tables(db_path) and "g1_runs" in _tables(graph)
    with contextlib.closing(sqlite3.connect(graph)) as conn:
        assert conn.execute("SELECT cause, state FROM notifications").fetchall() == [("c1", "sent")]
    assert _graph(db_path) == served


def test_a_move_cut_after_its_copy_is_finished_on_the_next_upgrade(db_path: Path) -> None:
    served = _filled(db_path)
    as_one_sqlite_file(db_path)
    graph = sqlite_files.graph_path_of(str(db_path))
    with contextlib.closing(sqlite_files.connect(graph, log_path=str(db_path))) as conn:
        assert sqlite_files.copy_graph(conn)  # the copy committed, then the process died
    assert "g1_runs" in _tables(db_path) and "g1_runs" in _tables(graph)
    SQLiteStore(str(db_path), upgrade=True).close()
    assert "g1_runs" not in _tables(db_path)
    assert _graph(db_path) == served


def test_a_log_without_its_graph_gets_it_rebuilt(db_path: Path) -> None:
    served = _filled(db_path)
    for suffix in ("", "-wal", "-shm"):
        Path(sqlite_files.graph_path_of(str(db_path)) + suffix).unlink(missing_ok=True)
    assert _graph(db_path) == served


def test_a_backup_copies_both_files_and_either_restores(db_path: Path, tmp_path: Path) -> None:
    served = _filled(db_path)
    store = SQLiteStore(str(db_path))
    target = tmp_path / "backup" / "copy.db"
    target.parent.mkdir()
    try:
        store.backup(str(target))
    finally:
        store.close()
    graph_copy = Path(sqlite_files.graph_path_of(str(target)))
    assert target.exists() and graph_copy.exists()
    both, log_alone = tmp_path / "both", tmp_path / "log-alone"
    for place in (both, log_alone):
        place.mkdir()
        shutil.copy(target, place / "embrasure.db")
    shutil.copy(graph_copy, both / ("embrasure.db" + "-graph"))
    assert _graph(both / "embrasure.db") == served
    assert _graph(log_alone / "embrasure.db") == served  # rebuilt from the log
