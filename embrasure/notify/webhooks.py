"""A notification as an HTTP request (docs/notifications.md#what-a-receiver-gets): the
body as decided, signed per the Standard Webhooks spec with the reference library —
``webhook-id`` (the notification's stable id: a receiver drops repeats by it),
``webhook-timestamp``, ``webhook-signature`` (``v1,`` HMAC-SHA256 of id, timestamp and
body under the subscription's secret)."""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

import httpx
import standardwebhooks

from embrasure.model import Notification, Subscription

SECRET_BYTES = 24  # Standard Webhooks: 24 to 64 random bytes, base64, prefixed whsec_


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signed_headers(secret: str, n: Notification, at: datetime) -> dict[str, str]:
    signature = standardwebhooks.Webhook(secret).sign(n.notification_id, at, n.body.encode())
    return {
        "content-type": "application/json",
        "webhook-id": n.notification_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


class Refused(Exception):
    """The receiver did not take it (a status, a redirect, a timeout): tried again later."""


def send(client: httpx.Client, s: Subscription, n: Notification, at: datetime) -> None:
    """POST ``n`` to the subscription's URL; Refused unless the receiver answers 2xx.
    The client follows no redirect (a 3xx is refused: a redirect could lead the signed
    body anywhere) and times out (webhooks.py's callers set it)."""
    try:
        reply = client.post(s.url, content=n.body.encode(), headers=signed_headers(s.secret, n, at))
    except httpx.HTTPError as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from exc
    if not 200 <= reply.status_code < 300:
        raise Refused(f"the receiver answered {reply.status_code}")
