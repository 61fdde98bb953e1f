"""Notifications from the real server (`embrasure serve`, its notifier process), to a
receiver on loopback that verifies signatures with the Standard Webhooks library: the
subscription made with the CLI, the server killed with -9 while the receiver holds the
delivery, then started again (docs/notifications.md#delivery)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from test_check_notifications import ORDERS, check
from webhook_receiver import LOOPBACK_ENV, Receiver

from embrasure.notify.webhooks import new_secret

from conftest import ServerProcess, sqlite_url
from http_client import HTTP

JSON = {"Content-Type": "application/json"}


class HoldingReceiver(Receiver):
    """Holds the first delivery open until ``release``: the sender waits in its request
    while the test kills it. Every verified arrival is kept, by webhook-id."""

    def __init__(self, secret: str) -> None:
        super().__init__(secret)
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.holding = True

    def cut(self) -> bool:
        if not self.holding:
            return False
        self.holding = False
        self.arrived.set()
        self.release.wait(60)
        return True  # its sender is dead by now: the answer would reach nobody


def wait(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_kill_9_mid_delivery_sends_it_again_under_the_same_id(tmp_path: Path) -> None:
    db = tmp_path / "notify.db"
    receiver = HoldingReceiver(new_secret())  # the CLI's secret replaces it below
    try:
        added = subprocess.run(
            [
                sys.executable,
                "-m",
                "embrasure",
                "subscriptions",
                "add",
                "--db",
                sqlite_url(db),
                "--dataset",
                *ORDERS,
                "--url",
                receiver.url,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, **LOOPBACK_ENV},  # the receiver is on loopback
        )
        assert added.returncode == 0, added.stderr
        secret = added.stdout.splitlines()[-1]
        assert secret.startswith("whsec_")
        receiver.secret = secret
        env = {"EMBRASURE_NOTIFY_SETTLE_SECONDS": "0", **LOOPBACK_ENV}
        server = ServerProcess(db, env=env).start()
        try:
            for event in (check(1, 9, ok=True), check(2, 10, ok=False)):
                r = HTTP.post(
                    f"{server.url}/api/v1/lineage", content=orjson.dumps(event), headers=JSON
                )
                assert r.status_code == 202, r.text
            assert receiver.arrived.wait(60), "the notification did not arrive"
            server.kill()  # while the receiver holds the request open
        finally:
            server.stop()
        receiver.release.set()
        assert receiver.received == []  # the held request was not answered in time
        again = ServerProcess(db, env=env).start()
        try:
            wait(lambda: len(receiver.received) == 1)
            time.sleep(2)  # nothing more comes
            ((msg_id, doc),) = receiver.received
            assert doc["type"] == "check.failed" and msg_id.startswith("msg_")
            assert receiver.ids_seen == [msg_id, msg_id]  # the cut attempt and the resend
        finally:
            again.stop()
    finally:
        receiver.close()
