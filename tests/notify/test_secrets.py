"""Signing secrets at rest (docs/notifications.md#secrets): with
--subscription-secrets-key a subscription's secret is stored encrypted, and only a sender
with that key signs with it; one without it, or with another key, refuses to send and
says why, as a receiver that is down would be (retried, then reported in /readyz)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from test_check_notifications import ORDERS, check, later
from webhook_receiver import LOOPBACK, Receiver

from embrasure.app import build_app
from embrasure.notify.secrets import SEALED, new_key
from embrasure.notify.sender import Sender
from embrasure.settings import Settings
from embrasure.store import open_store

from graph_api import Api

KEY = new_key()


@pytest.fixture
def keyed(db_url: str) -> Iterator[Api]:
    store = open_store(db_url)
    app = build_app(
        Settings(db=db_url, subscription_secrets_key=KEY, webhook_allow="127.0.0.0/8"), store
    )
    with TestClient(app) as client:
        yield Api(client)
    store.close()


def test_a_secret_is_stored_encrypted_and_signs_only_with_its_key(keyed: Api) -> None:
    receiver = Receiver("whsec_placeholder0000000000000000")
    try:
        wanted = {"target": "dataset", "namespace": ORDERS[0], "name": ORDERS[1]}
        added = keyed.client.post("/api/v1/subscriptions", json=wanted | {"url": receiver.url})
        assert added.status_code == 201, added.text
        secret = added.json()["secret"]
        receiver.secret = secret
        (stored,) = keyed.store.subscriptions()
        assert stored.secret.startswith(SEALED) and secret not in stored.secret
        keyed.ingest(check(1, 9, ok=False))
        # Without the key, or with another, nothing is signed: refused, tried again.
        for hours, key in enumerate(("", new_key())):  # each past the last one's backoff
            assert (
                Sender(keyed.store, secrets_key=key, targets=LOOPBACK).run_once(later(hours)) == 1
            )
            (row,) = keyed.store.notifications()
            assert row.state == "pending" and row.last_error is not None
            assert row.last_error.startswith("not signed: its secret")
            assert receiver.ids_seen == []
        # With it, sent and verified by the receiver with the secret it was shown once.
        assert Sender(keyed.store, secrets_key=KEY, targets=LOOPBACK).run_once(later(2)) == 1
        ((_, doc),) = receiver.received
        assert doc["type"] == "check.failed"
    finally:
        receiver.close()


def test_a_key_that_is_not_a_fernet_key_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="is not a Fernet key") as raised:
        Settings(subscription_secrets_key="not-a-key")
    assert "not-a-key" not in str(raised.value)  # a key is never echoed back
