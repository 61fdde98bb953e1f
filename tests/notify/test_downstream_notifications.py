"""Schema changes and failed runs reach their subscribers once, signed, naming what lies
downstream and whose it is (docs/notifications.md): the in-process app on each backend,
the events in several orders, duplicated, reprojected; a real receiver verifying each
request (tests/notify/test_check_notifications.py's). The column-level impact of a
dropped column is checked against the impact API's answer for the same field, on a
small graph and on the platform of bench/query.py."""

from __future__ import annotations

import copy
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_check_notifications import assertions, later
from webhook_receiver import LOOPBACK, Receiver

from embrasure.model import Subscription, utc_now
from embrasure.notify.sender import DEFAULT_URL, Sender
from embrasure.projector.worker import reproject

from graph_api import (
    Api,
    at,
    column_lineage,
    ds,
    facet,
    input_field,
    run_event,
    run_id,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import query

RAW = ("s3://lake", "raw/orders")
ORDERS = ("postgres://db:5432", "shop.orders")
REPORT = ("postgres://db:5432", "analytics.report")
DASH = ("bi://superset", "dashboards.revenue")
AGGREGATE = ("DIRECT", "AGGREGATION", False)
IDENTITY = ("DIRECT", "IDENTITY", False)
MASKED = ("DIRECT", "IDENTITY", True)


def owned(*names: str) -> dict[str, Any]:
    owners = [{"name": n, "type": "MAINTAINER"} for n in names]
    return facet("OwnershipDatasetFacet", "1-0-1", owners=owners)


def table_schema(*fields: tuple[str, str]) -> dict[str, Any]:
    listed = [{"name": n, "type": t} for n, t in fields]
    return facet("SchemaDatasetFacet", "1-2-0", fields=listed)


V1 = table_schema(("id", "bigint"), ("amount", "decimal"), ("note", "string"))
V2 = table_schema(("id", "bigint"), ("note", "text"), ("region", "string"))


def load(n: int, hour: int, schema: dict[str, Any], event_type: str = "COMPLETE") -> Any:
    """load_orders: RAW → ORDERS, ORDERS owned by the sales team."""
    out = ds(*ORDERS, schema=schema, ownership=owned("team:sales"))
    return run_event(
        event_type, "load_orders", run_id(n), at(hour), inputs=[ds(*RAW)], outputs=[out]
    )


def report(n: int, hour: int) -> Any:
    """order_report: ORDERS → REPORT, ``total`` summed from ``amount``, ``note`` masked."""
    lineage = column_lineage(
        {
            "total": [input_field(ORDERS, "amount", AGGREGATE)],
            "note": [input_field(ORDERS, "note", MASKED)],
            "id": [input_field(ORDERS, "id", IDENTITY)],
        }
    )
    out = ds(*REPORT, columnLineage=lineage, ownership=owned("team:finance"))
    return run_event(
        "COMPLETE", "order_report", run_id(n), at(hour), inputs=[ds(*ORDERS)], outputs=[out]
    )


def dashboard(n: int, hour: int) -> Any:
    lineage = column_lineage({"revenue": [input_field(REPORT, "total", IDENTITY)]})
    out = ds(*DASH, columnLineage=lineage, ownership=owned("alice@example.com"))
    return run_event(
        "COMPLETE",
        "revenue_dashboard",
        run_id(n),
        at(hour),
        inputs=[ds(*REPORT)],
        outputs=[out],
        namespace="superset",
    )


def subscribe(
    api: Api,
    receiver: Receiver,
    sub: str,
    target: tuple[str, str, str],
    events: tuple[str, ...],
    depth: int = 0,
) -> None:
    s = Subscription(
        sub, *target, events, receiver.url, receiver.secret, utc_now(), None, depth=depth
    )
    api.store.add_subscription(s)


def deliver(api: Api) -> int:
    return Sender(api.store, targets=LOOPBACK).run_once(later())


def link(page: str, query_text: str) -> str:
    return f"{DEFAULT_URL}/#/{page}?{query_text}"


def described(kind: str, d: tuple[str, str], distance: int, owners: list[str]) -> dict[str, Any]:
    return {
        "type": kind,
        "namespace": d[0],
        "name": d[1],
        "distance": distance,
        "owners": [{"name": o, "type": "MAINTAINER"} for o in owners],
    }


def without_urls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in i.items() if k != "url"} for i in items]


