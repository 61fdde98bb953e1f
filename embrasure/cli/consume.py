"""`embrasure consume` (docs/producers/kafka.md): OpenLineage events from Kafka into the
log, without the HTTP server; `serve --kafka-bootstrap` does the same beside it."""

from __future__ import annotations

import signal
from typing import Any

import click

from embrasure import logs
from embrasure.cli.options import fail, load_settings, open_log_store, setting_options
from embrasure.errors import EmbrasureError
from embrasure.settings import Settings

KAFKA_SETTINGS = (
    "kafka_bootstrap",
    "kafka_topic",
    "kafka_group",
    "kafka_provider_key",
    "kafka_config",
)


def kafka_source(settings: Settings) -> Any:
    """The KafkaSource the settings name, or None without --kafka-bootstrap (librdkafka
    is loaded only then)."""
    if not settings.kafka_bootstrap:
        return None
    from embrasure.receiver.kafka import KafkaSource

    return KafkaSource.from_settings(settings)


@click.command()
@setting_options(
    "db",
    *KAFKA_SETTINGS,
    "upgrade",
    "group_commit_max",
    "group_commit_max_bytes",
    "max_backlog_items",
    "min_free_disk_mb",
    "retry_after",
    "log_level",
    "log_format",
    "db_pool_size",
    "log_compression",
)
def consume(**flags: Any) -> None:
    """Consume OpenLineage events from Kafka topics into the log until stopped (SIGTERM,
    Ctrl-C); offsets are committed once their deliveries are durable. Projection is
    serve's or `embrasure project`'s, beside it."""
    from embrasure.processes.status import Publisher, StatusBoard, kafka_doc
    from embrasure.receiver.backpressure import Backpressure
    from embrasure.receiver.bounds import Limits, MiB
    from embrasure.receiver.kafka import KafkaConsumer
    from embrasure.store.group_commit import GroupCommitter

    settings = load_settings(flags)
    logs.configure(settings.log_level, settings.log_format)
    source = kafka_source(settings)
    if source is None:
        fail("consume needs --kafka-bootstrap (EMBRASURE_KAFKA_BOOTSTRAP): HOST:PORT of a broker")
    try:
        store = open_log_store(settings)
    except EmbrasureError as exc:
        fail(str(exc))
    committer = GroupCommitter(store, settings.group_commit_max, settings.group_commit_max_bytes)
    backpressure = Backpressure(
        store, settings.max_backlog_items, settings.min_free_disk_mb * MiB, settings.retry_after
    )
    consumer = KafkaConsumer(
        source, committer, Limits(), backpressure.refusing_now, settings.retry_after
    )
    for sig in (signal.SIGTERM, signal.SIGINT):  # the batch in hand commits, then it ends
        signal.signal(sig, lambda signum, frame: consumer.request_stop())
    # Under serve, what it does is published for serve's /readyz and /metrics.
    board = StatusBoard.from_environment()
    publisher = Publisher(board, "kafka", lambda: kafka_doc(consumer.status)) if board else None
    committer.start()
    if publisher is not None:
        publisher.start()
    try:
        consumer.run()
    finally:
        committer.stop()
        if publisher is not None:
            publisher.stop()
        store.close()


COMMANDS = (consume,)
