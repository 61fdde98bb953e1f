"""The servers measured side by side, each on a fresh database of its own.

- ``embrasure-sqlite``: ``embrasure serve`` (receiver and projector, as users run it) on a
  new SQLite file;
- ``embrasure-postgresql``: the same on a new PostgreSQL database;
- ``marquez``: ``marquez.MarquezApp server`` on a new PostgreSQL database
  (bench/peers/marquez_server.py).

Both PostgreSQL servers use the same local cluster. A target can be restarted on its
database (the cold queries), and its database measured: SQLite's file and WAL,
PostgreSQL's ``pg_database_size``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import query
import servers
import storage_sizes

from peers import marquez_server

TARGETS = ("embrasure-sqlite", "embrasure-postgresql", "marquez")
SETTLED_CORES = 0.05


@dataclasses.dataclass
class Target:
    name: str
    kind: str  # "embrasure" or "marquez"
    db_url: str
    db_path: Path | None  # SQLite only
    work: Path
    source: Path  # the copied embrasure package
    server: servers.Server

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self) -> float:
        """Stop the process and start it again on the same database; seconds taken."""
        started = time.monotonic()
        self.server.stop()
        self.server = _start(self.kind, self.work, self.db_url, self.db_path, self.source)
        return time.monotonic() - started

    def db_bytes(self) -> int:
        """The database's bytes on disk now (SQLite: its files + WALs after a checkpoint;
        PostgreSQL: the database with its catalogs)."""
        if self.db_path is not None:
            # The WALs folded back first (the server is idle when this is asked), so the
            # figure is the database's, not how far its last checkpoint lags.
            for file in (self.db_path, Path(f"{self.db_path}-graph")):
                if file.exists():
                    conn = sqlite3.connect(file, timeout=30)
                    try:
                        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    finally:
                        conn.close()
            files = query.db_files(self.db_path)
            return files["main"] + files["wal"]
        with psycopg.connect(self.db_url, autocommit=True) as pg:
            row = pg.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0

    def events_stored(self) -> int:
        """Events the server holds: Embrasure's log items (every outcome), Marquez's
        ``lineage_events`` rows. Counted from the server, not the client: a request still
        being served when wrk stops is stored without being counted by it."""
        if self.kind == "marquez":
            with psycopg.connect(self.db_url, autocommit=True) as pg:
                row = pg.execute("SELECT COUNT(*) FROM lineage_events").fetchone()
            return int(row[0]) if row else 0
        overview = httpx.get(self.url + "/api/v1/overview", params={"runs": 0}, timeout=60)
        overview.raise_for_status()
        return int(overview.json()["items"]["received"])

    def settle(self, timeout_s: float = 180.0) -> float:
        """Seconds until the server process uses under SETTLED_CORES (its queued requests
        done: Marquez goes on serving those a client left when it stopped)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            before = servers.cpu_snapshot(self.server.pid)
            time.sleep(1.0)
            after = servers.cpu_snapshot(self.server.pid)
            if (after.process - before.process) / (after.wall - before.wall) < SETTLED_CORES:
                break
        return time.monotonic() - started

    def wait_graph(self, timeout_s: float = 1800.0) -> float:
        """Seconds until the graph holds every accepted event: Embrasure's projector's
        backlog at zero; Marquez answers once its graph is written, so none."""
        if self.kind == "marquez":
            return 0.0
        return storage_sizes.wait_projected(self.url, timeout_s)


@contextlib.contextmanager
def running(name: str, work: Path, source: Path) -> Iterator[Target]:
    """``name`` (one of TARGETS) started on a new database, stopped and the database
    removed after (its log stays in ``work``)."""
    directory = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    with _database(name, directory) as (db_url, db_path):
        kind = "marquez" if name == "marquez" else "embrasure"
        server = _start(kind, directory, db_url, db_path, source)
        target = Target(name, kind, db_url, db_path, directory, source, server)
        try:
            yield target
        finally:
            target.server.stop()


def _start(
    kind: str, work: Path, db_url: str, db_path: Path | None, source: Path
) -> servers.Server:
    if kind == "marquez":
        return marquez_server.start_marquez(work, db_url)
    return servers.start_embrasure(work, db_path, source, projector=True, db_url=db_url)


@contextlib.contextmanager
def _database(name: str, directory: Path) -> Iterator[tuple[str, Path | None]]:
    if name == "embrasure-sqlite":
        path = directory / "embrasure.db"
        try:
            yield f"sqlite:///{path}", path
        finally:  # the logs stay in the run's directory; the database goes
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    with marquez_server.marquez_database(directory) as url:
        yield url, None