def same_as_the_impact_api(
    api: Api, dataset: tuple[str, str], field: str, impact: list[dict[str, Any]]
) -> bool:
    """Whether a notification's impact of a column lists what GET /api/v1/impact answers
    for that field: the same nodes, in the same order, at the same distances, masked
    alike."""
    expected = api.get("/api/v1/impact", namespace=dataset[0], name=dataset[1], field=field)
    listed = [
        (i["type"], i["namespace"], i["name"], i.get("field"), i["distance"], i["masked"])
        for i in impact
    ]
    return listed == [
        (n["type"], n["namespace"], n["name"], n.get("field"), i["distance"], i["masked"])
        for i in expected["items"]
        for n in [i["node"]]
        if n["type"] != "hidden"
    ]


ORDERS_DOWNSTREAM = {
    "datasets": [
        described("dataset", REPORT, 2, ["team:finance"]),
        described("dataset", DASH, 4, ["alice@example.com"]),
    ],
    "jobs": [
        {**described("job", ("spark", "order_report"), 1, []), "owners": []},
        {**described("job", ("superset", "revenue_dashboard"), 3, []), "owners": []},
    ],
}

SCHEMA_ORDERS = {
    "in order": [0, 1, 2, 3],
    "reversed": [3, 2, 1, 0],
    "new schema first": [1, 3, 0, 2],
}


@pytest.mark.parametrize("order", sorted(SCHEMA_ORDERS))
def test_a_dropped_column_reaches_the_subscriber_with_its_column_impact(
    api: Api, order: str, receiver: Receiver
) -> None:
    subscribe(api, receiver, "sub_orders", ("dataset", *ORDERS), ("schema.changed",))
    events = [load(1, 9, V1), load(2, 12, V2), report(3, 10), dashboard(4, 11)]
    for index in SCHEMA_ORDERS[order]:
        api.ingest(events[index])
    api.ingest(events[1])  # a duplicate of the change
    assert deliver(api) == 1
    ((msg_id, doc),) = receiver.received
    assert doc["type"] == "schema.changed"
    assert doc["dataset"]["owners"] == [{"name": "team:sales", "type": "MAINTAINER"}]
    changes = doc["changes"]
    assert changes["runId"] == run_id(2)
    assert changes["removed"] == [{"name": "amount", "type": "decimal"}]
    assert changes["changed"] == [{"name": "note", "from": "string", "to": "text"}]
    assert changes["added"] == [{"name": "region", "type": "string"}]
    assert {
        k: without_urls(v) if k != "truncated" else v for k, v in doc["downstream"].items()
    } == {
        **ORDERS_DOWNSTREAM,
        "truncated": False,
    }
    # Each removed or retyped column's impact is the impact API's for that field.
    by_field = {c["field"]: c for c in doc["columns"]}
    assert sorted(by_field) == ["amount", "note"]
    for field, column in by_field.items():
        assert same_as_the_impact_api(api, ORDERS, field, column["impact"])
    masked = {(i["name"], i.get("field")): i["masked"] for i in by_field["note"]["impact"]}
    assert masked[(REPORT[1], "note")] is True
    amount = {(i["name"], i.get("field")) for i in by_field["amount"]["impact"]}
    assert {(REPORT[1], "total"), (DASH[1], "revenue")} <= amount
    # Sent once: a reprojection and a second sender decide and send nothing more.
    reproject(api.store)
    assert deliver(api) == 0
    assert receiver.ids_seen == [msg_id]


