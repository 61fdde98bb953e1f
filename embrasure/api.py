"""Read handlers: thin, they ask the store and shape JSON (DESIGN §5)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .errors import Problem, StoreUnavailable
from .model import Delivery
from .responses import json_response, problem_response
from .store import Store


def delivery_view(delivery: Delivery) -> dict[str, Any]:
    """A delivery with its per-item outcomes; items not rejected at the transport
    boundary stay ``pending`` until the projector has seen them."""
    rejected = {r.index: r for r in delivery.rejections}
    items: list[dict[str, Any]] = []
    for index in range(delivery.item_count):
        rejection = rejected.get(index)
        items.append(
            {
                "index": index,
                "kind": rejection.kind if rejection else None,
                "outcome": "quarantined" if rejection else "pending",
                "reason": rejection.reason if rejection else None,
                "retriable": False,
                "warnings": [],
            }
        )
    return {
        "delivery_id": delivery.delivery_id,
        "provider_key": delivery.provider_key,
        "received_at": delivery.received_at,
        "state": delivery.state,
        "item_count": delivery.item_count,
        "invalid_item_count": len(delivery.rejections),
        "summary": {
            "received": delivery.item_count,
            "projected": 0,
            "quarantined": len(rejected),
            "pending": delivery.item_count - len(rejected),
        },
        "items": items,
    }


class ReadApi:
    def __init__(self, store: Store, retry_after: int) -> None:
        self.store = store
        self.retry_after = retry_after

    async def get_delivery(self, request: Request) -> Response:
        delivery_id = request.path_params["delivery_id"]
        delivery = await run_in_threadpool(self.store.get_delivery, delivery_id)
        if delivery is None:
            return problem_response(
                Problem(
                    404, "not-found", "No such delivery", f"No delivery {delivery_id!r} is stored."
                )
            )
        return json_response(delivery_view(delivery))

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        try:
            await run_in_threadpool(self.store.ping)
        except StoreUnavailable as exc:
            return problem_response(
                Problem(503, "not-ready", "Not ready", str(exc), retry_after=self.retry_after)
            )
        return json_response({"status": "ready"})

    def routes(self) -> list[Route]:
        return [
            Route("/api/v1/deliveries/{delivery_id}", self.get_delivery, methods=["GET"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
        ]
