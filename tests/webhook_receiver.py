"""The notifications tests' subscriber: a webhook receiver on loopback
(embrasure/notify/receiver.py) that verifies every request as a receiver would and keeps
what came."""

from __future__ import annotations

from typing import Any

from embrasure.notify.receiver import WebhookReceiver


class Receiver(WebhookReceiver):
    """A webhook receiver on loopback (notify/receiver.py): verifies every request's
    signature and keeps the verified bodies (and every webhook-id that arrived, in
    ``ids_seen``); ``refuse`` makes it answer 503 (a receiver that is down)."""

    def __init__(self, secret: str, verify: bool = True) -> None:
        super().__init__(secret, verify)  # verify False: a Slack incoming webhook
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.ids_seen: list[str] = []
        self.refuse = False
        self.start()

    def on_arrival(self, webhook_id: str) -> int | None:
        self.ids_seen.append(webhook_id)
        return 503 if self.refuse or self.cut() else None

    def take(self, webhook_id: str, doc: dict[str, Any]) -> None:
        self.received.append((webhook_id, doc))

    def cut(self) -> bool:
        """Whether to drop this request unanswered (HoldingReceiver holds one)."""
        return False
