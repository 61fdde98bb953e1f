"""Failed and recovered data-quality checks reach a subscriber's webhook once, signed
(docs/notifications.md): the in-process app on each backend, a real HTTP receiver on
loopback that verifies each request with the Standard Webhooks library, as a receiver
would; the events in any order, duplicated, and a late older result."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from webhook_receiver import LOOPBACK, Receiver

from embrasure.model import Subscription, utc_now
from embrasure.notify.sender import DEFAULT_URL, Sender
from embrasure.notify.webhooks import new_secret
from embrasure.projector.worker import reproject

from graph_api import Api, at, ds, facet, run_event, run_id, symlinks

ORDERS = ("postgres://db:5432", "shop.orders")


def assertions(ok: bool) -> dict[str, Any]:
    listed = [{"assertion": "not_null", "success": ok, "column": "id"}]
    return facet("DataQualityAssertionsDatasetFacet", "1-1-0", assertions=listed)


def check(n: int, hour: int, ok: bool) -> dict[str, Any]:
    """A dbt test run reading ORDERS, its result as an input facet (OpenLineage's place)."""
    checked = {**ds(*ORDERS), "inputFacets": {"dataQualityAssertions": assertions(ok)}}
    return run_event("COMPLETE", "checks", run_id(n), at(hour), inputs=[checked])


def subscribe(api: Api, receiver: Receiver, secret: str | None = None) -> Subscription:
    s = Subscription(
        "sub1",
        "dataset",
        *ORDERS,
        ("check.failed", "check.recovered"),
        receiver.url,
        secret or receiver.secret,
        utc_now(),
        None,
    )
    api.store.add_subscription(s)
    return s


def later(hours: int = 0) -> datetime:
    """A minute from now (past the settle window), and ``hours`` more."""
    return datetime.now(UTC) + timedelta(minutes=1, hours=hours)


def deliver(api: Api) -> int:
    return Sender(api.store, targets=LOOPBACK).run_once(later())


def test_a_failed_check_reaches_the_subscriber_once_signed(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver)
    api.ingest(check(1, 9, ok=True))
    api.ingest(check(2, 10, ok=False))
    api.ingest(check(2, 10, ok=False))  # the same event again: a duplicate
    assert deliver(api) == 1
    ((msg_id, doc),) = receiver.received
    assert doc["type"] == "check.failed"
    # The dataset, with its owners (none here) and its page in the UI.
    page = "namespace=postgres%3A%2F%2Fdb%3A5432&name=shop.orders"
    assert doc["dataset"] == {
        "namespace": ORDERS[0],
        "name": ORDERS[1],
        "owners": [],
        "url": f"{DEFAULT_URL}/#/dataset?{page}",
    }
    # What reads it: the check's own job (a dbt test reads what it checks).
    assert doc["downstream"] == {
        "datasets": [],
        "jobs": [
            {
                "type": "job",
                "namespace": "spark",
                "name": "checks",
                "distance": 1,
                "owners": [],
                "url": f"{DEFAULT_URL}/#/job?namespace=spark&name=checks",
            }
        ],
        "truncated": False,
    }
    # The check, and the run that sent its failing result (with its page).
    assert doc["check"] == {
        "assertion": "not_null",
        "column": "id",
        "name": None,
        "run": {
            "runId": run_id(2),
            "job": {"namespace": "spark", "name": "checks"},
            "url": f"{DEFAULT_URL}/#/run?id={run_id(2)}",
        },
    }
    assert msg_id.startswith("msg_")
    assert deliver(api) == 0  # sent: nothing more is due
    # The next passing result recovers it.
    api.ingest(check(3, 11, ok=True))
    assert deliver(api) == 1
    assert [d["type"] for _, d in receiver.received] == ["check.failed", "check.recovered"]
    assert receiver.received[1][1]["recovers"]
    metrics = api.client.get("/metrics").text
    assert 'embrasure_notifications{state="sent"} 2.0' in metrics
    assert 'embrasure_notifications{state="pending"} 0.0' in metrics
    assert "embrasure_notifications_oldest_pending_seconds 0.0" in metrics
    # Rows done are deleted 30 days later (the outbox stays bounded).
    assert Sender(api.store, targets=LOOPBACK).run_once(later(24 * 29)) == 0
    assert len(api.store.notifications()) == 2
    assert Sender(api.store, targets=LOOPBACK).run_once(later(24 * 31)) == 0
    assert api.store.notifications() == []


def checked_run(n: int, hour: int, ok: bool) -> list[dict[str, Any]]:
    """A run that reports its check on RUNNING and repeats it on COMPLETE, each event in
    a request of its own (as a producer sending over HTTP does)."""
    checked = {**ds(*ORDERS), "inputFacets": {"dataQualityAssertions": assertions(ok)}}
    return [
        run_event("START", "checks", run_id(n), at(hour), inputs=[ds(*ORDERS)]),
        run_event("RUNNING", "checks", run_id(n), at(hour, 10), inputs=[checked]),
        run_event("COMPLETE", "checks", run_id(n), at(hour, 20), inputs=[checked]),
    ]


@pytest.mark.parametrize("between", [False, True], ids=["sent at the end", "sent between"])
def test_a_check_is_told_when_it_fails_and_when_it_recovers_not_each_time_it_is_said(
    api: Api, receiver: Receiver, between: bool
) -> None:
    """A result repeated by RUNNING and COMPLETE, and a second run failing the same way,
    change nothing: one failure, then one recovery naming it, then a new failure."""
    subscribe(api, receiver)
    runs = [(1, 9, True), (2, 10, False), (3, 11, False)]
    for n, hour, ok in runs:
        for event in checked_run(n, hour, ok):
            api.ingest(event)
            if between:
                deliver(api)
    deliver(api)
    ((failed_id, failed),) = receiver.received
    assert failed["type"] == "check.failed"
    assert failed["result_time"].startswith(f"{at(10, 10)[:16]}")  # RUNNING's, first said
    for event in checked_run(4, 12, True):
        api.ingest(event)
    deliver(api)
    for event in checked_run(5, 13, False):
        api.ingest(event)
    deliver(api)
    kinds = [doc["type"] for _, doc in receiver.received]
    assert kinds == ["check.failed", "check.recovered", "check.failed"]
    failure = next(n.cause for n in api.store.notifications() if n.notification_id == failed_id)
    assert receiver.received[1][1]["recovers"] == failure


def test_a_late_older_failure_fires_nothing(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver)
    api.ingest(check(3, 11, ok=True))
    api.ingest(check(2, 10, ok=False))  # older than the pass: not the latest result
    assert deliver(api) == 0
    assert receiver.received == []


def test_out_of_order_within_the_settle_window_fires_what_in_order_would(
    api: Api, receiver: Receiver
) -> None:
    # In order: fail at 10, pass at 11 — the failure is superseded before it is sent,
    # and the recovery of a failure nobody heard of is not sent either.
    subscribe(api, receiver)
    api.ingest(check(2, 10, ok=False))
    api.ingest(check(3, 11, ok=True))
    assert deliver(api) == 2
    assert receiver.received == []
    states = sorted(n.state for n in api.store.notifications())
    assert states == ["superseded", "superseded"]


def test_a_receiver_that_is_down_gets_it_later_with_the_same_id(
    api: Api, receiver: Receiver
) -> None:
    subscribe(api, receiver)
    api.ingest(check(2, 10, ok=False))
    receiver.refuse = True
    assert deliver(api) == 1
    (n,) = api.store.notifications()
    assert (n.state, n.attempts) == ("pending", 1) and "503" in (n.last_error or "")
    assert 'embrasure_notifications{state="pending"} 1.0' in api.client.get("/metrics").text
    for retry in range(1, 4):  # refused again and again: /readyz names the subscription
        assert Sender(api.store, targets=LOOPBACK).run_once(later(retry)) == 1
    assert api.client.get("/readyz").json()["notifications"] == {
        "status": "failing",
        "subscriptions": ["sub1"],
    }
    receiver.refuse = False
    assert Sender(api.store, targets=LOOPBACK).run_once(later(5)) == 1
    ((msg_id, doc),) = receiver.received
    assert msg_id == n.notification_id and doc["type"] == "check.failed"
    (sent,) = api.store.notifications()
    assert (sent.state, sent.attempts) == ("sent", 5)
    assert "notifications" not in api.client.get("/readyz").json()


def test_a_forged_signature_is_refused_by_the_receiver(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver, secret=new_secret())  # not the receiver's secret
    api.ingest(check(2, 10, ok=False))
    assert deliver(api) == 1
    assert receiver.received == []
    (n,) = api.store.notifications()
    assert n.state == "pending" and "401" in (n.last_error or "")


def test_reprojection_sends_nothing_again(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver)
    api.ingest(check(2, 10, ok=False))
    assert deliver(api) == 1
    reproject(api.store)
    api.project()
    assert deliver(api) == 0
    assert len(receiver.received) == 1
    assert orjson.loads(api.store.notifications()[0].body)["type"] == "check.failed"


def test_two_senders_send_each_notification_once(api: Api, receiver: Receiver) -> None:
    # Several processes (serve on several machines, on PostgreSQL) each run a sender:
    # a notification is claimed by one of them (store/outbox_sql.py claim).
    subscribe(api, receiver)
    namespace = Subscription(
        "sub2", "namespace", ORDERS[0], "", ("check.failed",), receiver.url,
        receiver.secret, utc_now(), None,
    )  # fmt: skip
    api.store.add_subscription(namespace)
    for n in range(1, 8):  # fails at 1, 3, 5, 7, each a transaction: 11 outbox rows
        api.ingest(check(n, 9 + n, ok=n % 2 == 0))
    senders = [Sender(api.store, targets=LOOPBACK) for _ in range(2)]
    counts: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: counts.append(s.run_once(later()))) for s in senders
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = api.store.notifications()
    assert len(rows) == 11 and sum(counts) == 11  # each handled by one sender
    assert all(n.state in ("sent", "superseded") and n.attempts <= 1 for n in rows)
    ids = [msg_id for msg_id, _ in receiver.received]
    assert len(ids) == len(set(ids)) == 2
    # The latest result (7, a failure) is what holds: one check.failed per subscription.
    assert sorted(d["subscription"] for _, d in receiver.received) == ["sub1", "sub2"]


