"""Marquez's jobs and their runs (its JobResource and RunResource;
docs/marquez.md#jobs-and-runs).

- ``type``: SERVICE for an Embrasure service (docs/projection.md#entities-and-identity),
  STREAM when the jobType facet says ``processingType: STREAMING`` (OpenLineage
  JobTypeJobFacet 2-0-3), else BATCH.
- ``inputs``/``outputs``: the datasets the job's edges read and write (canonical
  identities), runtime and static alike.
- ``latestRun`` and ``latestRuns`` (its ten latest, as Marquez's job listing carries):
  by latest eventTime; ``currentVersion`` the latest run's job version (model.py).
- ``location``: the sourceCodeLocation facet's url; ``description``: the documentation
  facet's; ``simpleName``: the name less its parent job's name and a dot, when it starts
  with them (Airflow's ``dag.task``); ``parentJobName`` from the latest run's parent facet.
- A job's versions are the distinct (inputs, outputs) of its runs, newest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.access.grants import may_read
from embrasure.marquez import names
from embrasure.marquez.datasets import namespace_known
from embrasure.marquez.http import bad_request, not_found, route
from embrasure.marquez.model import (
    MARQUEZ_RUN_STATE_NAMES,
    embrasure_states,
    entity_uuid,
    enum_param,
    facet_text,
    instant,
    job_version,
    paging,
)
from embrasure.marquez.runs import run_json, run_jsons
from embrasure.model import DatasetId, JobId
from embrasure.projector.graph_rows import entity
from embrasure.query.facets import current_facets, facets_of_groups
from embrasure.query.graph import Graph
from embrasure.query.tags import entity_tags
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import EdgeRow, RunIoRow, RunRow
from embrasure.web.auth import requires
from embrasure.web.responses import answer

LATEST_RUNS = 10  # the runs a job carries in ``latestRuns``
RUNS_PAGE = 1000  # a job's runs read at a time for its versions


def listed_jobs(
    graph: Graph, namespace: str | None, states: list[str], offset: int, limit: int
) -> tuple[int, list[JobId]]:
    """How many shown jobs a namespace has (every namespace when None), and the page
    from ``offset``: the most recently run first, as Marquez lists them (its JobDao
    orders by updated_at), then by name; with ``states`` (Marquez's), only jobs whose
    latest run is in one of them. Ordered, filtered and paged by the store."""
    hidden = graph.hidden
    total, rows = graph.reader.jobs_by_recency(
        namespace,
        sorted(hidden.namespaces),
        sorted((j.namespace, j.name) for j in hidden.jobs),
        embrasure_states(states) if states else None,
        offset,
        limit,
    )
    return total, [JobId(r.ns, r.name) for r in rows]


def find_job(graph: Graph, namespace: str, name: str) -> JobId:
    """The job the Marquez port serves as ``name`` (marquez/names.py); 404 as Marquez."""
    if not namespace_known(graph.reader, namespace):
        raise not_found(f"Namespace '{namespace}' not found.")
    job = names.find(graph.reader, namespace, name)
    if job is None or graph.hidden.job(job):
        raise not_found(f"Job '{name}' not found.")
    return job


def job_jsons(
    graph: Graph, jobs: list[JobId], latest_runs: int = LATEST_RUNS
) -> list[dict[str, Any]]:
    """Marquez's Job (web/src/types/api.ts ``Job``) of each job, a page in a few queries
    plus one per job for its latest runs."""
    keys = [(j.namespace, j.name) for j in jobs]
    tags = entity_tags(graph.reader, graph.ids, "job", keys)
    return [
        job | {"tags": tags.get(key, [])}
        for job, key in zip(_job_jsons(graph, jobs, latest_runs, ()), keys, strict=True)
    ]


# What Marquez's JobData (a lineage node's ``data``: web/src/types/lineage.ts
# ``LineageJob``) has of a Job, and the facets those fields come from.
JOB_DATA = (
    "id",
    "type",
    "name",
    "simpleName",
    "parentJobName",
    "parentJobUuid",
    "createdAt",
    "updatedAt",
    "namespace",
    "inputs",
    "outputs",
    "location",
    "description",
    "latestRun",
)
JOB_DATA_FACETS = ("jobType", "sourceCodeLocation", "documentation")


def job_data_jsons(graph: Graph, jobs: list[JobId]) -> list[dict[str, Any]]:
    """Marquez's JobData of each job: its Job less facets, tags, versions and all but
    the latest run (Marquez's service/models/JobData.java)."""
    found = _job_jsons(graph, jobs, 1, JOB_DATA_FACETS)
    return [{key: job[key] for key in JOB_DATA} for job in found]


def _job_jsons(
    graph: Graph, jobs: list[JobId], latest_runs: int, facet_names: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Jobs without their tags, with only the facets ``facet_names`` (all when empty)."""
    reader = graph.reader
    kinds = graph.job_types(jobs)
    keys = [(j.namespace, j.name) for j in jobs]
    edges: dict[JobId, list[EdgeRow]] = {j: [] for j in jobs}
    for row in reader.rows(EdgeRow, ("job_ns", "job_name"), keys):
        edges[JobId(row.job_ns, row.job_name)].append(row)
    # Every edge's identity resolved in one read; _job_json then finds them cached.
    graph.ids.canonical(DatasetId(e.ds_ns, e.ds_name) for rows in edges.values() for e in rows)
    latest = {j: reader.runs_of_job((j.namespace, j.name), None, latest_runs) for j in jobs}
    runs = run_jsons(graph, [r for rows in latest.values() for r in rows])
    by_id = {run["id"]: run for run in runs}
    owners = {j: [entity("job", j.namespace, j.name)] for j in jobs}
    facets = facets_of_groups(reader, owners, names=facet_names)
    return [_job_json(graph, j, kinds[j], facets[j], edges[j], latest[j], by_id) for j in jobs]


def job_json(graph: Graph, job: JobId) -> dict[str, Any]:
    return job_jsons(graph, [job])[0]


def _job_json(
    graph: Graph,
    job: JobId,
    kind: str,
    facets: dict[str, Any],
    edges: list[EdgeRow],
    rows: list[RunRow],
    run_of: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    runs = [run_of[r.run_id] for r in rows]
    sent = [DatasetId(e.ds_ns, e.ds_name) for e in edges]
    canonical = graph.ids.canonical(sent)
    used: dict[str, set[DatasetId]] = {"in": set(), "out": set()}
    for edge, identity in zip(edges, sent, strict=True):
        used[edge.direction].add(canonical[identity])
    keys = [k for e in edges for k in (e.first_key, e.last_key) if k]
    keys += [k for r in rows for k in (r.started_key, r.latest_key) if k]
    parent = rows[0] if rows and names.parent_name(rows[0]) is not None else None
    parent_name = parent.parent_job_name if parent is not None else None
    served = names.marquez_name(job.name, parent_name)
    return {
        "id": {"namespace": job.namespace, "name": served},
        "type": _type(kind, facets),
        "name": served,
        "simpleName": names.simple_name(served, parent_name),
        "parentJobName": parent_name,
        "parentJobUuid": entity_uuid("job", parent.parent_job_ns or "", parent_name or "")
        if parent is not None
        else None,
        "createdAt": instant(min(keys)) if keys else None,
        "updatedAt": instant(max(keys)) if keys else None,
        "namespace": job.namespace,
        "inputs": _ids(sorted(used["in"])),
        "outputs": _ids(sorted(used["out"])),
        "location": facet_text(facets, "sourceCodeLocation", "url"),
        "description": facet_text(facets, "documentation", "description"),
        "latestRun": runs[0] if runs else None,
        # None, not [], without runs, as Marquez (Optional.empty): marquez-web reduces the
        # list without an initial value (its dashboard's JobRunItem).
        "latestRuns": runs or None,
        "facets": facets,
        # A job no run ran (a JobEvent's) has one version, of its declared inputs and
        # outputs, as Marquez makes one for it.
        "currentVersion": runs[0]["jobVersion"]["version"]
        if runs
        else job_version(job.namespace, job.name, used["in"], used["out"]),
        "labels": [],
    }


def _type(kind: str, facets: dict[str, Any]) -> str:
    if kind == "service":
        return "SERVICE"
    processing = facet_text(facets, "jobType", "processingType")
    return "STREAM" if processing == "STREAMING" else "BATCH"


def _ids(datasets: Iterable[DatasetId]) -> list[dict[str, str]]:
    """The datasets the reader may read (query/hidden.py), as Marquez's ids."""
    return [_id(d) for d in datasets if may_read(d.namespace)]


def _id(d: DatasetId) -> dict[str, str]:
    return {"namespace": d.namespace, "name": d.name}


def _versions(graph: Graph, job: JobId, served: str) -> list[dict[str, Any]]:
    """The job's versions, newest first: one per distinct (inputs, outputs) of its runs,
    each with its earliest run's time as ``createdAt`` and its latest run; a job without
    runs has the one its declared inputs and outputs make (``currentVersion``)."""
    reader = graph.reader
    found: dict[str, dict[str, Any]] = {}
    before = None
    while True:
        rows = reader.runs_of_job((job.namespace, job.name), before, RUNS_PAGE)
        io: dict[str, dict[str, set[DatasetId]]] = {
            r.run_id: {"in": set(), "out": set()} for r in rows
        }
        for use in reader.rows(RunIoRow, ("run_id",), [(r.run_id,) for r in rows]):
            io[use.run_id][use.direction].add(DatasetId(use.ds_ns, use.ds_name))
        for row in rows:  # newest first: a version's first row seen is its latest run
            sides = io[row.run_id]
            ins = sorted(set(graph.ids.canonical(sides["in"]).values()))
            outs = sorted(set(graph.ids.canonical(sides["out"]).values()))
            version = job_version(job.namespace, job.name, ins, outs)
            entry = found.setdefault(
                version, {"version": version, "inputs": ins, "outputs": outs, "latest": row}
            )
            entry["created"] = row.started_key or row.latest_key
        if len(rows) < RUNS_PAGE:
            break
        before = (rows[-1].latest_key, rows[-1].run_id)
    if not found:
        declared = job_json(graph, job)
        version = declared["currentVersion"]
        return [_version_json(job, served, version, declared["createdAt"], declared, None)]
    return [
        _version_json(
            job,
            served,
            entry["version"],
            instant(entry["created"]),
            {
                "inputs": _ids(entry["inputs"]),
                "outputs": _ids(entry["outputs"]),
            },
            run_json(graph, entry["latest"]),
        )
        for entry in found.values()
    ]


def _version_json(
    job: JobId,
    served: str,
    version: str,
    created: str | None,
    sides: dict[str, Any],
    latest_run: dict[str, Any] | None,
) -> dict[str, Any]:
    """Marquez's JobVersion; ``sides`` has its ``inputs`` and ``outputs``."""
    return {
        "id": {"namespace": job.namespace, "name": served, "version": version},
        "name": served,
        "createdAt": created,
        "version": version,
        "namespace": job.namespace,
        "location": None,
        "inputs": sides["inputs"],
        "outputs": sides["outputs"],
        "latestRun": latest_run,
    }


def _run(graph: Graph, request: Request) -> RunRow:
    run_id = request.path_params["run_id"].lower()
    rows = graph.reader.rows(RunRow, ("run_id",), [(run_id,)])
    if not rows or graph.hidden.job(JobId(rows[0].job_ns, rows[0].job_name)):
        raise not_found(f"Run '{run_id}' not found.")
    return rows[0]


class JobRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def list_all(self, request: Request) -> Response:
        return await self._list(request, None)

    async def list(self, request: Request) -> Response:
        return await self._list(request, request.path_params["namespace"])

    async def _list(self, request: Request, namespace: str | None) -> Response:
        states = [enum_param(s) for s in request.query_params.getlist("lastRunStates")]
        for state in states:
            if state not in MARQUEZ_RUN_STATE_NAMES:
                names = ", ".join(MARQUEZ_RUN_STATE_NAMES)
                raise bad_request(f"query param lastRunStates must be one of {names}")

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            limit, offset = paging(request)
            total, jobs = listed_jobs(graph, namespace, states, offset, limit)
            if states:
                # Marquez's totalCount counts every job, whatever the filter (its
                # countFor takes none), and marquez-web's pager relies on it.
                total, _ = listed_jobs(graph, namespace, [], 0, 0)
            return {"totalCount": total, "jobs": job_jsons(graph, jobs)}

        return await answer(self.store, work)

    async def get(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            p = request.path_params
            return job_json(graph, find_job(graph, p["namespace"], p["job"]))

        return await answer(self.store, work)

    async def versions(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            p = request.path_params
            limit, offset = paging(request)
            versions = _versions(graph, find_job(graph, p["namespace"], p["job"]), p["job"])
            return {"versions": versions[offset : offset + limit]}

        return await answer(self.store, work)

    async def version(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            p = request.path_params
            job = find_job(graph, p["namespace"], p["job"])
            for version in _versions(graph, job, p["job"]):
                if version["version"] == p["version"]:
                    return version
            raise not_found(f"Job version '{p['version']}' not found.")

        return await answer(self.store, work)

    async def runs(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            p = request.path_params
            job = find_job(graph, p["namespace"], p["job"])
            limit, offset = paging(request)
            key = (job.namespace, job.name)
            rows = reader.runs_of_job(key, None, offset + limit)[offset:]
            total = len(reader.pick(RunRow, ("run_id",), ("job_ns", "job_name"), [key]))
            return {"totalCount": total, "runs": run_jsons(graph, rows)}

        return await answer(self.store, work)

    async def run(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            return run_json(graph, _run(graph, request))

        return await answer(self.store, work)

    async def run_facets(self, request: Request) -> Response:
        """``GET /jobs/runs/{id}/facets?type=run|job``: the run's facets, or its job's.
        Marquez answers the job facets the run's own events sent; Embrasure keeps a
        job's current facets, not each run's, and answers those."""
        kind = enum_param(request.query_params.get("type", ""))
        if kind not in ("RUN", "JOB", "DATASET"):
            raise bad_request("query param type must be run, job or dataset")

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            row = _run(graph, request)
            if kind == "DATASET":  # Marquez's FacetType has it, and answers no body for it
                return Response(status_code=200)
            if kind == "JOB":
                facets = current_facets(reader, [entity("job", row.job_ns, row.job_name)])
            else:
                facets = run_json(graph, row)["facets"]
            return {"runId": row.run_id, "facets": facets}

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = JobRoutes(store)
    read = requires("read")
    job = "/namespaces/{namespace}/jobs/{job}"
    return [
        route("/jobs", read(api.list_all)),
        route("/jobs/runs/{run_id}", read(api.run)),
        route("/jobs/runs/{run_id}/facets", read(api.run_facets)),
        route("/namespaces/{namespace}/jobs", read(api.list)),
        route(job, read(api.get)),
        route(job + "/versions", read(api.versions)),
        route(job + "/versions/{version}", read(api.version)),
        route(job + "/runs", read(api.runs)),
    ]
