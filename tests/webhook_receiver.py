"""The notifications tests' subscriber: a webhook receiver on loopback
(embrasure/notify/listener.py) that verifies every request as a receiver would and keeps
what came."""

from __future__ import annotations

from typing import Any

from embrasure.notify.listener import WebhookReceiver
from embrasure.notify.targets import TargetPolicy


class Receiver(WebhookReceiver):
    """A webhook receiver on loopback (notify/listener.py): verifies every request's
    signature and keeps the verified bodies (and every webhook-id that arrived, in
    ``ids_seen``); ``refuse`` makes it answer 503 (a receiver that is down)."""

    def __init__(self, secret: str, verify: bool = True, host: str = "127.0.0.1") -> None:
        super().__init__(secret, verify, host)  # verify False: a Slack incoming webhook
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.ids_seen: list[str] = []
        self.hosts: list[str] = []  # each verified request's Host header
        self.refuse = False
        self.start()

    def on_arrival(self, webhook_id: str) -> int | None:
        self.ids_seen.append(webhook_id)
        return 503 if self.refuse or self.cut() else None

    def take(self, webhook_id: str, doc: dict[str, Any]) -> None:
        self.received.append((webhook_id, doc))

    def verified(self, webhook_id: str, body: bytes, headers: dict[str, str]) -> int:
        self.hosts += [v for k, v in headers.items() if k.lower() == "host"]
        return super().verified(webhook_id, body, headers)

    def cut(self) -> bool:
        """Whether to drop this request unanswered (HoldingReceiver holds one)."""
        return False


# Where the tests' receivers listen: allowed, as --webhook-allow would (notify/targets.py
# refuses loopback by default).
LOOPBACK = TargetPolicy.from_settings("127.0.0.0/8\n::1/128", "any")
LOOPBACK_ENV = {"EMBRASURE_WEBHOOK_ALLOW": "127.0.0.0/8"}