def test_a_schema_that_changes_nothing_sends_nothing(api: Api, receiver: Receiver) -> None:
    subscribe(api, receiver, "sub_orders", ("namespace", ORDERS[0], ""), ("schema.changed",))
    api.ingest(load(1, 9, V1))
    api.ingest(load(2, 10, V1))  # the same schema again
    api.ingest(load(3, 8, V1))  # and an older write of it
    assert deliver(api) == 0
    # A later schema, then an older different one (superseded: not the current).
    api.ingest(load(4, 11, V2))
    api.ingest(load(5, 7, table_schema(("id", "bigint"))))
    assert deliver(api) == 1
    ((_, doc),) = receiver.received
    assert doc["changes"]["runId"] == run_id(4)
    assert doc["changes"]["removed"] == [{"name": "amount", "type": "decimal"}]


def run_of_load(n: int, hour: int, schema: dict[str, Any]) -> list[Any]:
    """load_orders' run as openlineage-spark and Airflow send it over HTTP: START,
    RUNNING and COMPLETE in requests of their own, each repeating the output's schema."""
    return [
        run_event(
            kind,
            "load_orders",
            run_id(n),
            at(hour, minute),
            inputs=[ds(*RAW)],
            outputs=[ds(*ORDERS, schema=schema, ownership=owned("team:sales"))],
        )
        for kind, minute in (("START", 0), ("RUNNING", 20), ("COMPLETE", 40))
    ]


SEPARATE_ORDERS = {
    "in order": [0, 1, 2, 3],
    "complete first": [0, 3, 1, 2],
    "new run first": [3, 2, 1, 0],
    "running first": [2, 0, 3, 1],
}


@pytest.mark.parametrize("between", [False, True], ids=["sent at the end", "sent between"])
@pytest.mark.parametrize("order", sorted(SEPARATE_ORDERS))
def test_a_schema_change_sent_in_separate_requests_notifies_once(
    api: Api, receiver: Receiver, order: str, between: bool
) -> None:
    """The change comes with START; RUNNING and COMPLETE repeat it, later, each in a
    request of its own. Whatever the order, sent as it goes or at the end, duplicated:
    one notification, naming the run."""
    subscribe(api, receiver, "sub_orders", ("dataset", *ORDERS), ("schema.changed",))
    events = [load(1, 9, V1), *run_of_load(2, 12, V2)]
    for index in SEPARATE_ORDERS[order]:
        api.ingest(events[index])
        if between:
            deliver(api)
    api.ingest(copy.deepcopy(events[1]) | {"producer": "https://example.com/again"})
    deliver(api)
    ((msg_id, doc),) = receiver.received
    assert doc["changes"]["runId"] == run_id(2)
    assert doc["changes"]["removed"] == [{"name": "amount", "type": "decimal"}]
    reproject(api.store)
    assert deliver(api) == 0
    assert receiver.ids_seen == [msg_id]


def test_a_schema_that_changes_back_and_again_notifies_each_change(
    api: Api, receiver: Receiver
) -> None:
    subscribe(api, receiver, "sub_orders", ("dataset", *ORDERS), ("schema.changed",))
    for n, schema in enumerate([V1, V2, V1, V2], start=1):
        for event in run_of_load(n, 8 + n, schema):
            api.ingest(event)
        deliver(api)
    assert [doc["changes"]["runId"] for _, doc in receiver.received] == [
        run_id(2),
        run_id(3),
        run_id(4),
    ]
    assert receiver.received[0][1]["changes"]["removed"] == [{"name": "amount", "type": "decimal"}]
    assert receiver.received[1][1]["changes"]["added"] == [{"name": "amount", "type": "decimal"}]
    assert receiver.received[2][1]["changes"] == receiver.received[0][1]["changes"] | {
        "runId": run_id(4)
    }


