"""The ingest routes (docs/receiver.md): bounds, then the log, then the receipt.

A request passes the overload check (backpressure.py) and every bound (bounds.py); then
the delivery is appended to the log through group commit, and the 202 receipt is sent
only after the commit holding it returned: the delivery is fsync'd.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from embrasure.access.grants import restricted
from embrasure.errors import IdempotencyConflict, LogUnavailable, Problem, StoreUnavailable
from embrasure.model import Principal, Receipt
from embrasure.receiver.backpressure import Backpressure, BodyBudget
from embrasure.receiver.bounds import Limits, check_body, check_headers, declared_size, read_body
from embrasure.store.group_commit import GroupCommitter

log = logging.getLogger("embrasure.receiver")

Endpoint = Callable[[Request], Awaitable[Response]]


class Receiver:
    """The ingest endpoints, bound to the log's group committer."""

    def __init__(
        self,
        committer: GroupCommitter,
        limits: Limits,
        backpressure: Backpressure,
        budget: BodyBudget,
        body_seconds: float,
    ) -> None:
        self.committer = committer
        self.limits = limits
        self.backpressure = backpressure
        self.budget = budget
        self.body_seconds = body_seconds

    async def ingest_one(self, request: Request) -> Response:
        return await self._ingest(request, single=True)

    async def ingest_batch(self, request: Request) -> Response:
        return await self._ingest(request, single=False)

    async def _ingest(self, request: Request, single: bool) -> Response:
        limits = self.limits
        try:
            provider, key = check_headers(request, limits)
            await self.backpressure.check()
            async with self.budget.hold(declared_size(request, limits.body_bytes)):
                receipt = await self._append(request, single, provider, key)
        except StoreUnavailable as exc:
            # Whatever failed, the delivery is not in the log: say so (errors.py).
            raise LogUnavailable(
                f"The delivery was not stored and is not acknowledged: {exc}. Retry later."
            ) from exc
        log.debug(
            "delivery %s %s",
            receipt.delivery_id,
            "duplicate" if receipt.duplicate else receipt.state,
            extra={"delivery_id": receipt.delivery_id, "provider_key": provider},
        )
        return Response(orjson.dumps(receipt.to_json()), 202, media_type="application/json")

    async def _append(
        self, request: Request, single: bool, provider: str, key: str | None
    ) -> Receipt:
        body = await read_body(request, self.limits.body_bytes, self.body_seconds)
        # docs/security.md#grants: items outside the writer's namespaces are quarantined;
        # #audit: the delivery records who appended it.
        principal: Principal | None = request.state.principal
        grants = restricted(principal, "ingest")
        by = principal.writer if principal is not None else None
        draft = check_body(body, single, provider, key, self.limits, grants, by)
        try:
            return await self.committer.append(draft)
        except IdempotencyConflict as exc:
            raise Problem(
                409,
                "idempotency-key-reused",
                "Idempotency-Key reused with another body",
                f"Idempotency-Key {key!r} already names delivery {exc.delivery_id} with "
                "a different body. Use a new key for new content.",
                delivery_id=exc.delivery_id,
            ) from None

    def routes(self, guarded: Callable[[Endpoint], Endpoint]) -> list[Route]:
        """The routes, each endpoint wrapped by ``guarded`` (the app's check of the
        ``ingest`` scope, web/auth.py: sign-in is the HTTP layer's, above this stage)."""
        routes = []
        for prefix in ("/api/v1", "/api/v1/openlineage"):
            one, batch = guarded(self.ingest_one), guarded(self.ingest_batch)
            routes.append(Route(f"{prefix}/lineage", one, methods=["POST"]))
            routes.append(Route(f"{prefix}/lineage/batch", batch, methods=["POST"]))
        return routes
