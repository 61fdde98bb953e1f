"""Item outcomes as stored (docs/architecture.md#storage): a plain item (projected, no
warnings) keeps no ``items`` row, only its kind on its delivery's row (``kinds``); the
delivery view, the listing and the quarantine read as they did when every item had a row.
Both backends (the ``api`` fixture runs on each)."""

from __future__ import annotations

from typing import Any

from embrasure.projector.worker import reproject
from embrasure.store.rows import DeliveryOutcome, ItemRow, decode_kinds, encode_kinds

from graph_api import (
    CUSTOMERS,
    DAY,
    ORDERS,
    REPORT,
    Api,
    at,
    daily_run,
    dataset_event,
    ds,
    job_event,
    run_event,
    run_id,
)

PROVIDER = "outcomes-test"


def mixed_delivery() -> list[Any]:
    """Plain items around a warned, a rule-quarantined and a transport-rejected one."""
    bad_run = daily_run(3)
    bad_run["run"]["runId"] = "run-42"  # not a UUID: quarantined by a rule
    return [
        daily_run(1),  # 0 plain
        run_event("START", "daily", run_id(2), f"{DAY}T09:00:00", inputs=[ds(*ORDERS)]),  # warned
        bad_run,  # 2 quarantined
        7,  # 3 not an object: rejected at the transport boundary
        job_event("model", at(9), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]),  # 4 plain
        dataset_event(ds(*CUSTOMERS), at(9)),  # 5 plain
        daily_run(4, time=at(10)),  # 6 plain
    ]


def views(api: Api, delivery_id: str) -> dict[str, Any]:
    """Everything the read API says of a delivery's items."""
    (listed,) = api.get("/api/v1/deliveries", provider_key=PROVIDER)["deliveries"]
    return {
        "delivery": api.delivery(delivery_id),
        "listed": listed,
        "quarantine": api.get("/api/v1/quarantine")["items"],
    }


def stored(api: Api, delivery_id: str) -> tuple[list[ItemRow], DeliveryOutcome]:
    with api.store.reader() as reader:
        row = reader.delivery(delivery_id)
        (outcome,) = reader.rows(DeliveryOutcome, ("seq",), [(row.seq,)])
        return reader.items(row.seq), outcome


def give_every_item_a_row(api: Api, delivery_id: str) -> None:
    """Store the delivery's outcomes as graph version 9 did: a row for every item, the
    plain ones included, and no kinds."""
    rows, outcome = stored(api, delivery_id)
    with_row = {r.idx for r in rows}
    plain_idx = [i for i in range(outcome.projected + outcome.quarantined) if i not in with_row]
    kinds = decode_kinds(outcome.kinds)
    assert len(plain_idx) == len(kinds)
    with api.store.projection() as tx:
        pairs = zip(plain_idx, kinds, strict=True)
        tx.save(ItemRow, [ItemRow.projected(outcome.seq, i, k) for i, k in pairs])
        tx.save(DeliveryOutcome, [outcome._replace(kinds=encode_kinds(()))])


def test_a_mixed_delivery_reads_as_if_every_item_had_a_row(api: Api) -> None:
    receipt = api.post(*mixed_delivery(), provider_key=PROVIDER)
    api.project()
    delivery_id = receipt["delivery_id"]
    rows, outcome = stored(api, delivery_id)
    # Rows for the warned, the quarantined and the rejected items only.
    assert [(r.idx, r.outcome) for r in rows] == [
        (1, "projected"),
        (2, "quarantined"),
        (3, "quarantined"),
    ]
    assert decode_kinds(outcome.kinds) == ["RunEvent", "JobEvent", "DatasetEvent", "RunEvent"]
    assert (outcome.projected, outcome.quarantined) == (5, 2)

    seen = views(api, delivery_id)
    view = seen["delivery"]
    assert view["state"] == "partially_projected"
    assert view["summary"] == {"received": 7, "projected": 5, "quarantined": 2, "pending": 0}
    assert seen["listed"] == {k: v for k, v in view.items() if k != "items"}
    assert [(i["index"], i["kind"], i["outcome"], i["retriable"]) for i in view["items"]] == [
        (0, "RunEvent", "projected", False),
        (1, "RunEvent", "projected", False),
        (2, "RunEvent", "quarantined", False),
        (3, None, "quarantined", False),
        (4, "JobEvent", "projected", False),
        (5, "DatasetEvent", "projected", False),
        (6, "RunEvent", "projected", False),
    ]
    (warning,) = view["items"][1]["warnings"]
    assert "no timezone" in warning
    assert "not a UUID" in view["items"][2]["reason"]
    assert "not an object" in view["items"][3]["reason"]
    plain = [view["items"][i] for i in (0, 4, 5, 6)]
    assert all(i["reason"] is None and i["warnings"] == [] for i in plain)
    assert [(i["index"], i["kind"]) for i in seen["quarantine"]] == [(2, "RunEvent"), (3, None)]

    # The same delivery stored the old way, a row per item, reads the same.
    give_every_item_a_row(api, delivery_id)
    assert len(stored(api, delivery_id)[0]) == 7
    assert views(api, delivery_id) == seen

    # A rebuild stores it the new way again, and it still reads the same.
    reproject(api.store)
    rows, outcome = stored(api, delivery_id)
    assert [r.idx for r in rows] == [1, 2, 3]
    assert decode_kinds(outcome.kinds) == ["RunEvent", "JobEvent", "DatasetEvent", "RunEvent"]
    assert views(api, delivery_id) == seen


def test_a_plain_delivery_stores_no_item_rows(api: Api) -> None:
    events = [daily_run(n, "START" if n % 2 else "COMPLETE", at(n % 20)) for n in range(50)]
    view = api.ingest(*events, provider_key=PROVIDER)
    single = api.ingest_each(job_event("model", at(9), outputs=[ds(*REPORT)]))[0]
    rows, outcome = stored(api, view["delivery_id"])
    assert rows == []
    assert outcome.kinds == '[["RunEvent",50]]'
    assert stored(api, single["delivery_id"])[0] == []
    with api.store.reader() as reader:
        assert reader.rows(ItemRow) == []  # none in the whole table
    assert view["summary"] == {"received": 50, "projected": 50, "quarantined": 0, "pending": 0}
    assert [(i["index"], i["kind"], i["outcome"]) for i in view["items"]] == [
        (n, "RunEvent", "projected") for n in range(50)
    ]
    assert single["items"] == [
        {
            "index": 0,
            "kind": "JobEvent",
            "outcome": "projected",
            "reason": None,
            "retriable": False,
            "warnings": [],
        }
    ]


def test_replaying_a_plain_item_says_it_is_projected(api: Api) -> None:
    view = api.ingest(daily_run(1))
    doc = api.problem("POST", f"/api/v1/quarantine/{view['delivery_id']}/0/replay", 409)
    assert doc["detail"] == f"Item 0 of delivery {view['delivery_id']} is projected."
    pending = api.post(daily_run(2))["delivery_id"]  # received, not yet projected
    doc = api.problem("POST", f"/api/v1/quarantine/{pending}/0/replay", 409)
    assert doc["detail"] == f"Item 0 of delivery {pending} is pending."
