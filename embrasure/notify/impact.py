"""What a notification says beyond its cause (docs/notifications.md#what-a-receiver-gets),
read from the graph when it is first sent, after the settle time: what lies downstream
of the cause (the impact API's walk, query/impact.py), the owners of each node (the
``ownership`` facet: OpenLineage OwnershipDatasetFacet and OwnershipJobFacet) and links
to the UI's pages; for a schema change, what changed and, for each removed or retyped
column, the fields, datasets and jobs that read it (column-level impact, masking shown);
for a failed run, the datasets it did not refresh.

Read after the settle time, the same graph answers whatever order the events came in.
The sender stores the body it made and sends those bytes on every attempt.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

from embrasure.model import DatasetId, JobId
from embrasure.projector.shapes import entity
from embrasure.query.dataset_runs import dataset_runs, schema_fields, writer_runs
from embrasure.query.entities import Identities
from embrasure.query.facets import facets_of_groups
from embrasure.query.graph import Graph
from embrasure.query.impact import impact
from embrasure.store.base import GraphReader
from embrasure.store.rows import RunRow

# How far downstream a notification looks (edges: a dataset, a job, a dataset is two),
# and how many nodes it names at most (``truncated`` says when there were more).
DEPTH = 10
LIMIT = 200
RECENT_WRITES = 5  # the writes looked through for the one that set the current schema
RECENT_RUNS = 20  # the runs looked through for the one that sent a failed check's result


def schema_change(reader: GraphReader, dataset: DatasetId) -> dict[str, Any] | None:
    """What the dataset's latest write carrying a schema changed, against the write
    before it that carried one (query/dataset_runs.py, "what each run did"), with the
    writing run; None when it changed nothing, or when the current schema is not one
    a write set."""
    members = Identities(reader).node_members(dataset)
    entries, _cursor = dataset_runs(reader, members, "output", None, RECENT_WRITES, lambda _: True)
    for entry in entries:
        if schema_fields(entry["facets"].get("schema")) is None:
            continue
        change = entry.get("schema_change")
        if change is None:
            return None
        return {"runId": entry["runId"], "job": entry["job"], **change}
    return None


def latest_write(reader: GraphReader, dataset: DatasetId) -> RunRow | None:
    """The latest run that wrote the dataset's node (under any identity), or None."""
    members = Identities(reader).node_members(dataset)
    rows, _cursor = writer_runs(reader, members, None, 1, lambda _: True)
    return rows[0] if rows else None


def failing_run(reader: GraphReader, dataset: DatasetId, check: dict[str, Any]) -> Any:
    """The latest of the dataset's RECENT_RUNS runs (readers and writers, newest first)
    whose assertions failed ``check`` (its assertion and column): the run that sent the
    result, as "what each run did" shows it; None when none of them did. (A check's
    stored result keeps its time and hash, not its run.)"""
    members = Identities(reader).node_members(dataset)
    wanted: dict[str, Any] = {"assertion": check["assertion"]}
    if check.get("column"):
        wanted["column"] = check["column"]
    entries, _cursor = dataset_runs(reader, members, None, None, RECENT_RUNS, lambda _: True)
    for entry in entries:
        if wanted in entry["assertions"]["failures"]:
            return {"runId": entry["runId"], "job": entry["job"]}
    return None


