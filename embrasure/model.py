"""Plain data passed between the receiver, the log and the read side. No I/O."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

# Crockford's base32, the ULID alphabet: ids sort as strings in creation order.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class DeliveryIds:
    """ULIDs (https://github.com/ulid/spec) that are strictly increasing in one process.

    48 bits of milliseconds, then 80 bits that start random each millisecond and count
    up within it (the spec's monotonic mode), so ids sort by arrival even when many
    deliveries commit in the same millisecond.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def new(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_rand + 1
            else:
                rand = int.from_bytes(os.urandom(10), "big") >> 1  # room to count up
            self._last_ms, self._last_rand = ms, rand
        value = (ms << 80) | rand
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def utc_now() -> str:
    """Now as an RFC 3339 UTC string with microseconds (sorts as text)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    """An item rejected at the transport boundary (DESIGN §2): kept, never projected."""

    index: int
    kind: str | None  # RunEvent / JobEvent / DatasetEvent, None when not an object
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class DeliveryDraft:
    """A checked request, ready to be appended to the delivery log."""

    provider_key: str
    idempotency_key: str | None
    body_sha256: str
    body: bytes
    route: str  # "single" or "batch"
    item_count: int
    rejections: tuple[Rejection, ...]
    received_at: str

    @property
    def dedupe_key(self) -> str:
        """Delivery identity within a provider_key (DESIGN §2)."""
        if self.idempotency_key is not None:
            return "key:" + self.idempotency_key
        return "sha256:" + self.body_sha256

    @property
    def state(self) -> str:
        return "quarantined" if len(self.rejections) == self.item_count else "accepted"


@dataclasses.dataclass(frozen=True, slots=True)
class Receipt:
    """The 202 body (DESIGN §2)."""

    delivery_id: str
    state: str
    duplicate: bool
    item_count: int
    invalid_item_count: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """A stored delivery as the read side sees it."""

    seq: int
    delivery_id: str
    provider_key: str
    idempotency_key: str | None
    body_sha256: str
    received_at: str
    route: str
    item_count: int
    rejections: tuple[Rejection, ...]
    state: str
