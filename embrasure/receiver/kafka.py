"""Kafka ingestion (docs/producers/kafka.md): what OpenLineage's KafkaTransport sends,
consumed into the delivery log with nothing lost.

Each message is one delivery of route ``kafka``: the same bounds and strict JSON as a
``POST /api/v1/lineage`` (receiver/bounds.py), appended through the same group commit
as the HTTP deliveries (store/group_commit.py). Here the acknowledgement is the
committed offset: a partition's offset moves only past messages whose commit returned
(fsync'd), once per consumed batch, never per message. Identity is by content
(provider_key + body SHA-256, as an HTTP delivery without Idempotency-Key), so a message
redelivered after a crash or a rebalance is a duplicate and the graph counts its event
once. A bad message (not JSON, over a bound, not an object, duplicate keys) is stored
with its reason and quarantined, and its offset passes with the others: it never stalls
its partition.

confluent-kafka (librdkafka) rather than aiokafka: it is the client openlineage-python's
KafkaTransport uses, so the settings a producer was given (SASL, TLS, …) pass through as
the same librdkafka keys; its wheel bundles librdkafka with SASL and TLS; and its
``consume`` and ``commit`` release the GIL, so the consumer's thread leaves the event
loop alone.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from embrasure.errors import Problem, StoreUnavailable
from embrasure.logs import Repeats
from embrasure.model import DeliveryDraft, KafkaCoordinates, Receipt, Rejection, utc_now
from embrasure.receiver.bounds import Limits, check_body
from embrasure.settings import Settings
from embrasure.store.group_commit import GroupCommitter

log = logging.getLogger("embrasure.kafka")
# librdkafka's own lines (connection failures, rebalances…), through Embrasure's logging
# (one format, --log-format json included) instead of its own stderr text; both loggers
# collapse repeats (a broker down: a line a minute, not twenty a second).
librdkafka_log = logging.getLogger("embrasure.kafka.librdkafka")
for _logger in (log, librdkafka_log):
    _logger.addFilter(Repeats())
PROGRESS_SECONDS = 30.0  # how often a consumer that took messages says what it did

ROUTE = "kafka"
BATCH_MESSAGES = 500  # most messages one consume call hands over: one offset commit
POLL_SECONDS = 0.5
LOAD_SECONDS = 0.1  # how often the backlog bound is looked at (a few index reads: reads.py)


@dataclasses.dataclass(frozen=True)
class KafkaSource:
    """What to consume (settings: --kafka-*)."""

    bootstrap: str
    topics: tuple[str, ...]
    group: str
    provider_key: str  # '' : each message's topic
    client: dict[str, str]  # more librdkafka settings, passed through (SASL, TLS, …)

    def consumer_config(self) -> dict[str, Any]:
        return {
            **self.client,
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            # Offsets move only when their deliveries are durable (module docstring).
            "enable.auto.commit": False,
            "auto.offset.reset": self.client.get("auto.offset.reset", "earliest"),
            "statistics.interval.ms": self.client.get("statistics.interval.ms", "5000"),
        }

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaSource | None:
        """The --kafka-* settings; None without --kafka-bootstrap."""
        if not settings.kafka_bootstrap:
            return None
        topics = tuple(t.strip() for t in settings.kafka_topic.split(",") if t.strip())
        return cls(
            settings.kafka_bootstrap,
            topics,
            settings.kafka_group,
            settings.kafka_provider_key,
            settings.kafka_client(),
        )


def coordinates(message: Message) -> KafkaCoordinates:
    """A consumed message's topic, partition, offset and key (a consumed one has all)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return KafkaCoordinates(topic, partition, offset, message.key())


def draft_of(message: Message, provider_key: str, limits: Limits) -> DeliveryDraft:
    """A message as a delivery draft: checked as one event, or kept whole with the reason
    it was refused (a quarantined item: the projector never parses it)."""
    body = message.value() or b""
    where = coordinates(message)
    provider = provider_key or where.topic
    reason: str | None = None
    if len(body) > limits.body_bytes:
        reason = f"The message is {len(body):,} bytes, over the bound of {limits.body_bytes:,}."
    else:
        try:
            draft = check_body(body, True, provider, None, limits)
        except Problem as exc:  # not JSON, not an object, too deep, duplicate keys…
            reason = exc.detail
        else:
            return dataclasses.replace(draft, route=ROUTE, kafka=where)
    return DeliveryDraft(
        provider_key=provider,
        idempotency_key=None,
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        route=ROUTE,
        item_count=1,
        rejections=(Rejection(0, None, reason),),
        received_at=utc_now(),
        kafka=where,
    )


