"""Marquez's runs (its Run model, RunResource, JobResource's run routes;
docs/marquez.md#runs), shaped from Embrasure's run views (query/entities.run_views).

- ``state``: marquez/model.run_state; ``createdAt`` the run's earliest eventTime,
  ``updatedAt`` its latest; ``durationMs`` from start to end.
- ``nominalStartTime``/``nominalEndTime``: the nominalTime run facet (OpenLineage
  NominalTimeRunFacet 1-0-1).
- ``args``: the parent run (``_args``).
- ``jobVersion``: the job's version of what this run read and wrote (model.job_version).
- ``outputDatasetVersions``: the versions this run made (model.dataset_version);
  ``inputDatasetVersions``: for each input, the version the latest earlier writer made,
  or the dataset's first version when none wrote it before — each with the run's
  ``inputFacets`` / ``outputFacets`` of it (Marquez's RunDao: the INPUT and OUTPUT
  facets; the dataset facets the run sent are its dataset version's, datasets.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embrasure.access.grants import may_read
from embrasure.marquez.model import dataset_version, instant, job_version, run_state
from embrasure.marquez.names import marquez_name, parent_name
from embrasure.model import DatasetId, JobId
from embrasure.projector.times import parse_event_time
from embrasure.query.entities import run_views
from embrasure.query.graph import Graph
from embrasure.store.rows import RunRow


def shown_run(graph: Graph) -> Any:
    """A predicate: the run's job is not hidden."""
    return lambda row: not graph.hidden.job(JobId(row.job_ns, row.job_name))


def run_jsons(graph: Graph, rows: Sequence[RunRow]) -> list[dict[str, Any]]:
    """Marquez's Run (web/src/types/api.ts ``Run``) of each row, in a few queries for the
    page plus one per input dataset (its version as of the run)."""
    views = run_views(graph.reader, rows, 0, graph.ids, sent=False)  # type: ignore[arg-type]
    # Every input's identities in one read (Identities caches them for latest_writer).
    graph.ids.members({DatasetId(i["namespace"], i["name"]) for v in views for i in v["inputs"]})
    return [_run_json(graph, row, view) for row, view in zip(rows, views, strict=True)]


def run_json(graph: Graph, row: RunRow) -> dict[str, Any]:
    return run_jsons(graph, [row])[0]


def _run_json(graph: Graph, row: RunRow, view: dict[str, Any]) -> dict[str, Any]:
    inputs = [DatasetId(i["namespace"], i["name"]) for i in view["inputs"]]
    outputs = [DatasetId(o["namespace"], o["name"]) for o in view["outputs"]]
    nominal = view["facets"].get("nominalTime")
    nominal = nominal if isinstance(nominal, dict) else {}
    started, ended = row.started_key or None, row.ended_key or None
    return {
        "id": row.run_id,
        "createdAt": instant(started or row.latest_key),
        "updatedAt": instant(row.latest_key or started),
        "nominalStartTime": _instant(nominal.get("nominalStartTime")),
        "nominalEndTime": _instant(nominal.get("nominalEndTime")),
        "state": run_state(row.state),
        "startedAt": instant(started),
        "endedAt": instant(ended),
        "durationMs": _millis(view.get("duration_s")),
        "args": _args(row),
        "jobVersion": {
            "namespace": row.job_ns,
            "name": marquez_name(row.job_name, parent_name(row)),
            "version": job_version(row.job_ns, row.job_name, inputs, outputs),
        },
        "inputDatasetVersions": [
            _used(i, _input_version(graph, row, DatasetId(i["namespace"], i["name"])), "input")
            for i in view["inputs"]
        ],
        "outputDatasetVersions": [
            _used(o, dataset_version(o["namespace"], o["name"], row.run_id), "output")
            for o in view["outputs"]
        ],
        "facets": view["facets"],
    }


def _args(row: RunRow) -> dict[str, str]:
    """Marquez's run ``args``: empty, but for a run with a parent (OpenLineage
    ParentRunFacet) the parent's run id, job name and namespace, as Marquez fills them
    (seen beside it: its OpenLineageDao keeps the parent there)."""
    if row.parent_run_id is None:
        return {}
    named = may_read(row.parent_job_ns or "")  # else not named to this reader (hidden.py)
    return {
        "run_id": row.parent_run_id,
        "name": (row.parent_job_name or "") if named else "",
        "namespace": (row.parent_job_ns or "") if named else "",
    }


def _used(item: dict[str, Any], version: str, role: str) -> dict[str, Any]:
    return {
        "datasetVersionId": {
            "namespace": item["namespace"],
            "name": item["name"],
            "version": version,
        },
        "facets": item[f"{role}Facets"],
    }


def _input_version(graph: Graph, row: RunRow, node: DatasetId) -> str:
    """The version of ``node`` the run read: the one its latest earlier writer made."""
    return writer_version(graph, node, (row.latest_key, row.run_id, "out"))


def writer_version(
    graph: Graph, node: DatasetId, before: tuple[str, str, str] | None = None
) -> str:
    """The version of ``node`` its latest writer made (before ``before``), or its first
    version when none wrote it."""
    return dataset_version(node.namespace, node.name, latest_writer(graph, node, before) or "")


def latest_writer(
    graph: Graph, node: DatasetId, before: tuple[str, str, str] | None = None
) -> str | None:
    """The runId of ``node``'s latest writer (before ``before`` in the runs' order: latest
    eventTime, runId), read along run_io's dataset index, one row per identity."""
    latest: tuple[str, str] | None = None
    for member in graph.ids.members([node])[node]:
        for use in graph.reader.runs_of_dataset((member.namespace, member.name), "out", before, 1):
            latest = max(latest or ("", ""), (use.run_key, use.run_id))
    return latest[1] if latest else None


def _instant(value: Any) -> str | None:
    """A nominalTime facet's time as Marquez answers it, a Java Instant in UTC (it reads
    the facet's ZonedDateTime and stores the instant); a time it could not read, as sent."""
    if not isinstance(value, str):
        return None
    try:
        time, _warning = parse_event_time(value)
    except ValueError:
        return value
    return instant(time.key) if time is not None else value


def _millis(seconds: Any) -> int | None:
    return round(seconds * 1000) if isinstance(seconds, int | float) else None
