"""Read handlers (docs/queries.md): parse query parameters, open one store snapshot, shape JSON.

Handlers run their store work in the thread pool (SQLite calls block). Entities are named
by query parameters (``namespace=``, ``name=``, ``field=``), never by path segments,
since namespaces hold colons and slashes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from embrasure.model import DatasetId, JobId
from embrasure.query.as_of import AsOfGraph
from embrasure.query.columns import column_lineage, known_field
from embrasure.query.dataset_runs import USE_ROLES, dataset_runs, writer_runs
from embrasure.query.entities import (
    LISTED_CHILDREN,
    Identities,
    child_runs,
    dataset_view,
    ingest_totals,
    job_view,
    run_summary,
    run_view,
    run_views,
)
from embrasure.query.export import open_export
from embrasure.query.graph import Graph
from embrasure.query.hidden import Hidden, unreadable
from embrasure.query.impact import impact
from embrasure.query.lineage import lineage
from embrasure.query.quality import mark_failed
from embrasure.query.search import search
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import DatasetRow, JobRow, RunRow, table_of
from embrasure.web.auth import requires
from embrasure.web.params import (
    MAX_DEPTH,
    MAX_LIMIT,
    TEXT_CURSOR,
    TEXT_PAIR_CURSOR,
    TEXT_TRIPLE_CURSOR,
    WHOLE_CURSOR,
    bad,
    choice,
    decode_cursor,
    encode_cursor,
    integer,
    not_found,
    required,
    run_states,
    time_param,
)
from embrasure.web.read_bounds import heavy
from embrasure.web.responses import answer

Listed = TypeVar("Listed", DatasetRow, JobRow)  # the (ns, name)-keyed listings


class ReadApi:
    """The graph's read routes (the log's own views are in deliveries.py)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def export(self, request: Request) -> Response:
        pieces = await open_export(self.store)
        return StreamingResponse(pieces, media_type="application/json")

    # -- entities ----------------------------------------------------------------------

    async def get_run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"].lower()

        def work(reader: GraphReader) -> Any:
            rows = reader.rows(RunRow, ("run_id",), [(run_id,)])
            unknown = f"No run {run_id!r} is known."
            if not rows:
                raise not_found(unknown)
            _shown(Hidden.of(reader), _job_of(rows[0]), unknown)
            return run_view(reader, rows[0])

        return await answer(self.store, work)

    async def run_children(self, request: Request) -> Response:
        run_id = request.path_params["run_id"].lower()

        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            after = decode_cursor(request, TEXT_PAIR_CURSOR)
            hidden = Hidden.of(reader)
            parent = reader.rows(RunRow, ("run_id",), [(run_id,)])
            unknown = f"No run {run_id!r} is known, nor any child of it."
            if parent:
                _shown(hidden, _job_of(parent[0]), unknown)
            page = child_runs(reader, run_id, after, limit, lambda r: not hidden.job(_job_of(r)))
            if page is None:
                raise not_found(unknown)
            runs, last = page
            return {"runs": runs, "next_cursor": encode_cursor(last) if last else None}

        return await answer(self.store, work)

    async def list_runs(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            kind = choice(request, "type", "job", ("job", "dataset"))
            namespace, name = required(request, "namespace", "name")
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            before = decode_cursor(request, TEXT_PAIR_CURSOR)
            if kind == "dataset":
                return _writer_runs(reader, DatasetId(namespace, name), before, limit)
            _shown(Hidden.of(reader), JobId(namespace, name))
            rows = reader.runs_of_job(
                (namespace, name), tuple(before) if before else None, limit + 1
            )
            if not rows and not reader.rows(JobRow, ("ns", "name"), [(namespace, name)]):
                raise not_found(f"No job {namespace} {name} is known.")
            last = rows[limit - 1] if len(rows) > limit else None
            return {
                "runs": run_views(reader, rows[:limit], LISTED_CHILDREN),
                "next_cursor": encode_cursor([last.latest_key, last.run_id]) if last else None,
            }

        return await answer(self.store, work)

    async def dataset_runs(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            namespace, name = required(request, "namespace", "name")
            role = request.query_params.get("role")
            if role is not None:
                role = choice(request, "role", "output", USE_ROLES)
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            before = decode_cursor(request, TEXT_TRIPLE_CURSOR)
            ids = Identities(reader)
            hidden = Hidden(reader, ids)
            node = _shown_dataset(reader, ids, hidden, DatasetId(namespace, name))
            members = ids.members([node])[node]
            runs, last = dataset_runs(
                reader,
                members,
                role,
                tuple(before) if before else None,
                limit,
                lambda r: not hidden.job(_job_of(r)),
            )
            return {"runs": runs, "next_cursor": encode_cursor(list(last)) if last else None}

        return await answer(self.store, work)

    async def list_datasets(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            ids = Identities(reader)
            hidden = Hidden(reader, ids)
            namespace = request.query_params.get("namespace")
            name = request.query_params.get("name")
            if namespace is not None and name is not None:
                node = _shown_dataset(reader, ids, hidden, DatasetId(namespace, name))
                return {"datasets": [dataset_view(reader, ids, node)], "next_cursor": None}
            return self._page(
                reader,
                request,
                DatasetRow,
                namespace,
                lambda r: _canonical_only(ids, r) and not hidden.dataset(DatasetId(r.ns, r.name)),
                lambda r: dataset_view(reader, ids, DatasetId(r.ns, r.name)),
            )

        return await answer(self.store, work)

    async def list_jobs(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            hidden = Hidden.of(reader)
            namespace = request.query_params.get("namespace")
            name = request.query_params.get("name")
            if namespace is not None and name is not None:
                _shown_job(reader, hidden, JobId(namespace, name))
                return {"jobs": [job_view(reader, JobId(namespace, name))], "next_cursor": None}
            return self._page(
                reader,
                request,
                JobRow,
                namespace,
                lambda r: not hidden.job(JobId(r.ns, r.name)),
                lambda r: job_view(reader, JobId(r.ns, r.name)),
            )

        return await answer(self.store, work)

    def _page(
        self,
        reader: GraphReader,
        request: Request,
        table: type[Listed],
        namespace: str | None,
        keep: Callable[[Listed], bool],
        shape: Callable[[Listed], Any],
    ) -> dict[str, Any]:
        limit = integer(request, "limit", 100, 1, MAX_LIMIT)
        q = request.query_params.get("q")
        after = decode_cursor(request, TEXT_PAIR_CURSOR)
        out: list[Any] = []
        cursor = tuple(after) if after else None
        while len(out) < limit:
            rows = reader.page(table, cursor, limit + 1, namespace, q)
            if not rows:
                cursor = None
                break
            for r in rows:
                cursor = (r.ns, r.name)
                if keep(r):
                    out.append(shape(r))
                    if len(out) == limit:
                        break
            if len(rows) <= limit and len(out) < limit:
                cursor = None
                break
        return {
            table_of(table): out,
            "next_cursor": encode_cursor(list(cursor)) if cursor else None,
        }

    # -- graphs ------------------------------------------------------------------------

    async def lineage(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            kind = choice(request, "type", "dataset", ("dataset", "job", "service"))
            namespace, name = required(request, "namespace", "name")
            direction = choice(request, "direction", "both", ("upstream", "downstream", "both"))
            depth = integer(request, "depth", 5, 0, MAX_DEPTH)
            limit = integer(request, "limit", 500, 1, 10_000)
            states = run_states(request)
            as_of = time_param(request, "asOf")
            graph = Graph(reader) if as_of is None else AsOfGraph(reader, as_of)
            root: DatasetId | JobId
            if kind == "dataset":
                root = DatasetId(namespace, name)
                _shown_dataset(reader, Identities(reader), graph.hidden, root)
            else:
                root = JobId(namespace, name)
                _shown_job(reader, graph.hidden, root, kind)
            found = lineage(graph, root, direction, depth, states, limit)
            if as_of is None:  # the checks kept are the current ones: no mark at an instant
                assert isinstance(graph.ids, Identities)
                mark_failed(reader, graph.ids, found["nodes"])
            return found

        return await answer(self.store, work)

    async def column_lineage(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            namespace, name, field = required(request, "namespace", "name", "field")
            direction = choice(request, "direction", "both", ("upstream", "downstream", "both"))
            depth = integer(request, "depth", 5, 0, MAX_DEPTH)
            limit = integer(request, "limit", 500, 1, 10_000)
            kinds = set((request.query_params.get("kinds") or "mapping,indirect").split(","))
            if not kinds <= {"mapping", "indirect"}:
                raise bad("kinds is a comma-separated list of mapping, indirect")
            root = DatasetId(namespace, name)
            ids = Identities(reader)
            _shown_dataset(reader, ids, Hidden(reader, ids), root)
            known_field(reader, ids, root, field)
            return column_lineage(reader, root, field, direction, depth, kinds, limit)

        return await answer(self.store, work)

    async def impact(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            namespace, name = required(request, "namespace", "name")
            field = request.query_params.get("field")
            depth = integer(request, "depth", 5, 0, MAX_DEPTH)
            limit = integer(request, "limit", 1_000, 1, 10_000)
            root = DatasetId(namespace, name)
            ids = Identities(reader)
            _shown_dataset(reader, ids, Hidden(reader, ids), root)
            if field is not None:
                known_field(reader, ids, root, field)
            found = impact(reader, root, field, depth, limit)
            mark_failed(reader, ids, [item["node"] for item in found["items"]])
            return found

        return await answer(self.store, work)

    async def overview(self, request: Request) -> Response:
        """The web UI's home page: ingest counters, the projection backlog, recent runs."""

        def work(reader: GraphReader) -> Any:
            recent = integer(request, "runs", 10, 0, 100)
            totals = ingest_totals(reader)
            # A run has a START and a COMPLETE, often more: ask for a few events per run.
            ids = reader.recent_run_ids(recent * 4)[:recent]
            hidden = Hidden.of(reader)
            rows = {
                r.run_id: r
                for r in reader.rows(RunRow, ("run_id",), [(i,) for i in ids])
                if not hidden.job(_job_of(r))
            }
            return {
                "deliveries": totals.deliveries,
                "items": totals.items,
                "backlog": {"deliveries": totals.deliveries["accepted"], "items": totals.pending},
                "recent_runs": [run_summary(rows[i]) for i in ids if i in rows],
            }

        return await answer(self.store, work)

    async def namespaces(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            after = decode_cursor(request, TEXT_CURSOR)
            hidden = Hidden.of(reader).namespaces
            rows = [
                r
                for r in reader.namespaces(after, limit + 1 + len(hidden))
                if r.namespace not in hidden
            ]
            more = len(rows) > limit
            return {
                "namespaces": [
                    {"name": r.namespace, "datasets": r.datasets, "jobs": r.jobs}
                    for r in rows[:limit]
                ],
                "next_cursor": encode_cursor(rows[limit - 1].namespace) if more else None,
            }

        return await answer(self.store, work)

    async def search(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            (q,) = required(request, "q")
            limit = integer(request, "limit", 20, 1, MAX_LIMIT)
            offset = decode_cursor(request, WHOLE_CURSOR) or 0
            found = search(reader, q, offset, limit)
            more = len(found) > limit
            return {
                "results": found[:limit],
                "next_cursor": encode_cursor(offset + limit) if more else None,
            }

        return await answer(self.store, work)

    def routes(self) -> list[Route]:
        read = requires("read")
        return [
            Route("/api/v1/export", read(heavy(self.export)), methods=["GET"]),
            Route("/api/v1/runs", read(self.list_runs), methods=["GET"]),
            Route("/api/v1/runs/{run_id}", read(self.get_run), methods=["GET"]),
            Route("/api/v1/runs/{run_id}/children", read(self.run_children), methods=["GET"]),
            Route("/api/v1/datasets", read(self.list_datasets), methods=["GET"]),
            Route("/api/v1/datasets/runs", read(self.dataset_runs), methods=["GET"]),
            Route("/api/v1/jobs", read(self.list_jobs), methods=["GET"]),
            Route("/api/v1/lineage", read(heavy(self.lineage)), methods=["GET"]),
            Route("/api/v1/column-lineage", read(heavy(self.column_lineage)), methods=["GET"]),
            Route("/api/v1/impact", read(heavy(self.impact)), methods=["GET"]),
            Route("/api/v1/overview", read(self.overview), methods=["GET"]),
            Route("/api/v1/namespaces", read(self.namespaces), methods=["GET"]),
            Route("/api/v1/search", read(self.search), methods=["GET"]),
        ]


def _writer_runs(
    reader: GraphReader, dataset: DatasetId, before: Any, limit: int
) -> dict[str, Any]:
    """The runs that wrote a dataset (under any of its aliases), newest first, paged
    like a job's runs (query/dataset_runs.py ``writer_runs``)."""
    ids = Identities(reader)
    hidden = Hidden(reader, ids)
    node = _shown_dataset(reader, ids, hidden, dataset)
    members = ids.members([node])[node]
    cursor = None if before is None else (str(before[0]), str(before[1]))
    rows, last = writer_runs(reader, members, cursor, limit, lambda r: not hidden.job(_job_of(r)))
    return {
        "runs": run_views(reader, rows, LISTED_CHILDREN),
        "next_cursor": encode_cursor(list(last)) if last else None,
    }


def _job_of(run: RunRow) -> JobId:
    return JobId(run.job_ns, run.job_name)


def _canonical_only(ids: Identities, row: DatasetRow) -> bool:
    identity = DatasetId(row.ns, row.name)
    return ids.canonical([identity])[identity] == identity


def _shown_dataset(
    reader: GraphReader, ids: Identities, hidden: Hidden, dataset: DatasetId
) -> DatasetId:
    """The canonical node of a dataset named by any identity; 404 when none is known,
    when an admin hid it, or when the reader may not read the namespace of the name it
    asked by or of the node's (query/hidden.py)."""
    node = ids.canonical([dataset])[dataset]
    if not (hidden.readable(dataset.namespace) and hidden.readable(node.namespace)):
        raise not_found(unreadable("dataset", dataset))
    if not reader.rows(DatasetRow, ("ns", "name"), [(node.namespace, node.name)]):
        raise not_found(f"No dataset {dataset.namespace} {dataset.name} is known.")
    _shown(hidden, node)
    return node


def _shown_job(reader: GraphReader, hidden: Hidden, job: JobId, kind: str = "job") -> None:
    """404 when the job is not known, when an admin hid it, or when the reader may not
    read its namespace."""
    if not hidden.readable(job.namespace):
        raise not_found(unreadable(kind, job))
    if not reader.rows(JobRow, ("ns", "name"), [(job.namespace, job.name)]):
        raise not_found(f"No {kind} {job.namespace} {job.name} is known.")
    _shown(hidden, job)


def _shown(hidden: Hidden, node: DatasetId | JobId, unknown: str | None = None) -> None:
    """404 for a node an admin hid, saying so, or one outside the reader's grants, in the
    words of one not there (``unknown``, else hidden.unreadable) (hidden.py)."""
    if hidden and hidden.nodes_hidden([node]):
        if hidden.outside(node):
            kind = "dataset" if isinstance(node, DatasetId) else "job"
            raise not_found(unknown or unreadable(kind, node))
        raise not_found(hidden.why(node))