def test_changes_sent_together_say_the_newest_once(api: Api, receiver: Receiver) -> None:
    """V1, V2, V1, V2 before the sender looks: one notification, of the last change."""
    subscribe(api, receiver, "sub_orders", ("dataset", *ORDERS), ("schema.changed",))
    for n, schema in enumerate([V1, V2, V1, V2], start=1):
        for event in run_of_load(n, 8 + n, schema):
            api.ingest(event)
    deliver(api)  # it handles three: the first two superseded
    assert [doc["changes"]["runId"] for _, doc in receiver.received] == [run_id(4)]


def test_an_old_run_arriving_late_in_separate_requests_notifies_once(
    api: Api, receiver: Receiver
) -> None:
    """The new schema's run comes first, into a dataset without one; the older run's
    START and COMPLETE come later, one request each: the change they reveal, once."""
    subscribe(api, receiver, "sub_orders", ("dataset", *ORDERS), ("schema.changed",))
    old, new = run_of_load(1, 9, V1), run_of_load(2, 12, V2)
    for event in [*new, old[0]]:
        api.ingest(event)
    deliver(api)
    for event in old[1:]:
        api.ingest(event)
    deliver(api)
    assert [doc["changes"]["runId"] for _, doc in receiver.received] == [run_id(2)]


FAIL_ORDERS = {"in order": [0, 1, 2], "fail first": [2, 0, 1], "reversed": [2, 1, 0]}


@pytest.mark.parametrize("order", sorted(FAIL_ORDERS))
def test_a_failed_run_names_what_it_did_not_refresh_and_who_reads_it(
    api: Api, order: str, receiver: Receiver
) -> None:
    events = ("run.failed", "run.aborted")
    subscribe(api, receiver, "sub_job", ("job", "spark", "load_orders"), events)
    # RAW and one dataset downstream of it: the run's output ORDERS is 1 below it.
    subscribe(api, receiver, "sub_raw_1", ("dataset", *RAW), events, depth=1)
    subscribe(api, receiver, "sub_raw_0", ("dataset", *RAW), events)  # RAW alone
    subscribe(api, receiver, "sub_dash", ("dataset", *DASH), events)  # downstream
    api.ingest(load(1, 9, V1), report(2, 10), dashboard(3, 11))
    error = {"errorMessage": facet("ErrorMessageRunFacet", "1-0-1", message="OOM")}
    start = run_event("START", "load_orders", run_id(4), at(12), inputs=[ds(*RAW)])
    fail = run_event("FAIL", "load_orders", run_id(4), at(13), inputs=[ds(*RAW)], run_facets=error)
    running = run_event("RUNNING", "load_orders", run_id(4), at(12, 30))
    events_in = [start, running, fail]
    for index in FAIL_ORDERS[order]:
        api.ingest(events_in[index])
    api.ingest(fail)  # a duplicate
    assert deliver(api) == 2
    got = {doc["subscription"]: (msg_id, doc) for msg_id, doc in receiver.received}
    assert sorted(got) == ["sub_job", "sub_raw_1"]
    _, doc = got["sub_job"]
    assert doc["type"] == "run.failed"
    assert doc["run"]["runId"] == run_id(4)
    assert doc["run"]["state"] == "FAIL"
    assert doc["run"]["url"] == link("run", f"id={run_id(4)}")
    assert doc["job"]["url"] == link("job", "namespace=spark&name=load_orders")
    assert without_urls(doc["not_refreshed"]) == [
        {
            "namespace": ORDERS[0],
            "name": ORDERS[1],
            "owners": [{"name": "team:sales", "type": "MAINTAINER"}],
        }
    ]
    assert without_urls(doc["downstream"]["datasets"]) == ORDERS_DOWNSTREAM["datasets"]
    reproject(api.store)
    assert deliver(api) == 0
    assert sorted(receiver.ids_seen) == sorted(msg_id for msg_id, _ in got.values())


