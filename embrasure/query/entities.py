"""The served graph's entities as JSON: node ids, identity resolution, datasets, jobs,
runs, deliveries. Pure shaping over a store snapshot (``GraphReader``); traversals are in
lineage.py, columns.py and impact.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from embrasure.access.grants import may_read
from embrasure.model import DELIVERY_STATES, DatasetId, JobId
from embrasure.projector import facets as facet_rules
from embrasure.projector.graph_rows import entity
from embrasure.projector.runs import normalise_state
from embrasure.projector.shapes import run_entity
from embrasure.query.facets import Owner, Sent, current_facets, facets_of_groups, stored_slot
from embrasure.store.base import GraphReader
from embrasure.store.rows import CanonicalRow, FacetRow, JobRow, LinkRow, RunIoRow, RunRow


@dataclasses.dataclass(frozen=True)
class IngestTotals:
    """Deliveries by state and items by outcome, the whole log's (docs/queries.md#overview): the web
    UI's home page and /metrics. Read from the projection's own table and the backlog
    index, never from the delivery bodies."""

    deliveries: dict[str, int]
    items: dict[str, int]  # received, projected, quarantined, pending
    oldest_pending: str | None  # received_at of the oldest delivery not yet projected

    @property
    def pending(self) -> int:
        return self.items["pending"]


def ingest_totals(reader: GraphReader) -> IngestTotals:
    deliveries = dict.fromkeys(DELIVERY_STATES, 0)
    items = {"received": 0, "projected": 0, "quarantined": 0, "pending": 0}
    for total in reader.outcome_totals():
        deliveries[total.state] = total.deliveries
        items["projected"] += total.projected
        items["quarantined"] += total.quarantined
    backlog = reader.backlog()
    deliveries["accepted"] = backlog.deliveries
    deliveries["quarantined"] += backlog.rejected  # quarantined on receipt, not projected yet
    items["pending"] = backlog.items
    items["received"] = items["projected"] + items["quarantined"] + backlog.items
    return IngestTotals(deliveries, items, backlog.oldest)


def _encode(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def node_id(kind: str, namespace: str, name: str, field: str | None = None) -> str:
    """docs/queries.md#conventions: ``dataset:{namespace}:{name}`` (… ``:{field}``); '%' and
    ':' in the name and field parts are percent-encoded so an id always splits from the
    right."""
    text = f"{kind}:{namespace}:{_encode(name)}"
    return text if field is None else f"{text}:{_encode(field)}"


def dataset_node(d: DatasetId, field: str | None = None) -> dict[str, Any]:
    node = {
        "id": node_id("field" if field is not None else "dataset", d.namespace, d.name, field),
        "type": "field" if field is not None else "dataset",
        "namespace": d.namespace,
        "name": d.name,
    }
    if field is not None:
        node["field"] = field
    return node


def named_as_asked(
    answer: dict[str, Any], node: DatasetId, asked: DatasetId, field: str | None = None
) -> dict[str, Any]:
    """A walk's answer about ``node`` (canonical) asked by another of its identities (a
    symlinked path, an old name), the root ``field`` of it if one was asked: that
    dataset and its fields named as asked, every id of theirs in it changed to match —
    the one node the client asked about shows under the name it used
    (docs/queries.md#conventions), the others under their canonical identity."""
    if asked == node:
        return answer
    ids = {dataset_node(node)["id"]: dataset_node(asked)["id"]}
    if field is not None:  # the root, which an impact answer holds only as an id
        ids[dataset_node(node, field)["id"]] = dataset_node(asked, field)["id"]

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            kept = {k: rename(v) for k, v in value.items()}
            if (
                kept.get("type") in ("dataset", "field")
                and (kept.get("namespace"), kept.get("name")) == node
                and "id" in kept
            ):
                shown = dataset_node(asked, kept.get("field"))
                ids[kept["id"]] = shown["id"]
                kept |= shown
            return kept
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    def relink(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: relink(v) for k, v in value.items()}
        if isinstance(value, list):
            return [relink(v) for v in value]
        return ids.get(value, value) if isinstance(value, str) else value

    return relink(rename(answer))  # type: ignore[no-any-return]


def job_node(job: JobId, kind: str) -> dict[str, Any]:
    return {
        "id": node_id(kind, job.namespace, job.name),
        "type": kind,
        "namespace": job.namespace,
        "name": job.name,
    }


def _time(key: str | None, text: str | None) -> Any:
    return text if key else None


@dataclasses.dataclass
class Identities:
    """Dataset identity resolution within one snapshot, cached per request."""

    reader: GraphReader
    _canonical: dict[DatasetId, DatasetId] = dataclasses.field(default_factory=dict)
    _members: dict[DatasetId, list[DatasetId]] = dataclasses.field(default_factory=dict)
    _renamed: set[DatasetId] = dataclasses.field(default_factory=set)

    def canonical(self, ids: Iterable[DatasetId]) -> dict[DatasetId, DatasetId]:
        ids = list(ids)
        todo = [i for i in dict.fromkeys(ids) if i not in self._canonical]
        if todo:
            found = {
                DatasetId(r.ns, r.name): (DatasetId(r.c_ns, r.c_name), r.renamed)
                for r in self.reader.rows(
                    CanonicalRow, ("ns", "name"), [(i.namespace, i.name) for i in todo]
                )
            }
            for i in todo:
                c, renamed = found.get(i, (i, 0))
                self._canonical[i] = c
                if renamed:
                    self._renamed.add(i)
        return {i: self._canonical[i] for i in ids}

    def members(self, canonical: Iterable[DatasetId]) -> dict[DatasetId, list[DatasetId]]:
        """Every identity of each node (the canonical one first)."""
        canonical = list(canonical)
        todo = [c for c in dict.fromkeys(canonical) if c not in self._members]
        if todo:
            rows = self.reader.rows(
                CanonicalRow, ("c_ns", "c_name"), [(c.namespace, c.name) for c in todo]
            )
            for c in todo:
                self._members[c] = [c]
            for row in rows:
                member, node = DatasetId(row.ns, row.name), DatasetId(row.c_ns, row.c_name)
                self._canonical[member] = node
                if row.renamed:
                    self._renamed.add(member)
                if member != node:
                    self._members[node].append(member)
        return {c: self._members[c] for c in canonical}

    def node_members(self, identity: DatasetId) -> list[DatasetId]:
        """Every identity of the node ``identity`` belongs to (the canonical one first)."""
        node = self.canonical([identity])[identity]
        return self.members([node])[node]

    def is_renamed(self, identity: DatasetId) -> bool:
        return identity in self._renamed


def dataset_view(reader: GraphReader, ids: Identities, node: DatasetId) -> dict[str, Any]:
    members = ids.members([node])[node]
    owners = [entity("dataset", m.namespace, m.name) for m in members]
    facets = current_facets(reader, owners)
    member_keys = [(m.namespace, m.name) for m in members]
    locations = sorted(
        {
            (r.b_ns, r.b_name, r.type or r.kind)
            for r in reader.rows(LinkRow, ("a_ns", "a_name"), member_keys)
            if r.kind == "LOCATION"
        }
    )
    schema = facets.get("schema")
    fields = (
        [f.get("name") for f in schema.get("fields", []) if isinstance(f, dict)]
        if (isinstance(schema, dict) and isinstance(schema.get("fields"), list))
        else []
    )
    lifecycle = facets.get("lifecycleStateChange")
    return {
        **dataset_node(node),
        "aliases": [
            {"namespace": m.namespace, "name": m.name, "renamed": ids.is_renamed(m)}
            for m in sorted(members[1:])
            if may_read(m.namespace)  # query/hidden.py: a shown node's unreadable aliases
        ],
        "locations": [
            {"namespace": n, "name": m, "type": t} for n, m, t in locations if may_read(n)
        ],
        "facets": facets,
        "fields": [f for f in fields if isinstance(f, str)],
        "dropped": isinstance(lifecycle, dict) and lifecycle.get("lifecycleStateChange") == "DROP",
    }


def job_kind(reader: GraphReader, job: JobId, facets: dict[str, Any] | None = None) -> str:
    """docs/projection.md#entities-and-identity: a service when its jobType facet says
    processingType SERVICE, or when every event naming it is a JobEvent without outputs."""
    if facets is None:
        return job_kinds(reader, [job])[job]
    rows = reader.rows(JobRow, ("ns", "name"), [(job.namespace, job.name)])
    return _kind(facets.get("jobType"), rows[0] if rows else None)


def job_kinds(reader: GraphReader, jobs: list[JobId]) -> dict[JobId, str]:
    """``job_kind`` of many jobs in two queries (lineage pages name hundreds)."""
    owners = {entity("job", j.namespace, j.name): j for j in jobs}
    slots: dict[JobId, facet_rules.FacetSlot] = {}
    for row in reader.rows(FacetRow, ("entity", "name"), [(o, "jobType") for o in owners]):
        slots[owners[row.entity]] = stored_slot(row, honour_deleted=True)
    current = {job: slot.current for job, slot in slots.items()}
    values = reader.facet_values(sorted({v.value_hash() for v in current.values() if v}))
    flags = {
        JobId(r.ns, r.name): r
        for r in reader.rows(JobRow, ("ns", "name"), [(j.namespace, j.name) for j in jobs])
    }
    out = {}
    for job in jobs:
        value = current.get(job)
        job_type = orjson.loads(values[value.value_hash()]) if value is not None else None
        out[job] = _kind(job_type, flags.get(job))
    return out


def _kind(job_type: Any, flags: JobRow | None) -> str:
    if isinstance(job_type, dict) and job_type.get("processingType") == "SERVICE":
        return "service"
    # Named by JobEvents without outputs only: no RunEvent, no JobEvent with outputs.
    if flags is not None and not flags.run_events and not flags.job_events_out:
        return "service" if flags.job_events_in else "job"
    return "job"


def job_view(reader: GraphReader, job: JobId) -> dict[str, Any]:
    facets = current_facets(reader, [entity("job", job.namespace, job.name)])
    kind = job_kind(reader, job, facets)
    latest = reader.runs_of_job((job.namespace, job.name), None, 1)
    # ParentRunFacet links the job to its parent job too (an Airflow task to its DAG, a
    # Spark query to its application): the parent named by the job's latest run.
    parent = latest[0] if latest else None
    return {
        **job_node(job, kind),
        "facets": facets,
        "parent_job": {"namespace": parent.parent_job_ns, "name": parent.parent_job_name}
        if parent is not None
        and parent.parent_job_ns is not None
        and may_read(parent.parent_job_ns)
        else None,
        "latest_run": run_summary(parent) if parent is not None else None,
    }


def run_summary(r: RunRow) -> dict[str, Any]:
    return {
        "runId": r.run_id,
        "job": {"namespace": r.job_ns, "name": r.job_name},
        "state": normalise_state(r.state) if r.state else None,
        "started_at": _time(r.started_key, r.started_text),
        "ended_at": _time(r.ended_key, r.ended_text),
        "duration_s": seconds_between(r.started_key, r.ended_key),
    }


def seconds_between(start_key: str | None, end_key: str | None) -> float | None:
    """Seconds from one stored time key to another (both fixed-width UTC with nine
    fraction digits, see projector/times.py), exact to the nanosecond before rounding."""
    if not start_key or not end_key:
        return None
    whole = datetime.fromisoformat(end_key[:19]) - datetime.fromisoformat(start_key[:19])
    nanos = int(end_key[20:29]) - int(start_key[20:29])
    return round(whole.total_seconds() + nanos / 1e9, 9)


def _parent(r: RunRow) -> dict[str, Any] | None:
    if r.parent_run_id is None and r.parent_job_ns is None:
        return None
    # A parent or root job outside the reader's grants is served as None, as unknown.
    out: dict[str, Any] = {
        "runId": r.parent_run_id,
        "job": None
        if r.parent_job_ns is None or not may_read(r.parent_job_ns)
        else {"namespace": r.parent_job_ns, "name": r.parent_job_name},
    }
    if r.root_run_id is not None or r.root_job_ns is not None:
        out["root"] = {
            "runId": r.root_run_id,
            "job": None
            if r.root_job_ns is None or not may_read(r.root_job_ns)
            else {"namespace": r.root_job_ns, "name": r.root_job_name},
        }
    return out


# Child runIds a run carries in listings (GET /api/v1/runs…): a dbt invocation has one
# child per model, and 25 such runs listing 10,000 ids each made a 10 MB job page.
# ``child_count`` says how many there are; /api/v1/runs/{id}/children pages through them.
LISTED_CHILDREN = 100


ROLES = {"in": "input", "out": "output"}
# An input's or output's own facets, by the key OpenLineage sends them under (2-0-2).
ROLE_FACETS = {"input": "inputFacets", "output": "outputFacets"}


def used_facet_owners(run_id: str, role: str, identities: Iterable[DatasetId]) -> dict[Owner, str]:
    """The facet owners of what a run sent about a dataset it used under ``identities``:
    owner → 'facets' (the dataset facets as the run sent them: query/facets.py ``Sent``)
    or the role's own key (inputFacets / outputFacets, kept per run: projector/graph_rows.py
    ``_run_facets``)."""
    owners: dict[Owner, str] = {}
    for i in identities:
        owners[Sent(run_id, role, i)] = "facets"
        owners[run_entity(run_id, role, i.namespace, i.name)] = ROLE_FACETS[role]
    return owners


_Used = dict[tuple[str, DatasetId], tuple[tuple[str, str], set[DatasetId], str | None]]


def _used(ids: Identities, io: Iterable[RunIoRow]) -> _Used:
    """A run's io rows by (direction, canonical dataset): the identities it was sent
    under, and the version the latest event named (with that event's rank)."""
    io = list(io)
    canonical = ids.canonical(DatasetId(r.ds_ns, r.ds_name) for r in io)
    # A run whose events named two jobs, or one dataset by two aliases, has several rows.
    used: _Used = {}
    for r in io:
        sent = DatasetId(r.ds_ns, r.ds_name)
        key = (r.direction, canonical[sent])
        rank, sent_as, version = used.get(key, (("", ""), set(), None))
        sent_as.add(sent)
        mine = (r.version_key or "", r.version or "")
        if r.version is not None and (version is None or mine > rank):
            rank, version = mine, r.version
        used[key] = (rank, sent_as, version)
    return used


def _used_json(
    used: _Used, facets: Mapping[tuple[tuple[str, DatasetId], str], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"in": [], "out": []}
    for key in sorted(used):
        direction, node = key
        if not may_read(node.namespace):  # outside the reader's grants (query/hidden.py)
            continue
        role_key = ROLE_FACETS[ROLES[direction]]
        item: dict[str, Any] = {"namespace": node.namespace, "name": node.name}
        if used[key][2] is not None:
            item["version"] = used[key][2]
        item["facets"] = facets.get((key, "facets"), {})
        item[role_key] = facets.get((key, role_key), {})
        out[direction].append(item)
    return out


def run_views(
    reader: GraphReader,
    rows: Sequence[RunRow],
    children_limit: int | None = None,
    ids: Identities | None = None,
    sent: bool = True,
) -> list[dict[str, Any]]:
    """Runs as GET /api/v1/runs/{runId} shows them (docs/queries.md#runs), a page at a
    time in a fixed number of queries (their io rows, their facets, what they sent
    about each dataset, their children), not a few per run: a listing or the export
    of thousands of runs on PostgreSQL paid a round trip per query. Each input and
    output appears under its canonical identity once per role, with the version the
    latest event named and what the run sent about it — its dataset facets and its
    input/output facets, each the latest value per facet name over the run's events
    (and over the aliases it was named by). With ``children_limit``, at most that many
    child runIds (the first by runId), as listings carry them. Without ``sent``, each
    input's and output's ``facets`` (the dataset facets the run sent, the costliest part)
    are left empty: the Marquez API's runs carry only the input/output facets."""
    ids = ids or Identities(reader)
    run_ids = [(row.run_id,) for row in rows]
    io_of: dict[str, list[RunIoRow]] = {}
    for r in reader.rows(RunIoRow, ("run_id",), run_ids):
        io_of.setdefault(r.run_id, []).append(r)
    children_of: dict[str, list[str]] = {}
    # Only the ids, from the parent index (which holds the key): not 10,000 whole rows.
    for parent, child in reader.pick(
        RunRow, ("parent_run_id", "run_id"), ("parent_run_id",), run_ids
    ):
        children_of.setdefault(str(parent), []).append(str(child))
    # Every io row's identity resolved in one read; _used then finds them cached.
    ids.canonical(DatasetId(r.ds_ns, r.ds_name) for rs in io_of.values() for r in rs)
    used_of = {row.run_id: _used(ids, io_of.get(row.run_id, ())) for row in rows}
    groups: dict[tuple[str, Any, str], list[Owner]] = {}
    for row in rows:
        run_id = row.run_id
        groups[(run_id, None, "run")] = [entity("run", run_id)]
        for key, (_rank, sent_as, _version) in used_of[run_id].items():
            for owner, part in used_facet_owners(run_id, ROLES[key[0]], sorted(sent_as)).items():
                if sent or part != "facets":
                    groups.setdefault((run_id, key, part), []).append(owner)
    # A run's own facets are served with their deletion markers' values left in
    # (honour_deleted=False); what it sent about a dataset honours them.
    run_facets = facets_of_groups(
        reader, {k: v for k, v in groups.items() if k[2] == "run"}, honour_deleted=False
    )
    sent_of: dict[str, dict[tuple[tuple[str, DatasetId], str], dict[str, Any]]] = {}
    for (rid, key, part), value in facets_of_groups(
        reader, {k: v for k, v in groups.items() if k[2] != "run"}
    ).items():
        sent_of.setdefault(rid, {})[(key, part)] = value
    views = []
    for row in rows:
        run_id = row.run_id
        facets = run_facets[(run_id, None, "run")]
        error = facets.get("errorMessage")
        children = sorted(children_of.get(run_id, ()))
        used = _used_json(used_of[run_id], sent_of.get(run_id, {}))
        views.append(
            {
                **run_summary(row),
                "inputs": used["in"],
                "outputs": used["out"],
                "facets": facets,
                "error_message": error.get("message") if isinstance(error, dict) else None,
                "parent": _parent(row),
                "children": children if children_limit is None else children[:children_limit],
                "child_count": len(children),
            }
        )
    return views


def run_view(
    reader: GraphReader,
    row: RunRow,
    children_limit: int | None = None,
    ids: Identities | None = None,
) -> dict[str, Any]:
    """One run (``run_views`` of one)."""
    return run_views(reader, [row], children_limit, ids)[0]


def child_runs(
    reader: GraphReader,
    run_id: str,
    after: Any,
    limit: int,
    keep: Callable[[RunRow], bool] = lambda row: True,
) -> tuple[list[dict[str, Any]], list[str] | None] | None:
    """A page of the runs whose parent facet names ``run_id``, in the order they started
    (then by runId), with the key to pass as ``after`` for the next page; None when
    neither the run nor any child of it is known. A run view lists every child's id; a
    dbt invocation has one child per model (tens of thousands), so the web UI pages
    through them here. Every page reads the children's rows by the parent index and
    sorts them: cheap for tens of thousands, a store query ordered by start would be
    the next step for millions."""
    rows = reader.rows(RunRow, ("parent_run_id",), [(run_id,)])
    if not rows and not reader.rows(RunRow, ("run_id",), [(run_id,)]):
        return None
    rows = [r for r in rows if keep(r)]

    def key(row: RunRow) -> tuple[str, str]:
        return (row.started_key or "", row.run_id)

    ordered = sorted(rows, key=key)
    if after is not None:
        ordered = [r for r in ordered if key(r) > tuple(after)]
    last = list(key(ordered[limit - 1])) if len(ordered) > limit else None
    return run_views(reader, ordered[:limit], LISTED_CHILDREN), last
