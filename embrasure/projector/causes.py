"""What a projection decides to notify (docs/notifications.md#what-fires), as pure
functions over the rows it merged: no store, no clock of their own.

A **check failed** when the latest result of a data-quality check (the
``dataQualityAssertions`` facet's assertion, its stored row in ``dataset_checks``: the
latest by eventTime wins, projector/quality.py) is a failure that this projection made
the latest. A late, older result changes no stored row, so it decides nothing: it never
fires "failed" when a newer run passed. A check **recovered** when a pass replaced a
failure as the latest result; it names the failure it recovers from.

Each cause has a stable key, named for what changed (a check's result by its eventTime
and hash, a schema by the one it replaced and the one it became, a run by its id), and
the outbox keeps one row per (subscription, cause) (store/outbox_sql.py): a duplicate
event, a second projector, or a replay decide the same key, which is already there.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from embrasure.model import DatasetId, JobId, Notification, Subscription
from embrasure.store.base import Key
from embrasure.store.rows import DatasetCheckRow, FacetRow, RunRow

KINDS = (
    "check.failed",
    "check.recovered",
    "schema.changed",
    "run.failed",
    "run.aborted",
    "dataset.stale",
)
CHECK_KINDS = ("check.failed", "check.recovered")
RUN_KINDS = {"FAIL": "run.failed", "ABORT": "run.aborted"}
# A subscription's ``stale_after``, in seconds: a minute (the sender looks once a
# minute) to a year.
STALE_AFTER = (60, 366 * 86_400)
# How long a decided notification waits before it is sent, and checked to still hold:
# results of one check that arrive out of order within it fire what they would have in
# order (docs/notifications.md#order).
SETTLE = timedelta(seconds=10)


@dataclasses.dataclass(frozen=True)
class Cause:
    kind: str
    key: str  # stable: the same facts decide the same key, whoever decides them
    dataset: DatasetId | None  # as sent: what the notification is about, or a job's run
    facts: dict[str, Any]  # what the notification says about it
    job: JobId | None = None
    # Every dataset it concerns (as sent; ``dataset`` first): a failed run's outputs,
    # which it did not refresh. A subscription on any of them hears of it.
    datasets: tuple[DatasetId, ...] = ()

    def concerns(self) -> tuple[DatasetId, ...]:
        return self.datasets or ((self.dataset,) if self.dataset is not None else ())


def check_prefix(kind: str, dataset: DatasetId, check: str) -> str:
    """Every key of ``kind`` about one check (its dataset and check id) starts so."""
    return f"{kind} {orjson.dumps([dataset.namespace, dataset.name, check]).decode()} "


def check_key(kind: str, row: DatasetCheckRow) -> str:
    """A check's failure or recovery, named by the result that made it so."""
    prefix = check_prefix(kind, _dataset(row), row.check_id)
    return f"{prefix}{row.check_key} {row.check_hash.hex()}"


def check_causes(
    before: Mapping[Key, DatasetCheckRow], after: Mapping[Key, DatasetCheckRow]
) -> list[Cause]:
    """The causes of a projection's checks: ``before`` and ``after`` are the stored rows
    of the checks it touched, read before and after its merge. A check **failed** when
    its latest result became a failure where it was none or a pass, and **recovered**
    when it became a pass where it was a failure: judged by what changed, so a result
    said again (a producer repeating the facet on RUNNING and COMPLETE, a duplicate, a
    new run failing the same way) decides nothing, and a late older result changes no
    stored row (projector/quality.py) and decides nothing either."""
    out = []
    for key, now in sorted(after.items()):
        old = before.get(key)
        was_failed = old is not None and old.failed
        if now.failed == was_failed:
            continue
        assertion, column, name = orjson.loads(now.check_id)
        facts: dict[str, Any] = {
            "check": {"assertion": assertion, "column": column, "name": name},
            "result_time": now.check_key or None,
        }
        kind = "check.failed" if now.failed else "check.recovered"
        out.append(Cause(kind, check_key(kind, now), _dataset(now), facts))
    return out


def schema_key(dataset: DatasetId, new: bytes, old: bytes, old_key: str) -> str:
    """A schema change by what changed: the dataset, the schema it became, and the one it
    replaced (by hash, and that schema's latest eventTime key). Not by which event said
    the new schema last: a run's START and COMPLETE both carry it, and the second
    decides nothing new."""
    return f"{schema_prefix(dataset, new)}{old.hex()} {old_key}"