@pytest.mark.parametrize("between", [False, True], ids=["sent at the end", "sent between"])
def test_an_aborted_run_sent_event_by_event_notifies_once(
    api: Api, receiver: Receiver, between: bool
) -> None:
    subscribe(api, receiver, "sub_job", ("job", "spark", "load_orders"), ("run.aborted",))
    kinds = (("START", 0), ("RUNNING", 20), ("ABORT", 40), ("ABORT", 40))  # and a repeat
    for kind, minute in kinds:
        api.ingest(run_event(kind, "load_orders", run_id(4), at(12, minute), inputs=[ds(*RAW)]))
        if between:
            deliver(api)
    deliver(api)
    assert [doc["run"]["runId"] for _, doc in receiver.received] == [run_id(4)]
    assert receiver.received[0][1]["type"] == "run.aborted"


def test_a_check_downstream_of_a_subscribed_dataset_reaches_it_within_its_depth(
    api: Api, receiver: Receiver
) -> None:
    subscribe(api, receiver, "sub_raw_2", ("dataset", *RAW), ("check.failed",), depth=2)
    subscribe(api, receiver, "sub_raw_1", ("dataset", *RAW), ("check.failed",), depth=1)
    api.ingest(load(1, 9, V1), report(2, 10))
    checked = {**ds(*REPORT), "inputFacets": {"dataQualityAssertions": assertions(False)}}
    api.ingest(run_event("COMPLETE", "checks", run_id(5), at(12), inputs=[checked]))
    assert deliver(api) == 1  # REPORT is two datasets below RAW
    ((_, doc),) = receiver.received
    assert doc["subscription"] == "sub_raw_2"
    assert (doc["dataset"]["name"], doc["dataset"]["owners"]) == (
        REPORT[1],
        [{"name": "team:finance", "type": "MAINTAINER"}],
    )


def test_a_column_dropped_upstream_of_a_hub_on_the_bench_platform(
    api: Api, receiver: Receiver
) -> None:
    """bench/query.py's platform (its smallest: 400 jobs, ten hubs): a new write of the
    table just upstream of a hub drops a column the hub maps; the notification's impact
    of it is the impact API's, and reaches the hub's readers."""
    platform = query.Platform(0.0)
    for start in range(0, len(platform.tasks), 100):
        events = [e for t in platform.tasks[start : start + 100] for e in platform.events(t)]
        api.ingest(*events)
    p, k = 0, platform.lengths[0] - 2  # the table the first hub is made from
    task = next(t for t in platform.tasks if (t.p, t.k) == (p, k))
    table = (query.WAREHOUSE, platform.table(p, k))
    subscribe(api, receiver, "sub_hub_source", ("dataset", *table), ("schema.changed",))
    (write,) = [e for e in platform.events(task) if e["eventType"] == "COMPLETE"][:1]
    dropped = platform.fields(p)[3]
    changed = copy.deepcopy(write)
    changed["run"]["runId"] = str(uuid.UUID(int=query.RUN_BASE | 0xFFFF0))
    later_time = query.EPOCH + timedelta(days=30)
    changed["eventTime"] = later_time.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    schema = changed["outputs"][0]["facets"]["schema"]
    schema["fields"] = [f for f in schema["fields"] if f["name"] != dropped]
    api.ingest(changed)
    assert deliver(api) == 1
    ((_, doc),) = receiver.received
    assert [f["name"] for f in doc["changes"]["removed"]] == [dropped]
    (column,) = doc["columns"]
    assert same_as_the_impact_api(api, table, dropped, column["impact"])
    # The hub (named by its node: the metastore alias its identities resolve to).
    hub = platform.alias(p, k + 1)[1]
    assert (hub, dropped) in {(i["name"], i.get("field")) for i in column["impact"]}
    # The hub's readers lie downstream at the dataset level too.
    names = {d["name"] for d in doc["downstream"]["datasets"]}
    assert hub in names and len(names) > 1
