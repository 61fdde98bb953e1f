"""A notification as an HTTP request (docs/notifications.md#what-a-receiver-gets): the
body as decided, signed per the Standard Webhooks spec with the reference library —
``webhook-id`` (the notification's stable id: a receiver drops repeats by it),
``webhook-timestamp``, ``webhook-signature`` (``v1,`` HMAC-SHA256 of id, timestamp and
body under the subscription's secret). A ``slack`` subscription gets the body a Slack
incoming webhook takes instead (``{"text": …}``, mrkdwn), under the same headers: Slack
reads none of them, its URL being its secret."""

from __future__ import annotations

import base64
import re
import secrets
from datetime import datetime
from typing import Any

import httpx
import orjson
import standardwebhooks

from embrasure.model import Notification, Subscription, utc_now
from embrasure.notify.targets import TargetPolicy, TargetRefused

SECRET_BYTES = 24  # Standard Webhooks: 24 to 64 random bytes, base64, prefixed whsec_


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_subscription(
    target: str,
    namespace: str,
    name: str,
    events: tuple[str, ...],
    url: str,
    *,
    body_format: str = "standard",
    depth: int = 0,
    stale_after: int = 0,
    created_by: str | None = None,
) -> Subscription:
    """A subscription as `subscriptions add` and the API make one: a new id and a new
    signing secret (shown once; stored sealed: notify/secrets.py)."""
    return Subscription(
        f"sub_{secrets.token_hex(6)}",
        target,
        namespace,
        name,
        events,
        url,
        new_secret(),
        utc_now(),
        created_by,
        body_format,
        depth,
        stale_after,
    )


FORMATS = ("standard", "slack")
# A receiver's URL: http or https with a host (a name or IP in ASCII, an IDN as punycode,
# or an IPv6 literal) followed by a port (1 to 65535), a path, a query or nothing: no user name or
# password before it (notify/targets.py refuses them too). The API's request schema
# holds the same pattern (web/openapi/subscriptions.py), which reads the same in Python
# and ECMAScript.
PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_H16 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"({_OCTET}\.){{3}}{_OCTET}"
_LS32 = f"({_H16}:{_H16}|{_IPV4})"
# RFC 3986 §3.2.2's IPv6address, each of its nine forms.
IPV6 = "|".join(
    [
        f"({_H16}:){{6}}{_LS32}",
        f"::({_H16}:){{5}}{_LS32}",
        f"({_H16})?::({_H16}:){{4}}{_LS32}",
        f"(({_H16}:){{0,1}}{_H16})?::({_H16}:){{3}}{_LS32}",
        f"(({_H16}:){{0,2}}{_H16})?::({_H16}:){{2}}{_LS32}",
        f"(({_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
        f"(({_H16}:){{0,4}}{_H16})?::{_LS32}",
        f"(({_H16}:){{0,5}}{_H16})?::{_H16}",
        f"(({_H16}:){{0,6}}{_H16})?::",
    ]
)
URL = re.compile(rf"https?://([A-Za-z0-9.-]+|\[({IPV6})\])(?=(:{PORT})?([/?#]|$))")
HEADLINES = {
    "check.failed": ":red_circle: Check failed",
    "check.recovered": ":white_check_mark: Check recovered",
    "schema.changed": ":warning: Schema changed",
    "run.failed": ":x: Run failed",
    "run.aborted": ":no_entry_sign: Run aborted",
    "dataset.stale": ":hourglass: Not written for too long",
}


def slack_text(n: Notification) -> str:
    """One Slack message (mrkdwn) saying what the notification's body says."""
    body: dict[str, Any] = orjson.loads(n.body)
    if n.kind.startswith("check."):
        check = body["check"]
        what = f"`{check['assertion']}`" + (
            f" on `{check['column']}`" if check.get("column") else ""
        )
        when = f" (result of {body['result_time']})" if body.get("result_time") else ""
        said = f"{what} of {_named(body['dataset'])}{when}"
    elif n.kind == "schema.changed":
        changes = body.get("changes") or {}
        parts = [f"removed `{f['name']}`" for f in changes.get("removed", ())]
        parts += [
            f"retyped `{f['name']}` ({f['from']} → {f['to']})" for f in changes.get("changed", ())
        ]
        parts += [f"added `{f['name']}`" for f in changes.get("added", ())]
        said = f"{_named(body['dataset'])}: {', '.join(parts)}"
    elif n.kind == "dataset.stale":
        hours = body["stale_after_seconds"] / 3600
        written = body["last_written_at"]
        said = f"{_named(body['dataset'])}, last written {written} (expected within {hours:g} h)"
    else:
        missed = ", ".join(_named(d) for d in body.get("not_refreshed", ())) or "nothing"
        said = f"{_named(body['job'])} (run {body['run']['runId']}); not refreshed: {missed}"
    downstream = body.get("downstream") or {}
    below = len(downstream.get("datasets", ()))
    tail = f"; {below} dataset{'s' if below != 1 else ''} downstream" if below else ""
    return f"{HEADLINES[n.kind]}: {said}{tail}"


def _named(entity: dict[str, Any]) -> str:
    """An entity in mrkdwn: bold, linked to its UI page when the body has it."""
    text = f"*{entity['namespace']} {entity['name']}*"
    return f"<{entity['url']}|{text}>" if entity.get("url") else text


def payload(s: Subscription, n: Notification) -> bytes:
    if s.format == "slack":
        return orjson.dumps({"text": slack_text(n)})
    return n.body.encode()


def signed_headers(secret: str, n: Notification, at: datetime, body: bytes) -> dict[str, str]:
    signature = standardwebhooks.Webhook(secret).sign(n.notification_id, at, body)
    return {
        "content-type": "application/json",
        "webhook-id": n.notification_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


class Refused(Exception):
    """The receiver did not take it (a status, a redirect, a timeout): tried again later."""


def send(
    client: httpx.Client, s: Subscription, n: Notification, at: datetime, targets: TargetPolicy
) -> None:
    """POST ``n`` to the subscription's URL; Refused unless the receiver answers 2xx.
    The URL is checked first (notify/targets.py) and the request goes to the address
    checked, under the URL's host name (Host, TLS server name). The client follows no
    redirect (a 3xx is refused: a redirect could lead the signed body anywhere) and
    times out (webhooks.py's callers set it)."""
    try:
        target = targets.check(s.url)
    except TargetRefused as exc:
        raise Refused(f"target refused: {exc}") from None
    body = payload(s, n)
    headers = signed_headers(s.secret, n, at, body) | {"host": target.host_header()}
    try:
        reply = client.post(
            target.request_url(),
            content=body,
            headers=headers,
            extensions={"sni_hostname": target.host},
        )
    except httpx.HTTPError as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from exc
    if not 200 <= reply.status_code < 300:
        raise Refused(f"the receiver answered {reply.status_code}")
