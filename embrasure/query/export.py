"""``GET /api/v1/export``: the whole graph as canonical JSON (docs/queries.md#export).

Every part is sorted by identity and free of anything that depends on arrival (delivery
ids, receive times, database ids), so two graphs built from the same set of events in any
order export byte for byte the same: the order-independence check, and a way to diff.

The document is written in pieces of ``CHUNK`` entities, each part's pieces in its sort
order, so its size on the wire is not its size in memory (a 100,000-dataset graph exports
1.2 GB of JSON; built whole it took 7.4 GiB of RSS). The bytes are those of
``orjson.dumps(document, option=OPT_SORT_KEYS)``: compact, keys sorted at every level.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import AsyncGenerator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from embrasure.model import DatasetId, JobId
from embrasure.query.columns import _column_order, column_edge_json, column_edges_of
from embrasure.query.entities import Identities, dataset_view, job_view, node_id, run_views
from embrasure.query.graph import Graph, MergedEdge
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import ColumnEdgeRow, DatasetRow, JobRow, RunRow

CHUNK = 1000


def _pieces(items: Iterable[Any]) -> Iterator[bytes]:
    """A JSON array's elements, ``CHUNK`` at a time, each piece starting with its comma."""
    batch: list[bytes] = []
    first = True
    for item in items:
        batch.append(orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
        if len(batch) == CHUNK:
            yield (b"" if first else b",") + b",".join(batch)
            first, batch = False, []
    if batch:
        yield (b"" if first else b",") + b",".join(batch)


def _chunked(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def export_chunks(reader: GraphReader) -> Iterator[bytes]:
    """The export document in pieces; joined, they are ``export_bytes``."""
    graph = Graph(reader)
    ids = graph.ids
    assert isinstance(ids, Identities)  # the served graph's (no asOf)
    identities = [DatasetId(r.ns, r.name) for r in reader.rows(DatasetRow)]
    canonical = ids.canonical(identities)
    # What admins hid is left out, with every edge and run through it (hidden.py).
    hidden: set[DatasetId | JobId] = set(graph.hidden.datasets_hidden(canonical.values()))
    hidden |= {j for r in reader.rows(JobRow) if graph.hidden.job(j := JobId(r.ns, r.name))}
    nodes = sorted(n for n in set(canonical.values()) if n not in hidden)
    jobs = sorted(j for r in reader.rows(JobRow) if (j := JobId(r.ns, r.name)) not in hidden)
    runs = [r for r in reader.rows(RunRow) if JobId(r.job_ns, r.job_name) not in hidden]

    # Top-level keys in sorted order, as OPT_SORT_KEYS writes them.
    yield b'{"column_edges":['
    yield from _pieces(_column_edges(graph, reader))
    yield b'],"datasets":['
    yield from _pieces(dataset_view(reader, ids, n) for n in nodes)
    yield b'],"edges":['
    yield from _pieces(_edges(graph, nodes, jobs, hidden))
    yield b'],"jobs":['
    yield from _pieces(_job_view(reader, j) for j in jobs)
    yield b'],"runs":['
    # A page of runs at a time: run_views reads a page in a few queries.
    yield from _pieces(view for page in _chunked(runs) for view in run_views(reader, page, ids=ids))
    yield b"]}"


def _job_view(reader: GraphReader, job: JobId) -> dict[str, Any]:
    view = job_view(reader, job)
    view.pop("latest_run")  # arrival-free but redundant with runs
    return view


def _column_edges(graph: Graph, reader: GraphReader) -> Iterator[dict[str, Any]]:
    """Column edges in (source, source field, target, target field, job) order: by
    source field, a chunk of source fields at a time."""
    sources = reader.distinct(ColumnEdgeRow, ("src_ns", "src_name", "src_field"))
    canonical = graph.ids.canonical({DatasetId(ns, name) for ns, name, _ in sources})
    fields = sorted({(canonical[DatasetId(ns, name)], f) for ns, name, f in sources})
    for chunk in _chunked(fields):
        found = column_edges_of(graph, chunk, "src")
        for edge, span in sorted(found, key=lambda e: _column_order(e[0].key)):
            yield column_edge_json(graph, edge, span)


def _edges(
    graph: Graph, nodes: list[DatasetId], jobs: list[JobId], hidden: set[DatasetId | JobId]
) -> Iterator[dict[str, Any]]:
    """Dataset edges in (source id, target id, static) order. Every 'dataset:' id sorts
    before every 'job:' and 'service:' one, so the edges into jobs come first, by dataset,
    then the edges out of jobs, by job."""
    by_id = sorted(nodes, key=lambda n: node_id("dataset", n.namespace, n.name))
    for chunk in _chunked(by_id):
        yield from _sorted_json(graph, graph.edges_of_datasets(chunk, "in"), hidden)
    kinds = graph.job_types(jobs)
    by_id_jobs = sorted(jobs, key=lambda j: node_id(kinds[j], j.namespace, j.name))
    for jobs_chunk in _chunked(by_id_jobs):
        yield from _sorted_json(graph, graph.edges_of_jobs(jobs_chunk, "out"), hidden)


def _sorted_json(
    graph: Graph, edges: list[MergedEdge], hidden: set[DatasetId | JobId]
) -> list[dict[str, Any]]:
    shown = [e for e in edges if e.job not in hidden and e.dataset not in hidden]
    return sorted(graph.edge_json(shown), key=lambda e: (e["source"], e["target"], e["static"]))


def export_bytes(reader: GraphReader) -> bytes:
    return b"".join(export_chunks(reader))


# -- over HTTP --------------------------------------------------------------------------

# One export at a time, on one thread: the read snapshot (a connection in a transaction)
# stays on the thread that opened it, and two concurrent exports would only share the
# same CPU and double the memory.
_EXPORTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embrasure-export")
_DONE = object()


async def open_export(store: Store) -> AsyncGenerator[bytes, None]:
    """The export's pieces as the export thread makes them; at most a few wait for a
    slow client. Raises StoreUnavailable here, before the first piece is sent, when the
    snapshot cannot be opened, so the caller can still answer 503."""
    pieces = _produced(store)
    first = await anext(pieces)

    async def rest() -> AsyncGenerator[bytes, None]:
        try:
            yield first
            async for piece in pieces:
                yield piece
        finally:
            await pieces.aclose()  # the client went away: stop the export thread

    return rest()


async def _produced(store: Store) -> AsyncGenerator[bytes, None]:
    pieces: queue.Queue[object] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                pieces.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            with store.reader() as reader:
                for piece in export_chunks(reader):
                    if not offer(piece):
                        return
            offer(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            offer(exc)

    def take() -> object:
        # With a timeout: a consumer cancelled while waiting must not leave a thread
        # blocked here forever once the producer has stopped.
        while True:
            try:
                return pieces.get(timeout=0.5)
            except queue.Empty:
                if stop.is_set():
                    return _DONE

    # The export thread is not the request's: it reads in a copy of the request's
    # context, which holds what the reader may see (access/grants.py READING).
    _EXPORTER.submit(contextvars.copy_context().run, produce)
    try:
        while (piece := await run_in_threadpool(take)) is not _DONE:
            if isinstance(piece, BaseException):
                raise piece
            assert isinstance(piece, bytes)
            yield piece
    finally:
        stop.set()
