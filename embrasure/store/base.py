"""The Store interface: one abstract persistence API, one module per backend.

The delivery log is the source of truth (DESIGN §1). ``append`` is the only way into it:
one call is one transaction, and it returns only after the commit is on stable storage,
so the receiver may acknowledge what it returns. Backends translate their driver's
exceptions into ``errors.StoreError`` and its children.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from ..errors import IdempotencyConflict
from ..model import Delivery, DeliveryDraft, Receipt

AppendResult = Receipt | IdempotencyConflict


class Store(abc.ABC):
    """Persistence for the delivery log (and, later, the graph projected from it)."""

    dialect: str

    @abc.abstractmethod
    def append(self, drafts: Sequence[DeliveryDraft]) -> list[AppendResult]:
        """Append deliveries in ONE durable transaction; one result per draft, in order.

        A draft whose identity (provider_key + Idempotency-Key, else + body SHA-256) is
        already stored, earlier or earlier in ``drafts``, gets the original receipt with
        ``duplicate=True``; the same Idempotency-Key with another body gets an
        IdempotencyConflict. Raises StoreUnavailable, having committed nothing, when the
        transaction cannot commit.
        """

    @abc.abstractmethod
    def get_delivery(self, delivery_id: str) -> Delivery | None:
        """A stored delivery, without its body."""

    @abc.abstractmethod
    def get_body(self, delivery_id: str) -> bytes | None:
        """The stored request body, byte for byte."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers a trivial query."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