@dataclasses.dataclass
class KafkaStatus:
    """What /metrics and /readyz show of the consumer."""

    outcomes: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    lag: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    broker_error: str | None = None  # the latest error that left no broker reachable
    paused: bool = False
    committed_batches: int = 0


class KafkaConsumer:
    """Consumes ``source`` in a thread of its own into ``committer``'s groups.

    ``refusing`` says why ingest is refused now (receiver/backpressure.py: the backlog or
    the disk bound), or None: past the bound the consumer pauses its partitions, and
    resumes them below it."""

    def __init__(
        self,
        source: KafkaSource,
        committer: GroupCommitter,
        limits: Limits,
        refusing: Callable[[], str | None] = lambda: None,
        retry_after: float = 1.0,
    ) -> None:
        self.source = source
        self.committer = committer
        self.limits = limits
        self.refusing = refusing
        self.retry_after = retry_after
        self.status = KafkaStatus()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rewound: set[tuple[str, int]] = set()  # partitions sought back (_settle)
        self._outage_since = 0.0  # time.monotonic() when no broker was reachable

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="embrasure-kafka", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask ``run`` to end after the batch in hand (a signal handler may call it)."""
        self._stop.set()

    def stop(self) -> None:
        """Finish the batch in hand (its offsets committed), leave the group, end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def run(self) -> None:
        """The loop, until ``stop``: consume a batch, append it, commit its offsets.

        One batch is in flight while the next is read and checked: its commit (the
        fsync) overlaps the next batch's parsing, and its offsets are committed after
        that batch is handed to the group commit (``_settle``)."""
        config = self.source.consumer_config()
        config["error_cb"] = self._on_error
        config["stats_cb"] = self._on_stats
        consumer = Consumer(config, logger=librdkafka_log)
        consumer.subscribe(list(self.source.topics))
        log.info(
            "consuming %s from %s as group %s",
            ", ".join(self.source.topics),
            self.source.bootstrap,
            self.source.group,
        )
        checked = 0.0
        progress = Progress(self.status)
        in_flight: _Batch | None = None
        try:
            while not self._stop.is_set():
                if time.monotonic() - checked > LOAD_SECONDS:
                    checked = time.monotonic()
                    self._pace(consumer)
                    progress.maybe_report()
                batch = self._submit(_next(consumer, wait=in_flight is None))
                if in_flight is not None:
                    self._settle(consumer, in_flight)
                in_flight = batch
        finally:
            if in_flight is not None:
                self._settle(consumer, in_flight)
            consumer.close()  # leaves the group: its partitions go to the others at once

    def _pace(self, consumer: Consumer) -> None:
        why = self.refusing()
        if why is not None and not self.status.paused:
            log.warning("pausing Kafka partitions: %s", why)
            consumer.pause(consumer.assignment())
            self.status.paused = True
        elif why is None and self.status.paused:
            log.info("resuming Kafka partitions")
            consumer.resume(consumer.assignment())
            self.status.paused = False

    def _submit(self, messages: Sequence[Message]) -> _Batch | None:
        """Check the messages and hand them to the group commit; None when there were
        none to store."""
        good: list[Message] = []
        for message in messages:
            error = message.error()
            if error is None:
                good.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                log.warning("Kafka: %s", error.str())
        if not good:
            return None
        drafts = [draft_of(m, self.source.provider_key, self.limits) for m in good]
        try:
            return _Batch(drafts, self.committer.submit(drafts), None)
        except StoreUnavailable as exc:
            return _Batch(drafts, [], exc)

    def _settle(self, consumer: Consumer, batch: _Batch) -> None:
        """Wait for ``batch``'s commit; commit each partition's offset up to its first
        message not stored, and read again from there (nothing acknowledged before it
        is durable). The batch read meanwhile holds later messages of such a partition:
        stored or not, their offsets are not committed either (``_rewound``)."""
        commit: dict[tuple[str, int], int] = {}
        retry: dict[tuple[str, int], int] = {}
        rewound, self._rewound = self._rewound, set()
        for index, draft in enumerate(batch.drafts):
            where = draft.kafka
            assert where is not None  # draft_of gives every draft its coordinates
            tp = (where.topic, where.partition)
            if tp in retry or tp in rewound:
                continue
            try:
                if batch.failure is not None:
                    raise batch.failure
                receipt: Receipt = batch.futures[index].result()
            except StoreUnavailable as exc:
                retry[tp] = where.offset
                log.error("Kafka message %s[%d]@%d not stored: %s", *tp, where.offset, exc)
                continue
            outcome = _outcome(receipt, draft)
            self.status.outcomes[outcome] += 1
            if outcome == "quarantined":
                log.warning(
                    "Kafka message %s[%d]@%d quarantined: %s",
                    *tp,
                    where.offset,
                    draft.rejections[0].reason if draft.rejections else "",
                    extra={"delivery_id": receipt.delivery_id},
                )
            commit[tp] = where.offset + 1
        if commit:
            offsets = [TopicPartition(t, p, o) for (t, p), o in commit.items()]
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                self.status.committed_batches += 1
            except KafkaException as exc:
                # A rebalance took the partition meanwhile: its new owner reads these
                # messages again, and they are duplicates there (module docstring).
                log.info("Kafka offsets not committed (%s): they are read again", exc)
        for (topic, partition), offset in retry.items():
            consumer.seek(TopicPartition(topic, partition, offset))
        self._rewound = set(retry)
        if retry:
            self._stop.wait(self.retry_after)

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT):
            if self.status.broker_error is None:  # a state change: said once
                self._outage_since = time.monotonic()
                log.warning("Kafka: no broker reachable: %s", error.str())
            self.status.broker_error = error.str()
            return
        log.warning("Kafka: %s", error.str())

    def _on_stats(self, stats_json: str) -> None:
        """librdkafka's statistics (statistics.interval.ms): the lag of each partition it
        consumes, and brokers reachable again."""
        stats = json.loads(stats_json)
        self.status.lag = partition_lag(stats)
        up = any(b.get("state") == "UP" for b in stats.get("brokers", {}).values())
        if up and self.status.broker_error is not None:
            log.info(
                "Kafka: brokers reachable again after %.0f s",
                time.monotonic() - self._outage_since,
            )
            self.status.broker_error = None


