"""The sizes part of bench/storage.py: what a graph and its log take on disk.

One data set at a time is POSTed to a fresh ``embrasure serve`` (receiver and projector,
as users run it) on a new database, the harness waits until the projector has caught up
(``/api/v1/overview``'s backlog at zero), stops the server, and reads the bytes of every
table and index: SQLite's ``dbstat`` (after a WAL checkpoint, so the main file is the
whole database), PostgreSQL's ``pg_table_size`` per table (heap, TOAST, maps) and
``pg_relation_size`` per index, partitions counted under their parent. The raw JSON bytes
are the bodies of the deliveries the server stored (202 and not a duplicate): a refused
body or a re-sent one costs the log nothing, so it is not counted as input either.

Data sets: ``bench`` (bench/projection.py's platform: 500 hourly Spark jobs, ~4.7 KB
events in 500-event batches), ``corpus`` (the shared OpenLineage corpus through
tests/corpus.py, one event per POST as integrations send them) and ``platform``
(bench/query.py's column-heavy platform, ~10.6 KB events in ~200-event batches).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import query
import servers

BENCH_DIR = Path(__file__).resolve().parent
TESTS_DIR = BENCH_DIR.parent / "tests"
SINGLE_PATH = "/api/v1/lineage"
BATCH_PATH = "/api/v1/lineage/batch"
JSON = {"content-type": "application/json"}
DATASETS = ("bench", "corpus", "platform")
BACKENDS = ("sqlite", "postgresql")
PLATFORM_TASKS_PER_BODY = 180  # bench/query.py's tasks average ~1.1 events: ~200 a body

# Object names that are neither the graph (g<generation>_…) nor the log: the schema's
# bookkeeping, tokens, SQLite's own tables. Everything else is the log (the deliveries,
# their indexes and totals, and whatever the log keeps beside its bodies).
_GRAPH = re.compile(r"^(sqlite_autoindex_)?g\d+_")
_META = re.compile(
    r"^(sqlite_autoindex_)?(graph_meta|embrasure_schema|tokens)|^sqlite_(schema|sequence|stat)"
)


# The body storage: the bodies' own table and the dictionaries they were compressed with
# (since the compressed log); before it, the bodies lived in the deliveries rows.
_BODIES = re.compile(r"^(sqlite_autoindex_)?(delivery_bodies|log_dictionaries)")


def group_of(name: str) -> str:
    if _GRAPH.match(name):
        return "graph"
    return "meta" if _META.match(name) else "log"


# -- the data sets ----------------------------------------------------------------------


def bench_bodies(events: int) -> Iterator[tuple[str, bytes]]:
    import projection  # imports embrasure: only when this data set is wanted

    for body, _ in projection.batch_bodies(projection.Platform(), 0, events, 500):
        yield BATCH_PATH, body


def corpus_bodies() -> Iterator[tuple[str, bytes]]:
    """Every event of the corpus's event files, as tests/corpus.py makes them sendable."""
    import orjson
    import pytest

    sys.path.insert(0, str(TESTS_DIR))
    import corpus

    for entry in corpus.EVENT_FILES:
        try:
            events = corpus.load(entry)
        except pytest.skip.Exception:  # a format tests/corpus.py does not read
            continue
        for event in events:
            yield SINGLE_PATH, orjson.dumps(event)


def platform_bodies(scale: float) -> Iterator[tuple[str, bytes]]:
    platform = query.Platform(scale)
    tasks = platform.tasks
    for start in range(0, len(tasks), PLATFORM_TASKS_PER_BODY):
        bodies, _ = platform.bodies(tasks[start : start + PLATFORM_TASKS_PER_BODY], 200)
        for body in bodies:
            yield BATCH_PATH, body


def bodies_of(dataset: str, events: int, scale: float) -> Iterator[tuple[str, bytes]]:
    if dataset == "bench":
        return bench_bodies(events)
    if dataset == "corpus":
        return corpus_bodies()
    return platform_bodies(scale)


# -- loading --------------------------------------------------------------------------


async def _post_all(url: str, bodies: Iterable[tuple[str, bytes]], clients: int) -> dict[str, Any]:
    """POST every body (``clients`` at a time), retrying 429/503 as a producer would;
    count what the log stored: raw bytes and events of accepted, non-duplicate bodies."""
    source = iter(bodies)
    statuses: Counter[str] = Counter()
    stored = {"deliveries": 0, "events": 0, "invalid_events": 0, "raw_bytes": 0, "duplicates": 0}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        for path, body in source:  # one shared iterator: each body goes to one worker
            for attempt in range(30):
                response = await client.post(path, content=body, headers=JSON)
                if response.status_code not in (429, 503) or attempt == 29:
                    break
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            statuses[str(response.status_code)] += 1
            if response.status_code != 202:
                continue
            receipt = response.json()
            if receipt["duplicate"]:
                stored["duplicates"] += 1
                continue
            stored["deliveries"] += 1
            stored["events"] += receipt["item_count"]
            stored["invalid_events"] += receipt["invalid_item_count"]
            stored["raw_bytes"] += len(body)

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    return {"statuses": dict(statuses), **stored}


def wait_projected(url: str, timeout_s: float) -> float:
    """Seconds until the overview's backlog is empty (every delivery projected)."""
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=30) as client:
        while time.monotonic() - started < timeout_s:
            backlog = client.get("/api/v1/overview", params={"runs": 0}).json()["backlog"]
            if backlog["deliveries"] == 0 and backlog["items"] == 0:
                return time.monotonic() - started
            time.sleep(0.5)
    raise RuntimeError(f"the projector did not catch up within {timeout_s:.0f} s")


