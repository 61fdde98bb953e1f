"""The log's own views (docs/queries.md#deliveries-and-quarantine): deliveries with their
receipts and item outcomes, the quarantine and its replay, and raw events by eventTime.

Unlike the graph's routes (api.py), these show everything the log holds: what admins hid
is still listed here, and a transport-rejected item is shown with its reason.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from embrasure.access.grants import restricted
from embrasure.errors import Problem
from embrasure.lifecycle.trimmed import NO_ARCHIVE, ArchivedBodies
from embrasure.model import DELIVERY_STATES, KafkaCoordinates, Principal, Rejection
from embrasure.projector.worker import replay_item
from embrasure.query import raw_events
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.store.read_rows import DeliveryRow
from embrasure.store.rows import decode_kinds
from embrasure.web.auth import requires
from embrasure.web.params import (
    MAX_LIMIT,
    TEXT_PAIR_CURSOR,
    WHOLE_CURSOR,
    WHOLE_PAIR_CURSOR,
    bad,
    decode_cursor,
    encode_cursor,
    integer,
    time_param,
)
from embrasure.web.responses import answer, json_response


def _item(
    idx: int,
    kind: str | None,
    outcome: str,
    reason: str | None = None,
    retriable: bool = False,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "index": idx,
        "kind": kind,
        "outcome": outcome,
        "reason": reason,
        "retriable": retriable,
        "warnings": warnings or [],
    }


def _delivery_json(reader: GraphReader, row: DeliveryRow, with_items: bool) -> dict[str, Any]:
    state, item_count = row.state, row.item_count
    rejected = {i: Rejection(i, kind, why) for i, kind, why in orjson.loads(row.rejections)}
    # An item that is not plain has a row; a plain one (projected, no warnings) has its
    # kind on the delivery's row (DeliveryOutcome.kinds), in index order.
    outcomes = (
        {r.idx: r for r in reader.items(row.seq)} if with_items or state != "accepted" else {}
    )
    plain = iter(decode_kinds(row.kinds) if row.kinds is not None else ())
    items = []
    for idx in range(item_count):
        if (p := outcomes.get(idx)) is not None:
            warnings = orjson.loads(p.warnings)
            items.append(_item(idx, p.kind, p.outcome, p.reason, bool(p.retriable), warnings))
        elif (r := rejected.get(idx)) is not None:
            items.append(_item(idx, r.kind, "quarantined", r.reason))
        elif (kind := next(plain, None)) is not None:
            items.append(_item(idx, kind, "projected"))
        else:
            items.append(_item(idx, None, "pending"))
    counts = {"projected": 0, "quarantined": 0, "pending": 0}
    for item in items:
        counts[item["outcome"]] += 1
    view: dict[str, Any] = {
        "delivery_id": row.delivery_id,
        "provider_key": row.provider_key,
        "received_at": row.received_at,
        "state": state,
        "item_count": item_count,
        "invalid_item_count": len(rejected),
        "summary": {"received": item_count, **counts},
        "edges_created": row.edges_created or 0,
    }
    if row.kafka is not None:
        view["kafka"] = kafka_json(row.kafka)
    # docs/security.md#audit: who appended it (absent while auth was off, and for Kafka).
    view["writer"] = row.writer.to_json() if row.writer is not None else None
    if with_items:
        view["items"] = items
    return view


def kafka_json(where: KafkaCoordinates) -> dict[str, Any]:
    """A Kafka message's coordinates; its key as text (OpenLineage keys are text), the
    bytes that are not UTF-8 escaped."""
    key = None if where.key is None else where.key.decode("utf-8", "backslashreplace")
    return {"topic": where.topic, "partition": where.partition, "offset": where.offset, "key": key}


class DeliveriesApi:
    def __init__(self, store: Store, archived: ArchivedBodies = NO_ARCHIVE) -> None:
        self.store = store
        # Bodies retention moved out of the database (docs/operations.md
        # #retention-and-the-archive): events and replay read them from the archive.
        self.archived = archived

    async def get_delivery(self, request: Request) -> Response:
        delivery_id = request.path_params["delivery_id"]

        principal: Principal | None = request.state.principal
        # docs/security.md#scopes: who may not read every namespace sees the status of
        # what it delivered (the delivery's writer is it), and a token bound to a
        # provider_key that key's deliveries too; another's is "not stored" to it, so it
        # cannot learn which ids exist.
        everywhere = principal is None or restricted(principal, "read") is None

        def mine(row: DeliveryRow) -> bool:
            assert principal is not None
            if principal.provider_key is not None and row.provider_key == principal.provider_key:
                return True
            # By subject and issuer: a JWT's id changes with every token it is given.
            written = row.writer
            return written is not None and (written.subject, written.issuer) == (
                principal.subject,
                principal.issuer,
            )

        def work(reader: GraphReader) -> Any:
            row = reader.delivery(delivery_id)
            if row is None or not (everywhere or mine(row)):
                raise Problem(
                    404, "not-found", "No such delivery", f"No delivery {delivery_id!r} is stored."
                )
            return _delivery_json(reader, row, with_items=True)

        return await answer(self.store, work)

    async def list_deliveries(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            state = request.query_params.get("state")
            if state is not None and state not in DELIVERY_STATES:
                raise bad(f"unknown delivery state {state!r}")
            before = decode_cursor(request, WHOLE_CURSOR)
            rows = reader.deliveries(
                request.query_params.get("provider_key"),
                state,
                before,
                limit + 1,
                request.query_params.get("writer"),
            )
            page = [_delivery_json(reader, r, with_items=False) for r in rows[:limit]]
            return {
                "deliveries": page,
                "next_cursor": encode_cursor(rows[limit - 1].seq) if len(rows) > limit else None,
            }

        return await answer(self.store, work)

    async def list_quarantine(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            before = decode_cursor(request, WHOLE_PAIR_CURSOR)
            rows = reader.quarantined(tuple(before) if before else None, limit + 1)
            items = [
                {
                    "delivery_id": q.delivery_id,
                    "index": q.idx,
                    "kind": q.kind,
                    "reason": q.reason,
                    "received_at": q.received_at,
                }
                for q in rows[:limit]
            ]
            last = rows[limit - 1] if len(rows) > limit else None
            return {
                "items": items,
                "next_cursor": encode_cursor([last.seq, last.idx]) if last else None,
            }

        return await answer(self.store, work)

    async def replay(self, request: Request) -> Response:
        delivery_id = request.path_params["delivery_id"]
        try:
            index = int(request.path_params["index"])
        except ValueError:
            raise bad("the item index is not a whole number") from None
        result = await run_in_threadpool(replay_item, self.store, delivery_id, index, self.archived)
        return json_response(result)

    async def events(self, request: Request) -> Response:
        def work(reader: GraphReader) -> Any:
            limit = integer(request, "limit", 100, 1, MAX_LIMIT)
            after, before = (time_param(request, name) for name in ("after", "before"))
            cursor = decode_cursor(request, TEXT_PAIR_CURSOR)
            rows = reader.events(after, before, tuple(cursor) if cursor else None, limit + 1)
            events = raw_events.documents(reader, self.archived, rows[:limit])
            out = [
                {"event_id": e.event_id, "eventTime": e.time_text, "event": event}
                for e, event in zip(rows[:limit], events, strict=True)
            ]
            last = rows[limit - 1] if len(rows) > limit else None
            return {
                "events": out,
                "next_cursor": encode_cursor([last.time_key, last.event_id]) if last else None,
            }

        return await answer(self.store, work)

    def routes(self) -> list[Route]:
        # The log's views span every namespace: they need read on all of them (grants.py).
        read, admin = requires("read", everywhere=True), requires("admin")
        return [
            Route("/api/v1/deliveries", read(self.list_deliveries), methods=["GET"]),
            # A producer's view of its delivery's outcome: the receipt's follow-up.
            Route(
                "/api/v1/deliveries/{delivery_id}",
                requires("read", "ingest")(self.get_delivery),
                methods=["GET"],
            ),
            Route("/api/v1/quarantine", read(self.list_quarantine), methods=["GET"]),
            Route(
                "/api/v1/quarantine/{delivery_id}/{index}/replay",
                admin(self.replay),
                methods=["POST"],
            ),
            Route("/api/v1/events", read(self.events), methods=["GET"]),
        ]
