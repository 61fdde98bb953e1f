"""A projection's notifications (docs/notifications.md#the-outbox): what it merged that
may be a cause, read before and after its merges, decided by projector/causes.py (pure) and
inserted into the outbox in the projection's own transaction — so a notification is
never lost, and never sent for a change that did not commit.

A projection without subscriptions reads nothing more than whether there are any. With
some, it reads the stored rows its batch touches that can make a cause (the checks' latest
results, the datasets' schema facets, the runs its events failed or aborted), and only
when a cause is found the subscriptions, the cause's identities (a symlinked node is
one) and, for subscriptions to what lies downstream of a dataset, the datasets upstream
of the cause.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from embrasure.model import DatasetId
from embrasure.projector import causes
from embrasure.projector.graph_rows import Contributions
from embrasure.store.base import Key, ProjectionTx
from embrasure.store.rows import SEP, CanonicalRow, DatasetCheckRow, EdgeRow, FacetRow, RunRow

# How far upstream of a cause a downstream subscription is looked for, at most, and how
# many datasets that walk may visit: a subscription's depth is capped to it (cli, API).
MAX_DEPTH = 10
MAX_REACH = 10_000


@dataclasses.dataclass
class Watch:
    """What a batch may cause, as stored before its merges."""

    settle: timedelta
    check_keys: list[Key]
    checks: dict[Key, DatasetCheckRow]
    schema_keys: dict[Key, DatasetId]  # the facets row's key → its dataset
    schemas: dict[Key, FacetRow]
    # The schemas the batch's events carry: hash → the latest eventTime key carrying it
    seen_schemas: dict[DatasetId, dict[bytes, str]]
    run_keys: list[Key]
    runs: dict[Key, RunRow]


def watch(tx: ProjectionTx, changes: Contributions, settle: timedelta | None) -> Watch | None:
    """Before the merges: the stored rows the batch may change into a cause; None when
    nothing is decided (a rebuild, whose ``settle`` is None: what it replays was decided
    when it happened; or no subscription)."""
    if settle is None or not tx.any_subscription():
        return None
    check_keys = sorted(changes.checks)
    # Every schema the batch's events carry, per dataset (not only the winner its facet
    # slot keeps): a batch holding a dataset's old and new schema changed it too.
    schema_keys: dict[Key, DatasetId] = {}
    seen: dict[DatasetId, dict[bytes, str]] = {}
    for use in changes.shapes.values():
        for owner, name, _canonical, digest, _value, deletion in use.shape.facets:
            kind, _, rest = owner.partition(SEP)
            if name == "schema" and kind == "dataset" and not deletion:
                dataset = DatasetId(*rest.split(SEP, 1))
                schema_keys[(owner, name)] = dataset
                hashes = seen.setdefault(dataset, {})
                hashes[digest] = max(hashes.get(digest, ""), use.best[0])
    # Only runs this batch failed or aborted can become so.
    run_keys = sorted(
        (run_id,) for run_id, part in changes.runs.items() if part.state.state in causes.RUN_KINDS
    )
    return Watch(
        settle,
        check_keys,
        tx.load(DatasetCheckRow, check_keys) if check_keys else {},
        schema_keys,
        tx.load(FacetRow, list(schema_keys)) if schema_keys else {},
        seen,
        run_keys,
        tx.load(RunRow, run_keys) if run_keys else {},
    )


def decide(tx: ProjectionTx, seen: Watch) -> None:
    """After the merges (and the identities' resolution): the causes, and the outbox rows
    of the subscriptions that asked for them."""
    found = causes.check_causes(seen.checks, tx.load(DatasetCheckRow, seen.check_keys))
    if seen.schema_keys:
        after = tx.load(FacetRow, list(seen.schema_keys))
        found += causes.schema_causes(
            {seen.schema_keys[k]: row for k, row in seen.schemas.items()},
            {seen.schema_keys[k]: row for k, row in after.items()},
            seen.seen_schemas,
            tx.cause_decided,
        )
    if seen.run_keys:
        after_runs = tx.load(RunRow, seen.run_keys)
        failed = [r for r in after_runs.values() if r.state in causes.RUN_KINDS]
        found += causes.run_causes(seen.runs, after_runs, _outputs(tx, failed))
    if not found:
        return
    interested = causes.Interested(tx.subscriptions())
    depth = min(interested.depth, MAX_DEPTH)
    reach = {c.key: _reach(tx, c.concerns(), depth) for c in found}
    tx.add_notifications(causes.decide(interested, found, reach, datetime.now(UTC), seen.settle))


def _outputs(tx: ProjectionTx, runs: list[RunRow]) -> dict[str, list[DatasetId]]:
    """The datasets each run's job writes (its edges, as sent: runtime and declared)."""
    jobs = sorted({(r.job_ns, r.job_name) for r in runs})
    written: dict[tuple[str, str], set[DatasetId]] = {job: set() for job in jobs}
    for edge in tx.select_by(EdgeRow, ("job_ns", "job_name"), jobs):
        if edge.direction == "out":
            written[(edge.job_ns, edge.job_name)].add(DatasetId(edge.ds_ns, edge.ds_name))
    return {r.run_id: sorted(written[(r.job_ns, r.job_name)]) for r in runs}


def _reach(tx: ProjectionTx, datasets: Iterable[DatasetId], depth: int) -> dict[DatasetId, int]:
    """Every identity of the ``datasets``' nodes at 0, and of the nodes up to ``depth``
    datasets upstream of them at their distance (the nearest), at most MAX_REACH."""
    reach: dict[DatasetId, int] = {}
    frontier = _members(tx, datasets)
    for distance in range(depth + 1):
        fresh = [d for d in frontier if d not in reach]
        for d in fresh:
            reach[d] = distance
        if distance == depth or not fresh or len(reach) >= MAX_REACH:
            break
        writers = {
            (e.job_ns, e.job_name)
            for e in tx.select_by(
                EdgeRow, ("ds_ns", "ds_name", "direction"), [(*d, "out") for d in fresh]
            )
        }
        inputs = {
            DatasetId(e.ds_ns, e.ds_name)
            for e in tx.select_by(EdgeRow, ("job_ns", "job_name"), sorted(writers))
            if e.direction == "in"
        }
        frontier = _members(tx, inputs)
    return reach


def _members(tx: ProjectionTx, identities: Iterable[DatasetId]) -> list[DatasetId]:
    """Every identity of the identities' nodes (symlinked identities are one node)."""
    sent = sorted(set(identities))
    canonical = {
        DatasetId(*key): DatasetId(row.c_ns, row.c_name)
        for key, row in tx.load(CanonicalRow, [(d.namespace, d.name) for d in sent]).items()
    }
    nodes = sorted({canonical.get(d, d) for d in sent})
    out = dict.fromkeys([*sent, *nodes])
    for row in tx.select_by(
        CanonicalRow, ("c_ns", "c_name"), [(n.namespace, n.name) for n in nodes]
    ):
        out[DatasetId(row.ns, row.name)] = None
    return list(out)