# -- what it takes --------------------------------------------------------------------


def sqlite_objects(db: Path) -> dict[str, Any]:
    """Bytes per table and index (dbstat), the files, and their free pages: the log's
    file and, from migration 17, the graph's beside it."""
    objects: dict[str, Any] = {}
    free_bytes, auto_vacuum = 0, -1
    for file in (db, Path(f"{db}-graph")):
        if not file.exists():
            continue
        conn = sqlite3.connect(file)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            rows = conn.execute(
                "SELECT name, SUM(pgsize) FROM dbstat WHERE aggregate = TRUE GROUP BY name"
            ).fetchall()
            kinds = dict(conn.execute("SELECT name, type FROM sqlite_schema").fetchall())
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            free_bytes += conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size
            auto_vacuum = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
        finally:
            conn.close()
        for name, size in rows:
            if name in ("sqlite_schema", "sqlite_master") and name in objects:
                objects[name]["bytes"] += int(size)  # each file has one
            else:
                objects[str(name)] = {"kind": kinds.get(name, "index"), "bytes": int(size)}
    files = query.db_files(db)
    return {
        "objects": objects,
        "file_bytes": files["main"] + files["wal"],
        "free_bytes": free_bytes,
        "auto_vacuum": {0: "none", 1: "full", 2: "incremental"}.get(auto_vacuum, auto_vacuum),
    }


PG_OBJECTS = """
SELECT c.relname, c.relkind, COALESCE(parent.relname, c.relname),
       CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid) ELSE pg_table_size(c.oid) END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class parent ON parent.oid = i.inhparent
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 'm')
"""


def postgres_objects(url: str) -> dict[str, Any]:
    """Bytes per table (pg_table_size: heap, TOAST, maps) and index (pg_relation_size),
    a partition's under its parent's name; and pg_database_size (catalogs included)."""
    objects: dict[str, dict[str, Any]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for _name, relkind, owner, size in conn.execute(PG_OBJECTS).fetchall():
            entry = objects.setdefault(
                str(owner), {"kind": "index" if relkind == "i" else "table", "bytes": 0}
            )
            entry["bytes"] += int(size)
            entry["parts"] = entry.get("parts", 0) + 1
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    database = int(row[0]) if row else 0
    return {"objects": objects, "file_bytes": database, "free_bytes": None, "auto_vacuum": None}


def summarise_objects(found: dict[str, Any], raw_bytes: int) -> dict[str, Any]:
    groups = {"log": 0, "graph tables": 0, "graph indexes": 0, "meta": 0}
    for name, obj in found["objects"].items():
        group = group_of(name)
        if group == "graph":
            group = "graph indexes" if obj["kind"] == "index" else "graph tables"
        obj["group"] = group
        groups[group] += obj["bytes"]
    graph = groups["graph tables"] + groups["graph indexes"]
    bodies = sum(o["bytes"] for n, o in found["objects"].items() if _BODIES.match(n))
    if not bodies:  # a log that keeps its bodies in the deliveries rows (bb41eaa)
        bodies = found["objects"].get("deliveries", {}).get("bytes", 0)
    return found | {
        "groups": groups,
        "raw_bytes": raw_bytes,
        "body_bytes": bodies,
        "body_ratio": bodies / raw_bytes if raw_bytes else None,
        "log_ratio": groups["log"] / raw_bytes if raw_bytes else None,
        "graph_ratio": graph / raw_bytes if raw_bytes else None,
        "db_ratio": found["file_bytes"] / raw_bytes if raw_bytes else None,
    }


# -- one measurement ------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(backend: str, work: Path) -> Iterator[tuple[str, Path | None]]:
    """(URL, SQLite path or None) of a new empty database."""
    if backend == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="sizes-", dir=work))
        try:
            yield f"sqlite:///{directory / 'sizes.db'}", directory / "sizes.db"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    import backends  # its database(): a new PostgreSQL database, dropped afterwards

    with backends.database("postgresql", work) as url:
        yield url, None


def measure(
    dataset: str,
    backend: str,
    source: Path,
    work: Path,
    *,
    events: int,
    scale: float,
    clients: int = 4,
    timeout_s: float = 3600.0,
) -> dict[str, Any]:
    """Load ``dataset`` into a new ``backend`` database with the server of ``source``,
    wait for the projection, and return the bytes by table and index."""
    with fresh_database(backend, work) as (url, db):
        server = servers.start_embrasure(work, db, source, projector=True, db_url=url)
        try:
            started = time.monotonic()
            loaded = asyncio.run(_post_all(server.url, bodies_of(dataset, events, scale), clients))
            load_s = time.monotonic() - started
            projected_s = wait_projected(server.url, timeout_s)
        finally:
            exit_code = server.stop()
        found = sqlite_objects(db) if db is not None else postgres_objects(url)
    problems = [f"HTTP {s}: {n}" for s, n in loaded["statuses"].items() if s != "202"]
    if dataset != "corpus" and problems:  # the corpus holds invalid-on-purpose files
        raise RuntimeError(f"{dataset} on {backend}: not every body was stored: {problems}")
    return summarise_objects(found, loaded["raw_bytes"]) | {
        "dataset": dataset,
        "backend": backend,
        "load": loaded | {"seconds": load_s},
        "projected_after_load_s": projected_s,
        "server_exit_code": exit_code,
        "refused": problems,
    }
