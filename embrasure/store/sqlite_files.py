"""The embedded backend's two files: the delivery log, and the graph beside it.

The log — deliveries and their bodies, tokens, grants, subscriptions, the schema's
version — is the file the URL names (``sqlite:///embrasure.db``). The graph — which
generation is served (``graph_meta``), every generation's tables, the run horizon and
the notifications outbox (``migrations.GRAPH_OWN_TABLES``) — is a second file beside it,
``embrasure.db-graph``. SQLite has one write lock per file, so the receiver's appends
never queue behind a projection transaction, however long it is, and the projector's
transactions are sized for its throughput alone (docs/architecture.md#storage). Each
file has its own WAL, checkpoints and write turns.

Connections: ``connect(log)`` is the log alone (the receiver's group commit, short
writes of the log's tables). ``connect(graph, log_path=log)`` is the graph with the log
attached read-only as ``log``: a write transaction on it (``BEGIN IMMEDIATE``) takes
the graph's lock only, and a statement names any table of either file unqualified,
their names being distinct (SQLite searches the main file, then the attached ones).
Readers get the same, query-only.

The graph is derived from the log, and its file can be made anew from it: opened
without its graph file, a log gets an empty graph, which the projector rebuilds from
the log (the outbox and the run horizon are lost with the file). A database made
before migration 17 has both in one file: ``embrasure db upgrade`` moves the graph out
(``move_graph``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import urllib.parse

from embrasure.errors import StoreError
from embrasure.store import migrations

BUSY_TIMEOUT_MS = 10_000
# The WAL is checkpointed by a thread of its own, not inside a writer's commit (and so
# its turn at the write lock): store/checkpoints.py. A writer's own autocheckpoint is
# the backstop, at this many pages.
BACKSTOP_PAGES = 10_000

INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL

_GENERATION_TABLE = re.compile(r"g\d+_\w+")


def graph_path_of(log_path: str) -> str:
    """The graph's file beside the log's: named like SQLite's own ``-wal`` and ``-shm``,
    so that listings keep them together and a copy of one is seen to need the other."""
    return log_path + "-graph"


def connect(
    path: str, log_path: str | None = None, graph_path: str | None = None
) -> sqlite3.Connection:
    """A connection to ``path``; with ``log_path``, the log attached read-only as
    ``log`` (the module docstring); with ``graph_path``, the graph attached read-only as
    ``graph`` (a retention pass on the log reads the graph's position)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, uri=True)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Pages freed by retention go back to the filesystem (an incremental vacuum after
    # each pass) instead of staying in the file. Takes effect only in a new database,
    # before its first table: `embrasure db upgrade` converts an older one (VACUUM).
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
    if log_path is not None:
        conn.execute("ATTACH DATABASE ? AS log", (read_only_uri(log_path),))
    if graph_path is not None:
        conn.execute("ATTACH DATABASE ? AS graph", (read_only_uri(graph_path),))
    return conn


def read_only_uri(path: str) -> str:
    """``path`` as a read-only SQLite URI (https://www.sqlite.org/uri.html)."""
    return "file:" + urllib.parse.quote(path) + "?mode=ro"


def free_pages(conn: sqlite3.Connection, schema: str = "main") -> int:
    """The free pages of the file attached as ``schema``."""
    return int(conn.execute(f"PRAGMA {schema}.freelist_count").fetchone()[0])


def has_graph(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether the file attached as ``schema`` holds a graph (its ``graph_meta``)."""
    found = conn.execute(
        f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = 'graph_meta'"
    ).fetchone()
    return found is not None


def graph_tables(conn: sqlite3.Connection, schema: str) -> list[str]:
    """The graph's tables in the file attached as ``schema``."""
    names = conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'")
    return [
        n
        for (n,) in names
        if n in migrations.GRAPH_OWN_TABLES or _GENERATION_TABLE.fullmatch(n) is not None
    ]


def create_graph(conn: sqlite3.Connection) -> None:
    """An empty graph in ``conn``'s main file (inside the caller's write transaction):
    generation 1 at position 0, the run horizon, the outbox."""
    for sql in (migrations.GRAPH_META, migrations.RUN_HORIZON, migrations.OUTBOX):
        for statement in migrations.render(sql, "sqlite"):
            conn.execute(statement)


def copy_graph(graph: sqlite3.Connection) -> bool:
    """The copy half of moving a graph out of the log's file (``move_graph``), on a
    connection to the graph's file with the log attached: inside one write transaction
    of the graph's file, the graph's tables and indexes made again there and filled
    from the log's file. Whatever an interrupted copy left is replaced. False when the
    log's file holds no graph (the move is done)."""
    graph.execute("BEGIN IMMEDIATE")
    try:
        if not has_graph(graph, "log"):
            graph.execute("COMMIT")
            return False
        for name in graph_tables(graph, "main"):
            graph.execute(f"DROP TABLE main.{name}")
        tables = graph_tables(graph, "log")
        rows = graph.execute(
            "SELECT type, name, tbl_name, sql FROM log.sqlite_master"
            " WHERE type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC"
        ).fetchall()
        for kind, name, table, sql in rows:  # tables first, then their indexes
            if table in tables:
                graph.execute(sql)
                if kind == "table":
                    graph.execute(f"INSERT INTO main.{name} SELECT * FROM log.{name}")
        graph.execute("COMMIT")
    except BaseException:
        if graph.in_transaction:
            graph.execute("ROLLBACK")
        raise
    return True


def drop_moved_graph(log: sqlite3.Connection, record: bool, now: str) -> None:
    """The second half of ``move_graph``, on the log's connection: the graph's tables
    leave the log's file, and the move is recorded (migration 17), in one transaction."""
    log.execute("BEGIN IMMEDIATE")
    try:
        for name in graph_tables(log, "main"):
            log.execute(f"DROP TABLE main.{name}")
        done = log.execute(
            "SELECT 1 FROM embrasure_schema WHERE version = ?", (migrations.GRAPH_FILE,)
        ).fetchone()
        if record and done is None:
            migration = next(m for m in migrations.MIGRATIONS if m.version == migrations.GRAPH_FILE)
            migrations.record(log.execute, migration, now)
        log.execute("COMMIT")
    except BaseException:
        if log.in_transaction:
            log.execute("ROLLBACK")
        raise


def new_graph(graph: sqlite3.Connection) -> None:
    """A log without its graph's file (a new database's first start, or the file
    deleted): an empty graph, which the projector fills from the log."""
    graph.execute("BEGIN IMMEDIATE")
    try:
        if not has_graph(graph):
            create_graph(graph)
        graph.execute("COMMIT")
    except BaseException:
        graph.execute("ROLLBACK")
        raise


def backup_file(source_path: str, path: str) -> None:
    """A consistent copy of one file, as of one moment, at ``path`` (the store's
    ``backup``): the file appears only once complete."""
    # SQLite's online backup API (https://www.sqlite.org/backup.html) in ONE step
    # (pages=-1): every page is copied inside one read transaction, which in WAL mode
    # neither blocks the server's writers nor sees their later commits: a snapshot.
    # Copied in several steps, each write by another connection would restart the
    # copy, which under a steady ingest load may never finish.
    partial = f"{path}.partial-{os.getpid()}"
    source = dest = None
    try:
        source = sqlite3.connect(source_path)
        source.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        dest = sqlite3.connect(partial, isolation_level=None)
        source.backup(dest)
        # The copy's header says WAL, like the source's. A backup's file is a file to
        # move around and open anywhere: rollback-journal mode needs no -wal/-shm
        # beside it. Embrasure switches it back to WAL when it opens it.
        dest.execute("PRAGMA journal_mode = DELETE")
        dest.close()
        dest = None
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, path)
        directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"backup of {source_path} to {path} failed: {exc}") from exc
    finally:
        for conn in (source, dest):
            if conn is not None:
                conn.close()
        for leftover in (partial, partial + "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
