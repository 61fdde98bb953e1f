"""A webhook receiver (docs/notifications.md#what-a-receiver-gets): `embrasure
subscriptions listen`'s, and what the tests and benchmarks stand up for a subscriber.
Each POST is verified as a receiver would, with the Standard Webhooks library and the
subscription's secret (without ``verify``: taken as it is, as a Slack incoming webhook
reads the body alone), then handed to ``take``; subclasses say what to keep."""

from __future__ import annotations

import http.server
import threading
from typing import Any

import orjson
import standardwebhooks


class WebhookReceiver:
    def __init__(
        self, secret: str, verify: bool = True, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.secret = secret  # read at each request: a test may set it once it is known
        self.verify = verify
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                webhook_id = self.headers.get("webhook-id", "")
                status = outer.on_arrival(webhook_id)
                if status is None:
                    status = outer.verified(webhook_id, body, dict(self.headers))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        self.host, self.port = host, self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"

    def verified(self, webhook_id: str, body: bytes, headers: dict[str, str]) -> int:
        try:
            doc = (
                standardwebhooks.Webhook(self.secret).verify(body, headers)
                if self.verify
                else orjson.loads(body)
            )
        except standardwebhooks.WebhookVerificationError as exc:
            self.refused(exc)
            return 401
        self.take(webhook_id, doc)
        return 204

    def on_arrival(self, webhook_id: str) -> int | None:
        """Before verifying: a status to answer instead (a receiver that is down), or
        None to go on."""
        return None

    def take(self, webhook_id: str, doc: dict[str, Any]) -> None:
        """A verified notification."""

    def refused(self, exc: Exception) -> None:
        """A request whose signature did not verify (answered 401)."""

    def start(self) -> None:
        """Serve on a thread of its own, until ``close``."""
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
