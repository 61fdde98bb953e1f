"""What a projection decides to notify (docs/notifications.md#what-fires), as pure
functions over the rows it merged: no store, no clock of their own.

A **check failed** when the latest result of a data-quality check (the
``dataQualityAssertions`` facet's assertion, its stored row in ``dataset_checks``: the
latest by eventTime wins, projector/quality.py) is a failure that this projection made
the latest. A late, older result changes no stored row, so it decides nothing: it never
fires "failed" when a newer run passed. A check **recovered** when a pass replaced a
failure as the latest result; it names the failure it recovers from.

Each cause has a stable key (what it is about and the result's eventTime and hash), and
the outbox keeps one row per (subscription, cause) (store/outbox_sql.py): a duplicate
event, a second projector, or a replay decide the same key, which is already there.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from embrasure.model import DatasetId, Notification, Subscription
from embrasure.store.base import Key
from embrasure.store.rows import DatasetCheckRow

KINDS = ("check.failed", "check.recovered")
# How long a decided notification waits before it is sent, and checked to still hold:
# results of one check that arrive out of order within it fire what they would have in
# order (docs/notifications.md#order).
SETTLE = timedelta(seconds=10)


@dataclasses.dataclass(frozen=True)
class Cause:
    kind: str
    key: str  # stable: the same facts decide the same key, whoever decides them
    dataset: DatasetId  # as sent
    facts: dict[str, Any]  # what the notification says about it


def check_key(kind: str, row: DatasetCheckRow) -> str:
    return " ".join(
        (kind, row.ds_ns, row.ds_name, row.check_id, row.check_key, row.check_hash.hex())
    )


def check_causes(
    before: Mapping[Key, DatasetCheckRow], after: Mapping[Key, DatasetCheckRow]
) -> list[Cause]:
    """The causes of a projection's checks: ``before`` and ``after`` are the stored rows
    of the checks it touched, read before and after its merge."""
    out = []
    for key, now in sorted(after.items()):
        old = before.get(key)
        if old is not None and (old.check_key, old.check_hash) == (now.check_key, now.check_hash):
            continue  # the latest result is not this projection's
        assertion, column, name = orjson.loads(now.check_id)
        facts: dict[str, Any] = {
            "check": {"assertion": assertion, "column": column, "name": name},
            "result_time": now.check_key or None,
        }
        if now.failed:
            out.append(Cause("check.failed", check_key("check.failed", now), _dataset(now), facts))
        elif old is not None and old.failed:
            facts["recovers"] = check_key("check.failed", old)
            out.append(
                Cause("check.recovered", check_key("check.recovered", now), _dataset(now), facts)
            )
    return out


def _dataset(row: DatasetCheckRow) -> DatasetId:
    return DatasetId(row.ds_ns, row.ds_name)


class Interested:
    """The subscriptions by what they watch, so a cause finds its own in a lookup or two,
    not a scan of them all (a deployment may hold thousands)."""

    def __init__(self, subscriptions: Iterable[Subscription]) -> None:
        self.by_target: dict[tuple[str, str, str], list[Subscription]] = {}
        for s in subscriptions:
            self.by_target.setdefault((s.target, s.namespace, s.name), []).append(s)

    def of(self, cause: Cause, identities: Sequence[DatasetId]) -> list[Subscription]:
        """The subscriptions that asked for ``cause``: its kind, on one of the
        ``identities`` of its dataset's node, or on one of their namespaces."""
        watching: dict[str, Subscription] = {}
        for ns, name in identities:
            for target in (("dataset", ns, name), ("namespace", ns, "")):
                for s in self.by_target.get(target, ()):
                    watching.setdefault(s.subscription_id, s)
        return [s for s in watching.values() if cause.kind in s.events]


def notification_id(subscription_id: str, cause: str) -> str:
    """The webhook-id (Standard Webhooks): the same for every attempt, and for the same
    cause decided again, so a receiver drops repeats by it."""
    digest = hashlib.sha256(f"{subscription_id}\n{cause}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def decide(
    subscriptions: Sequence[Subscription],
    causes: Iterable[Cause],
    identities: Mapping[DatasetId, Sequence[DatasetId]],
    now: datetime,
    settle: timedelta,
) -> list[Notification]:
    """The outbox rows for ``causes``, one per subscription that asked for each (by any
    of the ``identities`` of its dataset's node: the one it was sent under when none is
    given), due after ``settle`` (the sender checks then that the cause still holds)."""
    decided = now.isoformat(timespec="microseconds")
    due = (now + settle).isoformat(timespec="microseconds")
    rows = []
    interested = Interested(subscriptions)
    for cause in causes:
        for s in interested.of(cause, identities.get(cause.dataset, [cause.dataset])):
            body = {
                "type": cause.kind,
                "subscription": s.subscription_id,
                "dataset": {"namespace": cause.dataset.namespace, "name": cause.dataset.name},
                **cause.facts,
            }
            rows.append(
                Notification(
                    s.subscription_id,
                    cause.key,
                    notification_id(s.subscription_id, cause.key),
                    cause.kind,
                    orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode(),
                    decided,
                    "pending",
                    0,
                    due,
                    None,
                    None,
                )
            )
    return rows
