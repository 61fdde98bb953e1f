"""Subscriptions' signing secrets at rest (docs/notifications.md#secrets). HMAC signing
(Standard Webhooks) needs the secret itself, so it cannot be stored hashed; with
--subscription-secrets-key it is stored encrypted (Fernet: AES-128-CBC and HMAC-SHA256,
from the ``cryptography`` package) under a key kept outside the database, and only the
sender decrypts it. Without a key it is stored as it is. A stored secret says which it
is: ``fernet:`` and the token, or the ``whsec_…`` secret."""

from __future__ import annotations

import dataclasses

from cryptography.fernet import Fernet, InvalidToken

from embrasure.model import Subscription

SEALED = "fernet:"


class Unsealable(Exception):
    """A sealed secret this server has no key for, or another key's."""


def new_key() -> str:
    return Fernet.generate_key().decode()


def seal(secret: str, key: str) -> str:
    """The secret as stored: encrypted under ``key``, or as it is without one."""
    return SEALED + Fernet(key).encrypt(secret.encode()).decode() if key else secret


def sealed(s: Subscription, key: str) -> Subscription:
    """The subscription as stored: its secret sealed under ``key`` (seal)."""
    return dataclasses.replace(s, secret=seal(s.secret, key))


def unseal(stored: str, key: str) -> str:
    """The secret a stored one holds; Unsealable when it cannot be read with ``key``."""
    if not stored.startswith(SEALED):
        return stored
    if not key:
        raise Unsealable("its secret is encrypted and no --subscription-secrets-key is set")
    try:
        return Fernet(key).decrypt(stored[len(SEALED) :].encode()).decode()
    except InvalidToken:
        raise Unsealable(
            "its secret was encrypted under another --subscription-secrets-key"
        ) from None
