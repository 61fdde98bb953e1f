"""Freshness (docs/notifications.md#freshness): a dataset subscription with
``stale_after`` hears once when its dataset was not written for that long, and again
only after another write went stale; a write before the notification is sent
supersedes it. On each backend, a real receiver verifying the signature."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from test_check_notifications import ORDERS
from webhook_receiver import LOOPBACK, Receiver

from embrasure.model import Subscription, utc_now
from embrasure.notify.sender import FRESHNESS_EVERY, Sender

from graph_api import Api, ds, run_event, run_id

HOUR = 3600


def written(api: Api, n: int, at: datetime) -> None:
    """A load job writing ORDERS, its run's events at ``at``."""
    time = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    api.ingest(run_event("COMPLETE", "load_orders", run_id(n), time, outputs=[ds(*ORDERS)]))


def subscribe(api: Api, receiver: Receiver, stale_after: int) -> None:
    s = Subscription(
        "sub_fresh", "dataset", *ORDERS, ("dataset.stale",), receiver.url, receiver.secret,
        utc_now(), None, stale_after=stale_after,
    )  # fmt: skip
    api.store.add_subscription(s)


def test_a_dataset_not_written_for_too_long_is_told_once_per_stale_spell(
    api: Api, receiver: Receiver
) -> None:
    now = datetime.now(UTC)
    subscribe(api, receiver, HOUR)
    written(api, 1, now - timedelta(hours=2))
    sender = Sender(api.store, targets=LOOPBACK)
    assert sender.run_once(now) == 1
    ((_, doc),) = receiver.received
    assert doc["type"] == "dataset.stale"
    assert (doc["dataset"]["namespace"], doc["dataset"]["name"]) == ORDERS
    assert doc["stale_after_seconds"] == HOUR
    assert doc["last_written_at"].startswith((now - timedelta(hours=2)).strftime("%Y-%m-%dT%H"))
    assert doc["downstream"] == {"datasets": [], "jobs": [], "truncated": False}
    # Still stale a while later: the same spell, not told again.
    assert sender.run_once(now + FRESHNESS_EVERY * 3) == 0
    # Written now: fresh. An hour and more later, stale again: told again.
    written(api, 2, now)
    assert sender.run_once(now + FRESHNESS_EVERY * 6) == 0
    assert sender.run_once(now + timedelta(hours=1, minutes=10)) == 1
    assert [d["type"] for _, d in receiver.received] == ["dataset.stale"] * 2
    assert len(set(receiver.ids_seen)) == 2


def test_a_write_before_it_is_sent_supersedes_it(api: Api, receiver: Receiver) -> None:
    now = datetime.now(UTC)
    subscribe(api, receiver, HOUR)
    written(api, 1, now - timedelta(hours=3))
    receiver.refuse = True  # down: the notification waits in the outbox
    sender = Sender(api.store, targets=LOOPBACK)
    assert sender.run_once(now) == 1
    (row,) = api.store.notifications("sub_fresh")
    assert row.state == "pending" and row.attempts == 1
    written(api, 2, now)  # the load ran after all
    receiver.refuse = False
    assert sender.run_once(now + timedelta(minutes=5)) == 1
    (row,) = api.store.notifications("sub_fresh")
    assert row.state == "superseded"  # fresh again: nobody is told it was stale
    assert receiver.received == []


def test_a_dataset_never_written_is_not_stale(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver, HOUR)
    assert Sender(api.store, targets=LOOPBACK).run_once(datetime.now(UTC) + timedelta(days=3)) == 0
    assert api.store.notifications("sub_fresh") == []


def test_a_run_sent_as_start_then_complete_is_one_write_and_one_stale_spell(
    api: Api, receiver: Receiver
) -> None:
    """START and COMPLETE in requests of their own, both long ago, the sender looking
    between them: the COMPLETE moves the write's time, not which write it is."""
    now = datetime.now(UTC)
    subscribe(api, receiver, HOUR)
    sender = Sender(api.store, targets=LOOPBACK)
    for kind, ago in (("START", 3), ("COMPLETE", 2)):
        time = (now - timedelta(hours=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        api.ingest(run_event(kind, "load_orders", run_id(1), time, outputs=[ds(*ORDERS)]))
        sender.run_once(now + FRESHNESS_EVERY * (4 - ago))
    assert [d["type"] for _, d in receiver.received] == ["dataset.stale"]
