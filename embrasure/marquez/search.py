"""Marquez's search (``GET /api/v1/search``, its SearchResource and SearchDao; and
``/api/v2beta/search/{jobs,datasets}``, its OpenSearch-backed v2beta SearchResource;
docs/marquez.md#search), from Embrasure's search (query/search.py).

``/api/v1/search?q=&filter=&sort=&limit=&namespace=&before=&after=``: datasets and jobs
whose name holds ``q`` (any case), as Marquez's ``ILIKE '%q%'``: a dataset under each of
its identities whose name holds ``q`` (Marquez's rows), a job under its
Marquez name. ``filter`` DATASET or JOB;
``sort`` NAME (default) or UPDATE_AT (newest first); ``limit`` default 10;
``namespace``, and ``before``/``after`` dates (YYYY-MM-DD) on ``updatedAt``. Marquez
reads ``%`` and ``_`` in ``q`` as SQL wildcards; here they match themselves, so a query
matches at most what Marquez's would.

``/api/v2beta/search/…?q=``: Marquez answers 503 unless OpenSearch is configured; here
the same search answers in the shape marquez-web reads (web/src/types/api.ts
``OpenSearchResultJobs`` / ``OpenSearchResultDatasets``): per hit the latest run's id
and state, the job's type and ``sourceCode`` facet, or the dataset's ``schema`` and
``columnLineage`` facets, and a highlight of the match in the name (``<em>``).
"""

from __future__ import annotations

import datetime
import html
import re
import string
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez import names
from embrasure.marquez.http import bad_request, route
from embrasure.marquez.model import enum_param, instant, whole
from embrasure.model import DatasetId, JobId
from embrasure.projector.graph_rows import entity
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph
from embrasure.query.search import search
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import RunRow
from embrasure.web.auth import requires
from embrasure.web.responses import answer

MAX_HITS = 1000  # what one search reads at most (Embrasure's page cap)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def hits(graph: Graph, q: str) -> list[tuple[DatasetId | JobId, str]]:
    """Datasets and jobs whose name holds ``q``, with the time of their latest event
    (key): a dataset under each of its identities whose name holds it (a symlinked path
    and its table, as Marquez's rows are), a job once."""
    found: list[tuple[DatasetId | JobId, str]] = []
    for result in search(graph.reader, q, 0, MAX_HITS):
        node = result["node"]
        if node["type"] == "field":
            continue
        if node["type"] == "dataset":
            d = DatasetId(node["namespace"], node["name"])
            keys = [
                e.last[0]
                for direction in ("in", "out")
                for e in graph.edges_of_datasets([d], direction)
                if e.last is not None
            ]
            alias = result.get("alias")
            matched = DatasetId(alias["namespace"], alias["name"]) if alias else d
            found += [(shown, max(keys, default="")) for shown in _named(graph, d, matched, q)]
        else:
            # As the job's Job answers updatedAt (jobs.py): its runs' and its edges'
            # latest, so a service (edges, no runs) has one too.
            job = JobId(node["namespace"], node["name"])
            runs = graph.reader.runs_of_job((job.namespace, job.name), None, 1)
            keys = [
                e.last[0]
                for direction in ("in", "out")
                for e in graph.edges_of_jobs([job], direction)
                if e.last is not None
            ]
            found.append((job, max([*keys, *(r.latest_key for r in runs)], default="")))
    return found


def _named(graph: Graph, node: DatasetId, matched: DatasetId, q: str) -> list[DatasetId]:
    """The identities of ``node`` a search for ``q`` lists: those whose name holds
    ``q`` (ASCII letters in any case, as query/search.py matches) in a namespace the
    reader may see; at least the one the search matched."""
    wanted = q.translate(_ASCII_LOWER)
    named = [
        m
        for m in graph.ids.members([node])[node]
        if graph.hidden.may_name(m.namespace) and wanted in m.name.translate(_ASCII_LOWER)
    ]
    return named or [matched]


def _date(request: Request, name: str) -> str | None:
    text = request.query_params.get(name)
    if not text:
        return None
    if not _DATE.fullmatch(text):
        raise bad_request(f"query param {name} must match YYYY-MM-DD")
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise bad_request(f"query param {name} is not a date: {text}") from None
    return text


def _q(request: Request) -> str:
    q = (request.query_params.get("q") or "").strip()
    if not q:
        raise bad_request("query param q must not be blank")
    return q


class SearchRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def search(self, request: Request) -> Response:
        q = _q(request)
        kind = enum_param(request.query_params.get("filter") or "")
        if kind not in ("", "DATASET", "JOB"):
            raise bad_request("query param filter must be DATASET or JOB")
        sort = enum_param(request.query_params.get("sort") or "NAME")
        if sort not in ("NAME", "UPDATE_AT"):
            raise bad_request("query param sort must be NAME or UPDATE_AT")
        namespace = request.query_params.get("namespace")
        before, after = _date(request, "before"), _date(request, "after")
        limit = whole(request, "limit", 10, MAX_HITS)

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            found = hits(graph, q)
            served = names.marquez_names(reader, [n for n, _ in found if isinstance(n, JobId)])
            kept: list[tuple[str, str, str, str]] = []  # (type, namespace, name, key)
            for node, key in found:
                what = "JOB" if isinstance(node, JobId) else "DATASET"
                day = key[:10]
                if (kind and kind != what) or (namespace and node.namespace != namespace):
                    continue
                # Marquez's updated_at < before and >= after, by day.
                if (before and not (key and day < before)) or (after and not day >= after):
                    continue
                name = served[node] if isinstance(node, JobId) else node.name
                kept.append((what, node.namespace, name, key))
            if sort == "NAME":
                kept.sort(key=lambda k: (k[2], k[1]))
            else:
                kept.sort(key=lambda k: k[3], reverse=True)
            results = [
                {
                    "type": what,
                    "name": name,
                    "updatedAt": instant(key),
                    "namespace": ns,
                    "nodeId": f"{what.lower()}:{ns}:{name}",
                }
                for what, ns, name, key in kept[:limit]
            ]
            return {"totalCount": len(results), "results": results}

        return await answer(self.store, work)

    async def v2beta_jobs(self, request: Request) -> Response:
        q = _q(request)

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            jobs = [n for n, _ in hits(graph, q) if isinstance(n, JobId)]
            served = names.marquez_names(reader, jobs)
            facets = facets_of_groups(
                reader, {j: [entity("job", j.namespace, j.name)] for j in jobs}
            )
            kinds = graph.job_types(jobs)
            out = []
            for job in jobs:
                latest = reader.runs_of_job((job.namespace, job.name), None, 1)
                run = latest[0] if latest else None
                run_facets = _run_facets(reader, run)
                hit: dict[str, Any] = {
                    "run_id": run.run_id if run else None,
                    "name": served[job],
                    "namespace": job.namespace,
                    "eventType": run.state if run else None,  # OpenLineage's word
                    "type": "SERVICE" if kinds[job] == "service" else "BATCH",
                    "runFacets": run_facets,
                }
                if "sourceCode" in facets[job]:
                    hit["facets"] = {"sourceCode": facets[job]["sourceCode"]}
                out.append(hit)
            return {"hits": out, "highlights": [_highlight(str(h["name"]), q) for h in out]}

        return await answer(self.store, work)

    async def v2beta_datasets(self, request: Request) -> Response:
        q = _q(request)

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            datasets = [n for n, _ in hits(graph, q) if isinstance(n, DatasetId)]
            members = graph.ids.members(datasets)
            groups = {
                d: [entity("dataset", m.namespace, m.name) for m in members[d]] for d in datasets
            }
            facets = facets_of_groups(reader, groups, names=("schema", "columnLineage"))
            out = []
            for d in datasets:
                writers = [
                    use
                    for m in members[d]
                    for use in reader.runs_of_dataset((m.namespace, m.name), "out", None, 1)
                ]
                latest = max(writers, key=lambda u: (u.run_key, u.run_id), default=None)
                run = reader.rows(RunRow, ("run_id",), [(latest.run_id,)])[0] if latest else None
                out.append(
                    {
                        "run_id": run.run_id if run else None,
                        "name": d.name,
                        "namespace": d.namespace,
                        "eventType": run.state if run else None,  # OpenLineage's word
                        "facets": facets[d],
                    }
                )
            return {"hits": out, "highlights": [_highlight(str(h["name"]), q) for h in out]}

        return await answer(self.store, work)


def _run_facets(reader: GraphReader, run: RunRow | None) -> dict[str, Any]:
    if run is None:
        return {}
    groups = {run.run_id: [entity("run", run.run_id)]}
    return facets_of_groups(reader, groups, honour_deleted=False)[run.run_id]


def _highlight(name: str, q: str) -> dict[str, list[str]]:
    """OpenSearch's highlight of the match: ``<em>`` around it (case kept)."""
    at = name.lower().find(q.lower())
    if at < 0:
        return {}
    text = html.escape(name[:at]) + "<em>" + html.escape(name[at : at + len(q)]) + "</em>"
    return {"name": [text + html.escape(name[at + len(q) :])]}


def routes(store: Store) -> list[BaseRoute]:
    api = SearchRoutes(store)
    read = requires("read")
    return [
        route("/search", read(api.search)),
        route("/search/jobs", read(api.v2beta_jobs), api="v2beta"),
        route("/search/datasets", read(api.v2beta_datasets), api="v2beta"),
    ]