def schema_prefix(dataset: DatasetId, new: bytes | None = None) -> str:
    """Every key of a change of the dataset's schema (to ``new``, if given) starts so.
    The dataset as JSON: a name holding spaces is not the prefix of another's."""
    named = orjson.dumps([dataset.namespace, dataset.name]).decode()
    return f"schema.changed {named} " + (f"{new.hex()} " if new is not None else "")


def schema_holds(cause: str, row: FacetRow) -> bool:
    """Whether the dataset's current schema (its facet row) is still the one ``cause``
    changed it to (the key's third word from the end: hashes and eventTime keys hold no
    spaces)."""
    return row.value_hash is not None and cause.rsplit(" ", 3)[1] == row.value_hash.hex()


def schema_causes(
    before: Mapping[DatasetId, FacetRow],
    after: Mapping[DatasetId, FacetRow],
    seen: Mapping[DatasetId, Mapping[bytes, str]],
    decided: Callable[[str], bool],
) -> list[Cause]:
    """The schema changes a projection made or revealed: ``before``/``after`` the stored
    schema facet (SchemaDatasetFacet) of each dataset whose schema its events carry,
    ``seen`` those schemas' hashes, each with the latest eventTime key that carried it;
    ``decided(prefix)``: whether a cause with that key prefix is in the outbox.

    When the stored schema changed, that is a change now, from the latest other schema
    known here (the stored one before, or one the batch carries). When it did not, a
    schema seen that differs is older (the facet rule keeps the latest): it arrived
    late, or again. It reveals a change only if none to the current schema was ever
    decided — the current schema came first, into a dataset that had none — so a late
    START and COMPLETE of an old run, or a duplicate of an old event, decide nothing
    twice. What changed (against the write before the latest, whatever arrived when) is
    read when it is sent (sender.py), after SETTLE, and nothing is sent when it changed
    nothing."""
    out = []
    for dataset, now in sorted(after.items()):
        if now.value_hash is None:
            continue  # deleted: no schema to compare
        old = before.get(dataset)
        known = {h: k for h, k in seen.get(dataset, {}).items() if h != now.value_hash}
        changed = old is not None and old.value_hash not in (None, now.value_hash)
        if changed:
            assert old is not None and old.value_hash is not None
            known[old.value_hash] = max(known.get(old.value_hash, ""), old.value_key or "")
        if not known or (not changed and decided(schema_prefix(dataset, now.value_hash))):
            continue
        replaced, replaced_key = max(known.items(), key=lambda item: (item[1], item[0]))
        facts = {"schema_time": now.value_key or None}
        key = schema_key(dataset, now.value_hash, replaced, replaced_key)
        out.append(Cause("schema.changed", key, dataset, facts))
    return out


def run_key(kind: str, row: RunRow) -> str:
    return " ".join((kind, row.run_id))


def run_causes(
    before: Mapping[Key, RunRow],
    after: Mapping[Key, RunRow],
    outputs: Mapping[str, list[DatasetId]],
) -> list[Cause]:
    """The runs a projection made failed or aborted (their merged state: a FAIL outranks
    every other event, whatever the order, projector/runs.py), each with the datasets
    its job writes (``outputs`` by run id: as sent), which it did not refresh."""
    out = []
    for key, now in sorted(after.items()):
        kind = RUN_KINDS.get(now.state or "")
        old = before.get(key)
        if kind is None or (old is not None and old.state == now.state):
            continue
        written = tuple(outputs.get(now.run_id, ()))
        facts = {
            "run": {"runId": now.run_id, "state": now.state, "ended_at": now.ended_text},
            "not_refreshed": [_id(d) for d in written],
        }
        job = JobId(now.job_ns, now.job_name)
        out.append(
            Cause(kind, run_key(kind, now), written[0] if written else None, facts, job, written)
        )
    return out


def stale_key(dataset: DatasetId, writer: str) -> str:
    """A stale spell, named by the run whose write it waits after: not by that run's
    latest eventTime, which its COMPLETE moves past its START's (one write, one spell)."""
    return " ".join(("dataset.stale", dataset.namespace, dataset.name, writer))