def test_a_slack_subscription_gets_a_slack_message(api: Api) -> None:
    slack = Receiver(new_secret(), verify=False)
    try:
        s = Subscription(
            "sub_slack", "dataset", *ORDERS, ("check.failed",), slack.url, slack.secret,
            utc_now(), None, "slack",
        )  # fmt: skip
        api.store.add_subscription(s)
        assert api.store.subscriptions()[0].format == "slack"
        api.ingest(check(2, 10, ok=False))
        assert deliver(api) == 1
        ((_, doc),) = slack.received
        page = f"{DEFAULT_URL}/#/dataset?namespace=postgres%3A%2F%2Fdb%3A5432&name=shop.orders"
        assert doc == {
            "text": f":red_circle: Check failed: `not_null` on `id` of"
            f" <{page}|*postgres://db:5432 shop.orders*>"
            " (result of 2026-11-30T10:00:00.000000000Z)"
        }
    finally:
        slack.close()


def test_a_check_sent_under_an_alias_reaches_the_subscriber_of_its_table(
    api: Api, receiver: Receiver
) -> None:
    # Spark checks the path; the subscriber watches the warehouse table the path is
    # symlinked to: one node (docs/projection.md#symlinks).
    subscribe(api, receiver)
    path = ("s3://lake", "warehouse/orders")
    checked = {
        **ds(*path, symlinks=symlinks((*ORDERS, "TABLE"))),
        "inputFacets": {"dataQualityAssertions": assertions(False)},
    }
    api.ingest(run_event("COMPLETE", "spark_checks", run_id(9), at(10), inputs=[checked]))
    assert deliver(api) == 1
    ((_, doc),) = receiver.received
    assert doc["type"] == "check.failed"
    # As it was sent; its link is its node's page, the table's.
    assert (doc["dataset"]["namespace"], doc["dataset"]["name"]) == path
    assert doc["dataset"]["url"].endswith("namespace=postgres%3A%2F%2Fdb%3A5432&name=shop.orders")


