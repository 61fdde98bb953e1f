"""Issue 43's "done when": a failed check, a dropped column and a failed run in the demo
(`embrasure demo --webhook`, embrasure/cli/demo_incident.py) each reach a local webhook
receiver once, signed, naming the right downstream datasets and owners — after any order
of the events, a reproject, and a kill -9 of the server mid-delivery; on both backends."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from test_check_notifications import later
from test_notify_server import HoldingReceiver, wait
from webhook_receiver import LOOPBACK, Receiver

from embrasure.cli import demo, demo_incident
from embrasure.model import Subscription, utc_now
from embrasure.notify.sender import Sender
from embrasure.notify.webhooks import new_secret
from embrasure.projector.worker import reproject

from conftest import ServerProcess
from graph_api import Api

TABLE = (demo.WAREHOUSE, demo.TABLE)
PATH = (demo.LAKE, demo.SPARK_PATH)  # Spark writes the table under its path
CUSTOMER_ORDERS, DAILY_REVENUE = demo.MODELS[1], demo.MODELS[2]
ANALYTICS = [{"name": "team:analytics", "type": "MAINTAINER"}]
ALICE = [{"name": "alice@demo.example", "type": "MAINTAINER"}]


def names(items: list[dict[str, Any]]) -> list[tuple[str, str, list[Any]]]:
    return [(i["namespace"], i["name"], i["owners"]) for i in items]


def check_bodies(docs: dict[str, dict[str, Any]]) -> None:
    """What each of the three says: its cause, what lies downstream, whose it is."""
    assert sorted(docs) == ["check.failed", "run.failed", "schema.changed"]
    downstream_of_table = [
        (demo.WAREHOUSE, CUSTOMER_ORDERS, ANALYTICS),
        (demo.WAREHOUSE, DAILY_REVENUE, ANALYTICS),
    ]

    failed = docs["check.failed"]
    assert (failed["dataset"]["namespace"], failed["dataset"]["name"]) == TABLE
    assert failed["dataset"]["owners"] == [{"name": "team:data-platform", "type": "MAINTAINER"}]
    check = {k: v for k, v in failed["check"].items() if k != "run"}
    assert check == {"assertion": "not_null", "column": "amount", "name": None}
    assert (failed["check"]["run"]["runId"], failed["check"]["run"]["job"]) == (
        demo._run_id(16),
        {"namespace": demo.DBT_NS, "name": "demo_shop.test_orders_clean"},
    )
    assert names(failed["downstream"]["datasets"]) == downstream_of_table
    assert (demo.DASHBOARD_NS, demo.DASHBOARD, ALICE) in names(failed["downstream"]["jobs"])

    changed = docs["schema.changed"]
    assert (changed["dataset"]["namespace"], changed["dataset"]["name"]) == PATH  # as sent
    assert changed["dataset"]["url"].endswith("name=analytics.orders_clean")  # its node
    assert changed["changes"]["removed"] == [{"name": "amount", "type": "decimal(12,2)"}]
    assert names(changed["downstream"]["datasets"]) == downstream_of_table
    ((column),) = changed["columns"]
    assert column["field"] == "amount"
    fields = {(i["name"], i.get("field")): i for i in column["impact"] if i["type"] == "field"}
    assert set(fields) == {(CUSTOMER_ORDERS, "amount"), (DAILY_REVENUE, "revenue")}
    assert not any(i["masked"] for i in fields.values())
    datasets = [i for i in column["impact"] if i["type"] == "dataset"]
    assert [(d["name"], d["owners"]) for d in datasets] == [
        (CUSTOMER_ORDERS, ANALYTICS),
        (DAILY_REVENUE, ANALYTICS),
    ]

    run = docs["run.failed"]
    assert run["job"]["name"] == "demo_shop.daily_revenue"
    assert run["run"]["state"] == "FAIL"
    assert names(run["not_refreshed"]) == [(demo.WAREHOUSE, DAILY_REVENUE, ANALYTICS)]
    assert names(run["downstream"]["jobs"]) == [(demo.DASHBOARD_NS, demo.DASHBOARD, ALICE)]


def subscribe(api: Api, receiver: Receiver) -> None:
    wanted = demo_incident.SUBSCRIPTION
    s = Subscription(
        "sub_demo",
        "dataset",
        wanted["namespace"],
        wanted["name"],
        ("check.failed", "check.recovered", "schema.changed", "run.failed", "run.aborted"),
        receiver.url,
        receiver.secret,
        utc_now(),
        None,
        depth=wanted["depth"],
    )
    api.store.add_subscription(s)


ORDERS = ["as sent", "reversed", "interleaved"]


@pytest.mark.parametrize("order", ORDERS)
def test_the_demo_night_notifies_once_each_in_any_order(api: Api, order: str) -> None:
    receiver = Receiver(new_secret())
    try:
        subscribe(api, receiver)
        night = demo_incident.events()
        if order == "reversed":
            night = night[::-1]
        elif order == "interleaved":
            night = night[1::2] + night[::2]
        api.ingest(*demo.events())
        for event in night:
            api.ingest(event)
        api.ingest(*night)  # all of it again: duplicates
        assert Sender(api.store, targets=LOOPBACK).run_once(later()) == 3
        docs = {doc["type"]: doc for _, doc in receiver.received}
        check_bodies(docs)
        reproject(api.store)
        assert Sender(api.store, targets=LOOPBACK).run_once(later(1)) == 0
        assert len(receiver.ids_seen) == 3
    finally:
        receiver.close()


def test_demo_webhook_then_kill_9_mid_delivery(db_url: str, tmp_path: Any) -> None:
    """The demo as a newcomer runs it, `embrasure demo --webhook`, then `serve`, killed
    with -9 while the receiver holds a delivery open: after a restart each of the three
    arrives once, verified, the one cut sent again under the same webhook-id."""
    receiver = HoldingReceiver(new_secret())  # the demo's secret replaces it below
    try:
        run = [sys.executable, "-m", "embrasure", "demo", "--db", db_url, "--webhook", receiver.url]
        done = subprocess.run(run, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        printed = done.stdout
        lines = printed.splitlines()
        secret = lines[lines.index(next(x for x in lines if "shown once" in x)) + 1]
        assert secret.startswith("whsec_") and f"--secret {secret}" in printed
        receiver.secret = secret
        # The receiver is on loopback: the demo says to allow it, and serve as it says.
        allow = ("--webhook-allow", "127.0.0.1")
        assert "serve --webhook-allow 127.0.0.1`" in printed
        server = ServerProcess(db_url, *allow, log_dir=tmp_path).start()
        try:
            assert receiver.arrived.wait(60), "no notification arrived"
            server.kill()  # while the receiver holds the request open
        finally:
            server.stop()
        receiver.release.set()
        again = ServerProcess(db_url, *allow, log_dir=tmp_path).start()
        try:
            wait(lambda: len(receiver.received) == 3, timeout=90)
            time.sleep(2)  # nothing more comes
        finally:
            again.stop()
        check_bodies({doc["type"]: doc for _, doc in receiver.received})
        ids = [msg_id for msg_id, _ in receiver.received]
        assert len(set(ids)) == 3
        cut = receiver.ids_seen[0]
        assert receiver.ids_seen.count(cut) == 2 and cut in ids
        assert sorted(receiver.ids_seen) == sorted([*ids, cut])
    finally:
        receiver.close()


def test_a_slack_subscription_gets_each_of_the_demo_night_as_a_message(api: Api) -> None:
    slack = Receiver(new_secret(), verify=False)  # Slack reads the body alone
    try:
        wanted = demo_incident.SUBSCRIPTION
        s = Subscription(
            "sub_slack", "dataset", wanted["namespace"], wanted["name"],
            ("check.failed", "schema.changed", "run.failed"), slack.url, slack.secret,
            utc_now(), None, "slack", wanted["depth"],
        )  # fmt: skip
        api.store.add_subscription(s)
        api.ingest(*demo.events())
        api.ingest(*demo_incident.events())
        assert Sender(api.store, targets=LOOPBACK).run_once(later()) == 3
        texts = sorted(doc["text"] for _, doc in slack.received)
        table = f"*{demo.WAREHOUSE} {demo.TABLE}*>"
        revenue = f"*{demo.WAREHOUSE} {DAILY_REVENUE}*>"
        assert texts[0].startswith(":red_circle: Check failed: `not_null` on `amount` of <")
        assert table in texts[0] and texts[0].endswith("; 2 datasets downstream")
        assert texts[1].startswith(":warning: Schema changed: <")
        assert "|*s3://demo-lake warehouse/orders_clean*>: removed `amount`;" in texts[1]
        assert texts[2].startswith(":x: Run failed: <")
        assert f"*demo-dbt demo_shop.daily_revenue*> (run {demo._run_id(18)})" in texts[2]
        assert "not refreshed: <" in texts[2] and revenue in texts[2]
    finally:
        slack.close()
