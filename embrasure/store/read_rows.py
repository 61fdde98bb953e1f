"""Typed rows of the shapes the reader builds itself (GraphReader, store/base.py): joins
and aggregates over the log and graph tables, not a table's record (those are in
store/rows.py). ``NamedTuple``s like those, for the same reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from embrasure.model import KafkaCoordinates, Writer


class DeliveryRow(NamedTuple):
    """A delivery: its log columns, its state and its projection's counts (NULL before
    it is projected)."""

    seq: int
    delivery_id: str
    provider_key: str
    idempotency_key: str | None
    body_sha256: str
    received_at: str
    route: str
    item_count: int
    rejections: str  # JSON [[index, kind, reason], …]
    log_state: str  # the state recorded on receipt
    state: str  # accepted / projected / partially_projected / quarantined
    projected: int | None
    quarantined: int | None
    edges_created: int | None
    kinds: str | None  # DeliveryOutcome.kinds
    kafka: KafkaCoordinates | None  # route "kafka": where the message came from
    writer: Writer | None  # who appended it, while auth was on

    @classmethod
    def of(cls, row: Sequence[Any]) -> DeliveryRow:
        """From a reads.py delivery query: its columns, then the Kafka join's four and
        the writers join's four."""
        topic, partition, offset, key = row[-8:-4]
        kafka = (
            None
            if topic is None
            else KafkaCoordinates(
                str(topic), int(partition), int(offset), None if key is None else bytes(key)
            )
        )
        kind, subject, issuer, token_id = row[-4:]
        writer = None if kind is None else Writer(kind, subject, issuer, token_id)
        return cls._make((*row[:-8], kafka, writer))


class QuarantinedItem(NamedTuple):
    delivery_id: str
    idx: int
    kind: str | None
    reason: str | None
    received_at: str
    seq: int


class OutcomeTotal(NamedTuple):
    """The projected deliveries in one state, and their items."""

    state: str  # projected / partially_projected / quarantined
    deliveries: int
    projected: int
    quarantined: int


class Backlog(NamedTuple):
    """The log past the graph's position."""

    deliveries: int  # with items to project
    items: int  # those items
    oldest: str | None  # the oldest such delivery's received_at
    rejected: int  # deliveries whose every item was rejected on receipt


class NamespaceRow(NamedTuple):
    namespace: str
    datasets: int  # dataset identities
    jobs: int


class NamespaceSpan(NamedTuple):
    """The earliest and latest eventTime keys of the edges naming a namespace's jobs or
    datasets (the Marquez API's createdAt and updatedAt, marquez/namespaces.py)."""

    namespace: str
    first_key: str | None
    last_key: str | None


class JobRecency(NamedTuple):
    """A job and the latest eventTime key of its runs (None: no run), the order Marquez
    lists jobs in (marquez/jobs.py)."""

    ns: str
    name: str
    latest_key: str | None


class TypeCount(NamedTuple):
    """How many events of one eventType a time range holds (the Marquez API's stats)."""

    event_type: str | None
    events: int


class SearchHit(NamedTuple):
    kind: str  # dataset / job / field
    ns: str
    name: str
    field: str | None
    rank: int  # 0 exact, 1 prefix, 2 substring


class EventPlace(NamedTuple):
    """An event and where its bytes are in the log (where first seen)."""

    event_id: str
    time_key: str
    time_text: str | None
    seq: int
    idx: int
    route: str


class RunUse(NamedTuple):
    """A run that read or wrote a dataset (one identity as sent), in the dataset's run
    order (GraphReader.runs_of_dataset)."""

    run_key: str  # the run's latest eventTime key ('' unknown)
    run_id: str
    direction: str  # 'in' read, 'out' wrote
    version: str | None  # the dataset version the run named (RunIoRow)
    version_key: str | None


class SentFacet(NamedTuple):
    """A dataset facet value a run's events sent about a dataset in one role
    (GraphReader.sent_facets), with the latest eventTime key among those events."""

    run_id: str
    entity: str  # projector/shapes.py sent_entity: the role and the dataset as sent
    name: str
    value_hash: bytes
    time_key: str  # '' unknown