@dataclasses.dataclass(frozen=True)
class _Batch:
    """Messages handed to the group commit: their drafts, and a future for each (or the
    failure that kept them all out)."""

    drafts: list[DeliveryDraft]
    futures: list[concurrent.futures.Future[Receipt]]
    failure: StoreUnavailable | None


def _next(consumer: Consumer, wait: bool) -> list[Message]:
    """The messages fetched already (up to a batch); with ``wait`` and none there, the
    first to arrive within POLL_SECONDS and those beside it. Never a wait to fill a
    batch: at a low rate that wait would be every message's lag."""
    messages = consumer.consume(BATCH_MESSAGES, 0)
    if messages or not wait:
        return messages
    first = consumer.poll(POLL_SECONDS)
    return [] if first is None else [first, *consumer.consume(BATCH_MESSAGES - 1, 0)]


def partition_lag(stats: dict[str, Any]) -> dict[tuple[str, int], int]:
    """The lag of each partition this consumer is assigned, from librdkafka's statistics.
    Its ``consumer_lag`` counts from the group's committed offset, so a group that has
    committed nothing yet has none: then from what this consumer has read, or the
    partition's start (where ``earliest`` begins)."""
    lag: dict[tuple[str, int], int] = {}
    for topic, about in stats.get("topics", {}).items():
        for partition, p in about.get("partitions", {}).items():
            if int(partition) < 0 or p.get("fetch_state", "none") == "none":
                continue  # librdkafka's internal partition, or one not assigned here
            behind = int(p.get("consumer_lag", -1))
            if behind < 0:
                end = int(p.get("hi_offset", -1))
                at = max(int(p.get("app_offset", -1)), int(p.get("committed_offset", -1)))
                at = at if at >= 0 else int(p.get("lo_offset", -1))
                if end < 0 or at < 0:
                    continue  # the broker's offsets are not known yet
                behind = max(0, end - at)
            lag[(topic, int(partition))] = behind
    return lag


class Progress:
    """Every PROGRESS_SECONDS in which messages came: how many, by outcome, and the lag
    (what serve's log says of HTTP ingest and projection, for the consumer)."""

    def __init__(self, status: KafkaStatus) -> None:
        self.status = status
        self.since = time.monotonic()
        self.seen = collections.Counter(status.outcomes)

    def maybe_report(self) -> None:
        now = time.monotonic()
        if now - self.since < PROGRESS_SECONDS:
            return
        done = self.status.outcomes - self.seen
        if done:
            log.info(
                "Kafka: %d messages in %.0f s (%d accepted, %d quarantined, %d duplicate); lag %d",
                sum(done.values()),
                now - self.since,
                done["accepted"],
                done["quarantined"],
                done["duplicate"],
                sum(self.status.lag.values()),
                extra={"messages": dict(done), "lag": sum(self.status.lag.values())},
            )
        self.since, self.seen = now, collections.Counter(self.status.outcomes)


def _outcome(receipt: Receipt, draft: DeliveryDraft) -> str:
    if receipt.duplicate:
        return "duplicate"
    return "quarantined" if draft.state == "quarantined" else "accepted"
