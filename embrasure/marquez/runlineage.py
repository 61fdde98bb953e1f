"""Marquez's run-level lineage (``GET /api/v1/runlineage/upstream?runId=&depth=``, its
LineageService.upstream; docs/marquez.md#run-lineage): from a run, the runs that made the
versions of the datasets it read, and theirs, ``depth`` levels up (default 20).

A run read the version its input's latest earlier writer made (marquez/model.py), so
that writer is the run upstream of it. The answer is Marquez's
``{"runs": [{job: {namespace, name, version}, run: {id, start, end, status}, inputs:
[{namespace, name, version, producedByRunId}]}]}``, nearest runs first, then by job name.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from embrasure.marquez.http import bad_request, not_found, route
from embrasure.marquez.lineage import depth_param
from embrasure.marquez.model import dataset_version, instant, job_version, run_state
from embrasure.marquez.names import marquez_name, parent_name
from embrasure.marquez.runs import latest_writer
from embrasure.model import DatasetId, JobId
from embrasure.query.graph import Graph
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.rows import RunIoRow, RunRow
from embrasure.web.auth import requires
from embrasure.web.read_bounds import heavy
from embrasure.web.responses import answer

MAX_RUNS = 10_000  # runs an answer holds at most


def upstream(graph: Graph, start: RunRow, depth: int) -> list[dict[str, Any]]:
    found: list[tuple[int, str, dict[str, Any]]] = []
    seen: set[str] = set()
    level: list[RunRow] = [start]
    for distance in range(depth + 1):
        following: list[str] = []
        for row in level:
            if row.run_id in seen or len(seen) >= MAX_RUNS:
                continue
            seen.add(row.run_id)
            entry, producers = _entry(graph, row)
            found.append((distance, entry["job"]["name"], entry))
            following += [p for p in producers if p not in seen]
        if not following:
            break
        level = graph.reader.rows(RunRow, ("run_id",), [(r,) for r in dict.fromkeys(following)])
        level = [r for r in level if not graph.hidden.job(JobId(r.job_ns, r.job_name))]
    found.sort(key=lambda f: (f[0], f[1]))
    return [entry for _d, _name, entry in found]


def _entry(graph: Graph, row: RunRow) -> tuple[dict[str, Any], list[str]]:
    io = graph.reader.rows(RunIoRow, ("run_id",), [(row.run_id,)])
    sides: dict[str, set[DatasetId]] = {"in": set(), "out": set()}
    canonical = graph.ids.canonical(DatasetId(r.ds_ns, r.ds_name) for r in io)
    for r in io:
        sides[r.direction].add(canonical[DatasetId(r.ds_ns, r.ds_name)])
    before = (row.latest_key, row.run_id, "out")
    inputs, producers = [], []
    # The walk does not pass through a hidden input, nor one outside the reader's grants.
    hidden = graph.hidden.datasets_hidden(sides["in"])
    for node in sorted(sides["in"] - hidden):
        producer = latest_writer(graph, node, before)
        inputs.append(
            {
                "namespace": node.namespace,
                "name": node.name,
                "version": dataset_version(node.namespace, node.name, producer or ""),
                "producedByRunId": producer,
            }
        )
        if producer is not None:
            producers.append(producer)
    entry = {
        "job": {
            "namespace": row.job_ns,
            "name": marquez_name(row.job_name, parent_name(row)),
            "version": job_version(row.job_ns, row.job_name, sides["in"], sides["out"]),
        },
        "run": {
            "id": row.run_id,
            "start": instant(row.started_key),
            "end": instant(row.ended_key),
            "status": run_state(row.state),
        },
        "inputs": inputs,
    }
    return entry, producers


class RunLineageRoutes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def upstream(self, request: Request) -> Response:
        text = request.query_params.get("runId") or ""
        try:
            run_id = str(uuid.UUID(text))
        except ValueError:
            raise bad_request(f"query param runId must be a run's UUID, got {text!r}") from None
        depth = depth_param(request)

        def work(reader: GraphReader) -> Any:
            graph = Graph(reader)
            rows = reader.rows(RunRow, ("run_id",), [(run_id,)])
            if not rows or graph.hidden.job(JobId(rows[0].job_ns, rows[0].job_name)):
                raise not_found(f"Run '{run_id}' not found.")
            return {"runs": upstream(graph, rows[0], depth)}

        return await answer(self.store, work)


def routes(store: Store) -> list[BaseRoute]:
    api = RunLineageRoutes(store)
    return [route("/runlineage/upstream", requires("read")(heavy(api.upstream)))]