class Describer:
    """Adds the downstream, owners and links to a notification's body."""

    def __init__(self, reader: GraphReader, public_url: str) -> None:
        self.reader = reader
        self.graph = Graph(reader)
        self.base = public_url.rstrip("/")

    def describe(self, body: dict[str, Any]) -> dict[str, Any]:
        out = dict(body)
        roots: list[DatasetId] = []
        if "dataset" in body:
            dataset = DatasetId(body["dataset"]["namespace"], body["dataset"]["name"])
            out["dataset"] = self._dataset(dataset)
            roots.append(dataset)
        if body["type"] == "check.failed":
            run = failing_run(self.reader, roots[0], body["check"])
            if run is not None:
                out["check"] = body["check"] | {
                    "run": run | {"url": self._link("/run", id=run["runId"])}
                }
        if "job" in body:
            out["job"] = self._job(JobId(body["job"]["namespace"], body["job"]["name"]))
        if "run" in body:
            out["run"] = body["run"] | {"url": self._link("/run", id=body["run"]["runId"])}
            written = [DatasetId(d["namespace"], d["name"]) for d in body.get("not_refreshed", ())]
            out["not_refreshed"] = [self._dataset(d) for d in written]
            roots = written
        if body["type"] == "schema.changed":
            out["columns"] = self._columns(roots[0], body.get("changes") or {})
        out["downstream"] = self._downstream(roots)
        return out

    def _downstream(self, roots: list[DatasetId]) -> dict[str, Any]:
        """The datasets and jobs downstream of ``roots`` (the nearest distance of each),
        each with its owners and link."""
        best: dict[str, dict[str, Any]] = {}
        truncated = False
        for root in roots:
            found = impact(self.reader, root, None, DEPTH, LIMIT)
            truncated = truncated or found["truncated"]
            for item in found["items"]:
                node = item["node"]
                if node["type"] in ("field", "hidden"):
                    continue
                seen = best.get(node["id"])
                if seen is None or item["distance"] < seen["distance"]:
                    best[node["id"]] = {"node": node, "distance": item["distance"]}
        items = sorted(best.values(), key=lambda i: (i["distance"], i["node"]["id"]))
        owners = self._owners(
            [i["node"] for i in items],
        )
        return {
            "datasets": [
                self._described(i["node"], owners, distance=i["distance"])
                for i in items
                if i["node"]["type"] == "dataset"
            ],
            "jobs": [
                self._described(i["node"], owners, distance=i["distance"])
                for i in items
                if i["node"]["type"] != "dataset"
            ],
            "truncated": truncated,
        }

    def _columns(self, dataset: DatasetId, changes: dict[str, Any]) -> list[dict[str, Any]]:
        """For each removed or retyped column, what reads it (the impact API's field
        walk: fields, their datasets and the jobs between, ``masked`` on the path)."""
        names = [f["name"] for f in changes.get("removed", ())]
        names += [f["name"] for f in changes.get("changed", ())]
        out = []
        for name in names:
            found = impact(self.reader, dataset, name, DEPTH, LIMIT)
            items = [i for i in found["items"] if i["node"]["type"] != "hidden"]
            owners = self._owners([i["node"] for i in items if i["node"]["type"] != "field"])
            out.append(
                {
                    "field": name,
                    "impact": [
                        self._described(
                            i["node"], owners, distance=i["distance"], masked=i["masked"]
                        )
                        for i in items
                    ],
                    "truncated": found["truncated"],
                }
            )
        return out

    def _described(
        self, node: dict[str, Any], owners: dict[str, list[Any]], **extra: Any
    ) -> dict[str, Any]:
        kind = node["type"]
        out: dict[str, Any] = {"type": kind, "namespace": node["namespace"], "name": node["name"]}
        if kind == "field":
            out["field"] = node["field"]
            out["url"] = self._link(
                "/column", namespace=node["namespace"], name=node["name"], field=node["field"]
            )
        else:
            page = "/dataset" if kind == "dataset" else "/job"
            out["owners"] = owners.get(node["id"], [])
            out["url"] = self._link(page, namespace=node["namespace"], name=node["name"])
        return out | extra

    def _dataset(self, dataset: DatasetId) -> dict[str, Any]:
        node = self.graph.ids.canonical([dataset])[dataset]
        owners = self._owners([{"id": "d", "type": "dataset", **_names(node)}])
        return {
            **_names(dataset),
            "owners": owners.get("d", []),
            "url": self._link("/dataset", **_names(node)),
        }

    def _job(self, job: JobId) -> dict[str, Any]:
        owners = self._owners([{"id": "j", "type": "job", **_names(job)}])
        return {
            **_names(job),
            "owners": owners.get("j", []),
            "url": self._link("/job", **_names(job)),
        }

    def _owners(self, nodes: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
        """Each node's owners, by its id: the ``ownership`` facet's ``owners`` (over a
        dataset's aliases, the node's current facet)."""
        nodes = list(nodes)
        datasets = [DatasetId(n["namespace"], n["name"]) for n in nodes if n["type"] == "dataset"]
        members = self.graph.ids.members(datasets)
        groups: dict[str, list[str]] = {}
        for n in nodes:
            if n["type"] == "dataset":
                identities = members[DatasetId(n["namespace"], n["name"])]
                groups[n["id"]] = [entity("dataset", m.namespace, m.name) for m in identities]
            else:
                groups[n["id"]] = [entity("job", n["namespace"], n["name"])]
        facets = facets_of_groups(self.reader, groups, names=["ownership"])
        out = {}
        for key, found in facets.items():
            ownership = found.get("ownership")
            listed = ownership.get("owners") if isinstance(ownership, dict) else None
            out[key] = (
                [o for o in listed if isinstance(o, dict)] if isinstance(listed, list) else []
            )
        return out

    def _link(self, page: str, **query: str) -> str:
        """A page of the web UI (its hash routes: ui/static/js/links.js)."""
        return f"{self.base}/#{page}?{urllib.parse.urlencode(query)}"


def _names(entity_id: DatasetId | JobId) -> dict[str, str]:
    return {"namespace": entity_id.namespace, "name": entity_id.name}