def test_two_projectors_on_postgresql_decide_each_cause_once(pg_db: str) -> None:
    """Several projectors (docs/postgres.md) each claim deliveries in their own
    transactions: the same cause decided in two at once is one outbox row."""
    from embrasure.projector.worker import Projector, ProjectorLimits
    from embrasure.store import open_store

    from conftest import make_client

    with make_client(pg_db) as client:
        api = Api(client)
        receiver_url = "http://127.0.0.1:9/hook"  # never sent to: only the outbox is read
        s = Subscription(
            "sub_ns", "namespace", ORDERS[0], "", ("check.failed",), receiver_url,
            new_secret(), utc_now(), None,
        )  # fmt: skip
        api.store.add_subscription(s)
        tables = [f"shop.t{i:02d}" for i in range(40)]
        for copy in ("a", "b"):  # every failing result twice, in deliveries of their own
            for n, table in enumerate(tables):
                checked = {
                    **ds(ORDERS[0], table),
                    "inputFacets": {"dataQualityAssertions": assertions(False)},
                }
                event = run_event("COMPLETE", "checks", run_id(100 + n), at(10), inputs=[checked])
                api.post(event, provider_key=f"{copy}{n}", single=True)
        stores = [open_store(pg_db) for _ in range(2)]
        # A default transaction takes all 80 deliveries at once; claims of 8 make the
        # two projectors share them, which is the interleaving this test is about.
        limits = ProjectorLimits(batch_deliveries=8)
        done: list[int] = []
        try:
            threads = [
                threading.Thread(
                    target=lambda store=store: done.append(
                        Projector(store, limits).run_until_caught_up()
                    )
                )
                for store in stores
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        finally:
            for store in stores:
                store.close()
        # Both projected some of the deliveries (whichever interleaving happened, the
        # rule must hold in it): one row per cause.
        assert len(done) == 2 and sum(done) == 2 * len(tables) and min(done) > 0, done
        rows = api.store.notifications("sub_ns")
        assert len(rows) == len(tables)
        assert sorted(orjson.loads(r.body)["dataset"]["name"] for r in rows) == tables
