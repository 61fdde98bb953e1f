"""The exception tree.

``Problem`` is what an HTTP client sees: an RFC 9457 problem detail with its status.
``StoreError`` and its children are the storage layer's neutral errors; each backend
translates its driver's exceptions into them so nothing above ``store/`` imports a driver.
``ReplayError`` and its children are the projector's refusals of a replay. ``ArchiveError``
and its children are the archive's (lifecycle/archive.py): the location cannot be used, or
a segment in it is damaged. Routes raise
all of these; web/responses.py renders each kind once (app.build_app registers it).
"""

from __future__ import annotations

from typing import Any

PROBLEM_BASE = "https://embrasure.dev/problems/"


class EmbrasureError(Exception):
    """Base of every error Embrasure raises on purpose."""


class Problem(EmbrasureError):
    """An RFC 9457 problem: ``type``, ``title``, ``status``, ``detail`` and extensions.

    ``limit`` and ``actual`` are the extension members docs/receiver.md#bounds asks for when
    a bound is broken. ``retry_after`` becomes the Retry-After header (RFC 9110 §10.2.3);
    only 429 and 503 carry it, since retrying a 400 or 413 cannot help. ``headers`` are
    further response headers (WWW-Authenticate on 401 and 403, RFC 6750 §3).
    """

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        *,
        limit: int | None = None,
        actual: int | None = None,
        retry_after: int | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        assert retry_after is None or status in (429, 503), "Retry-After only on 429/503"
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.limit = limit
        self.actual = actual
        self.retry_after = retry_after
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": PROBLEM_BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if self.limit is not None:
            doc["limit"] = self.limit
        if self.actual is not None:
            doc["actual"] = self.actual
        doc.update(self.extra)
        return doc


class StoreError(EmbrasureError):
    """The store failed; nothing of the failed operation was committed."""


class StoreUnavailable(StoreError):
    """The store cannot commit now (disk full, I/O error, connection lost): retry later."""


class StoreConflict(StoreUnavailable):
    """Another transaction got in the way (a deadlock, a serialization failure between
    projectors in several processes): nothing was committed; retry at once."""


class ReadTooLong(StoreUnavailable):
    """A read passed its time bound (``--read-timeout-seconds``) and the database
    stopped its query (docs/operations.md#reads-under-load)."""


class LogUnavailable(StoreUnavailable):
    """An append to the delivery log (an ingest, a hide or unhide) did not commit:
    nothing was stored or acknowledged. The message says so in the route's words."""


class BodyArchived(StoreError):
    """A delivery's body is no longer in the database: retention moved it to the archive
    (docs/operations.md#retention-and-the-archive), which the reader has to be given."""


class SchemaError(StoreError):
    """The database's schema is not one this version can use without an upgrade."""


class IdempotencyConflict(EmbrasureError):
    """The same Idempotency-Key arrived again with a different body."""

    def __init__(self, delivery_id: str) -> None:
        super().__init__(delivery_id)
        self.delivery_id = delivery_id


class ReplayError(EmbrasureError):
    """A quarantined item cannot be replayed (docs/queries.md); the message says why."""


class NoSuchDelivery(ReplayError):
    """No delivery of that id is stored."""


class NoSuchItem(ReplayError):
    """The delivery has no item of that index."""


class NotReplayable(ReplayError):
    """The item is never replayed: an administrative entry, or an item rejected at the
    transport boundary (kept for audit, never projected)."""


class NotQuarantined(ReplayError):
    """The item is projected, or not projected yet: there is nothing to replay."""


class ArchiveError(EmbrasureError):
    """The archive of trimmed bodies (docs/operations.md#retention-and-the-archive) failed."""


class ArchiveUnavailable(ArchiveError):
    """The archive's location cannot be written or read (read-only, full, missing, no
    credentials): nothing was archived. The message says what failed, where and why."""


class ArchiveCorrupt(ArchiveError):
    """A segment does not hold what its manifest entry says (hash mismatch, truncated,
    missing, undecodable), or a manifest entry cannot be read: the message names it."""