def stale(
    s: Subscription, writer: str, last_written: str, last_text: str | None, now: datetime
) -> Notification | None:
    """A dataset subscription's freshness (``stale_after``): the notification that its
    dataset was not written since ``last_written`` (its latest write's eventTime key, by
    the run ``writer``), when that is longer ago than ``stale_after`` at ``now``; one
    per write it waits after (the key names it), decided by the sender, since no event
    causes it."""
    written = datetime.fromisoformat(last_written[:19]).replace(tzinfo=UTC)
    if not s.stale_after or now - written <= timedelta(seconds=s.stale_after):
        return None
    dataset = DatasetId(s.namespace, s.name)
    key = stale_key(dataset, writer)
    body = {
        "type": "dataset.stale",
        "subscription": s.subscription_id,
        "dataset": _id(dataset),
        "last_written_at": last_text,
        "stale_after_seconds": s.stale_after,
    }
    decided = now.isoformat(timespec="microseconds")
    return pending(s.subscription_id, key, "dataset.stale", body, decided, decided)


def _hex(row: FacetRow) -> str:
    return row.value_hash.hex() if row.value_hash is not None else ""


def _dataset(row: DatasetCheckRow) -> DatasetId:
    return DatasetId(row.ds_ns, row.ds_name)


class Interested:
    """The subscriptions by what they watch, so a cause finds its own in a lookup or two,
    not a scan of them all (a deployment may hold thousands)."""

    def __init__(self, subscriptions: Iterable[Subscription]) -> None:
        self.by_target: dict[tuple[str, str, str], list[Subscription]] = {}
        for s in subscriptions:
            self.by_target.setdefault((s.target, s.namespace, s.name), []).append(s)
        # How far upstream of a cause a dataset subscription may be (its ``depth``).
        self.depth = max((s.depth for s in subscriptions if s.target == "dataset"), default=0)

    def of(self, cause: Cause, reach: Mapping[DatasetId, int]) -> list[Subscription]:
        """The subscriptions that asked for ``cause``'s kind, on what it concerns:
        ``reach`` holds every identity of the datasets it concerns (at 0) and of those
        upstream of them, each at its distance in datasets (a dataset, a job, a
        dataset: 1). A dataset subscription watches its dataset and ``depth`` below it;
        a namespace one its datasets and jobs; a job one its runs."""
        watching: dict[str, Subscription] = {}

        def add(target: tuple[str, str, str], distance: int = 0) -> None:
            for s in self.by_target.get(target, ()):
                if distance <= s.depth:
                    watching.setdefault(s.subscription_id, s)

        for (ns, name), distance in reach.items():
            add(("dataset", ns, name), distance)
            if distance == 0:
                add(("namespace", ns, ""))
        if cause.job is not None:
            add(("job", cause.job.namespace, cause.job.name))
            add(("namespace", cause.job.namespace, ""))
        return [s for s in watching.values() if cause.kind in s.events]


def notification_id(subscription_id: str, cause: str) -> str:
    """The webhook-id (Standard Webhooks): the same for every attempt, and for the same
    cause decided again, so a receiver drops repeats by it."""
    digest = hashlib.sha256(f"{subscription_id}\n{cause}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def decide(
    interested: Interested,
    causes: Iterable[Cause],
    reach: Mapping[str, Mapping[DatasetId, int]],
    now: datetime,
    settle: timedelta,
) -> list[Notification]:
    """The outbox rows for ``causes``, one per subscription that asked for each (by
    what ``reach`` holds for the cause's key: Interested.of; the datasets it concerns,
    as sent, when none is given), due after ``settle`` (the sender checks then that the
    cause still holds, and adds what lies downstream: notify/impact.py)."""
    decided = now.isoformat(timespec="microseconds")
    due = (now + settle).isoformat(timespec="microseconds")
    rows = []
    for cause in causes:
        found = reach.get(cause.key) or dict.fromkeys(cause.concerns(), 0)
        for s in interested.of(cause, found):
            body: dict[str, Any] = {"type": cause.kind, "subscription": s.subscription_id}
            if cause.dataset is not None:
                body["dataset"] = _id(cause.dataset)
            if cause.job is not None:
                body["job"] = _id(cause.job)
            rows.append(
                pending(s.subscription_id, cause.key, cause.kind, body | cause.facts, decided, due)
            )
    return rows


def pending(
    subscription_id: str, cause: str, kind: str, body: dict[str, Any], decided: str, due: str
) -> Notification:
    """A new outbox row: pending, due at ``due``, under its stable webhook-id."""
    return Notification(
        subscription_id,
        cause,
        notification_id(subscription_id, cause),
        kind,
        orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode(),
        decided,
        "pending",
        0,
        due,
        None,
        None,
    )


def _id(entity: DatasetId | JobId) -> dict[str, str]:
    return {"namespace": entity.namespace, "name": entity.name}
