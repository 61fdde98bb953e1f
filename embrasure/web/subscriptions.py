"""Notification subscriptions over HTTP (docs/notifications.md#subscribing), the same as
`embrasure subscriptions` (cli/subscriptions.py):

- ``GET /api/v1/subscriptions``: the subscriptions on namespaces the token reads or
  manages subscriptions of; a webhook URL is shown in full only with scope
  ``subscriptions`` on its namespace (it is often a secret itself: a Slack incoming
  webhook's is), else as its scheme and host; never the signing secret.
- ``POST /api/v1/subscriptions``: ``{"target": "dataset"|"job"|"namespace",
  "namespace", "name" (not for a namespace), "depth" (a dataset's), "events", "url",
  "format"}`` → 201 with the subscription and its signing secret, shown this once.
- ``DELETE /api/v1/subscriptions/{subscription_id}`` → 204.

Both writes need scope ``subscriptions`` on the subscription's namespace.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from embrasure.access.grants import allows_in, may_read
from embrasure.errors import Problem
from embrasure.model import Principal, Subscription
from embrasure.notify.secrets import sealed
from embrasure.notify.targets import TargetPolicy, TargetRefused
from embrasure.notify.webhooks import FORMATS, URL, new_subscription
from embrasure.projector.causes import KINDS, STALE_AFTER
from embrasure.projector.outbox import MAX_DEPTH
from embrasure.receiver.bounds import read_body
from embrasure.store import Store
from embrasure.web.admin import who
from embrasure.web.auth import requires
from embrasure.web.params import bad_body, entity_named, json_object, not_found
from embrasure.web.responses import json_response

MAX_BODY = 16 * 1024
TARGETS = ("dataset", "job", "namespace")


def manages(request: Request, namespace: str) -> bool:
    """Whether the request may manage subscriptions on ``namespace`` (auth off: yes)."""
    principal: Principal | None = getattr(request.state, "principal", None)
    return principal is None or allows_in(principal, "subscriptions", namespace)


def masked(url: str) -> str:
    """A webhook URL as one who may not manage it sees it: its scheme and host."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}/…"


def subscription_json(s: Subscription, full_url: bool) -> dict[str, Any]:
    return {
        "subscription_id": s.subscription_id,
        "target": s.target,
        "namespace": s.namespace,
        "name": s.name or None,
        "depth": s.depth,
        "stale_after": s.stale_after,
        "events": list(s.events),
        "url": s.url if full_url else masked(s.url),
        "format": s.format,
        "created_at": s.created_at,
        "created_by": s.created_by,
    }


KEYS = {"target", "namespace", "name", "depth", "stale_after", "events", "url", "format"}


def parse(body: bytes) -> tuple[str, str, str, int, int, tuple[str, ...], str, str]:
    """(target, namespace, name, depth, stale_after, events, url, format) of a request
    body; 400 saying what is wrong. The request schema (openapi/subscriptions.py) says exactly
    this, so what it allows is taken and what it does not is refused."""
    doc = json_object(body, '{"target": …, "namespace": …, "url": …}')
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise bad_body(f"unknown keys: {', '.join(unknown)}")
    target, namespace, name = entity_named(doc, "target", TARGETS)
    for key in ("depth", "stale_after"):
        if key in doc and target != "dataset":
            raise bad_body(f"{key} is a dataset's")
    depth = _whole(doc, "depth", 0, (0, MAX_DEPTH))
    stale_after = _whole(doc, "stale_after", None, STALE_AFTER) if "stale_after" in doc else 0
    events = doc.get("events", list(KINDS))
    if not isinstance(events, list) or not events or any(e not in KINDS for e in events):
        raise bad_body(f"events must be a non-empty list of {', '.join(KINDS)}")
    url = doc.get("url")
    if not isinstance(url, str) or not URL.match(url):
        raise bad_body(f"url must be an http or https URL with a host; got {url!r}")
    body_format = doc.get("format", "standard")
    if body_format not in FORMATS:
        raise bad_body(f"format must be one of {', '.join(FORMATS)}")
    events_wanted = tuple(dict.fromkeys(events))
    return target, namespace, name, depth, stale_after, events_wanted, url, body_format


def _whole(doc: dict[str, Any], key: str, default: int | None, bounds: tuple[int, int]) -> int:
    """A whole number in ``bounds`` (2.0 is one: JSON Schema's integer); 400 otherwise."""
    value = doc.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    low, high = bounds
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise bad_body(f"{key} must be a whole number from {low} to {high}")
    return value


def _refused(request: Request, namespace: str) -> Problem:
    return Problem(
        403,
        "insufficient-scope",
        "Insufficient scope",
        f"{request.method} {request.url.path} needs scope subscriptions on namespace"
        f" {namespace!r} (docs/security.md#grants).",
        headers={"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="subscriptions"'},
    )


class SubscriptionsApi:
    def __init__(
        self, store: Store, body_seconds: float, secrets_key: str, targets: TargetPolicy
    ) -> None:
        self.store = store
        self.body_seconds = body_seconds
        self.secrets_key = secrets_key  # the signing secrets are stored under it (secrets.py)
        self.targets = targets  # where webhooks may go (notify/targets.py)

    async def listing(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.subscriptions)
        shown = [
            subscription_json(s, manages(request, s.namespace))
            for s in found
            if may_read(s.namespace) or manages(request, s.namespace)
        ]
        return json_response({"subscriptions": shown})

    async def add(self, request: Request) -> Response:
        target, namespace, name, depth, stale_after, events, url, body_format = parse(
            await read_body(request, MAX_BODY, self.body_seconds)
        )
        if not manages(request, namespace):
            raise _refused(request, namespace)
        try:  # checked again at every send: a name may resolve elsewhere later
            await run_in_threadpool(self.targets.vet, url)
        except TargetRefused as exc:
            raise Problem(
                422, "webhook-target-refused", "Webhook target refused", str(exc)
            ) from None
        s = new_subscription(
            target,
            namespace,
            name,
            events,
            url,
            body_format=body_format,
            depth=depth,
            stale_after=stale_after,
            created_by=who(request),
        )
        stored = sealed(s, self.secrets_key)
        await run_in_threadpool(self.store.add_subscription, stored)
        # The signing secret, this once: the receiver verifies webhook-signature with it.
        return json_response(subscription_json(s, True) | {"secret": s.secret}, status_code=201)

    async def remove(self, request: Request) -> Response:
        wanted = request.path_params["subscription_id"]
        found = await run_in_threadpool(self.store.subscriptions)
        s = next((s for s in found if s.subscription_id == wanted), None)
        if s is None or not (may_read(s.namespace) or manages(request, s.namespace)):
            raise not_found(f"No subscription {wanted}.")
        if not manages(request, s.namespace):
            raise _refused(request, s.namespace)
        await run_in_threadpool(self.store.remove_subscription, wanted)
        return Response(status_code=204)

    def routes(self) -> list[Route]:
        manage = requires("subscriptions")
        return [
            Route(
                "/api/v1/subscriptions",
                requires("read", "subscriptions")(self.listing),
                methods=["GET"],
            ),
            Route("/api/v1/subscriptions", manage(self.add), methods=["POST"]),
            Route(
                "/api/v1/subscriptions/{subscription_id}", manage(self.remove), methods=["DELETE"]
            ),
        ]
