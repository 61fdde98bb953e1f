"""``GET /metrics`` (docs/operations.md#metrics): Prometheus text format, every name
prefixed ``embrasure_``.

Five sources:
- the database, read at scrape time (deliveries by state, items by outcome, backlog,
  projection lag, free disk): the deployment's truth, so with several receivers and
  projectors on one PostgreSQL every process reports the same figures;
- this process: request latency histograms by method, route template and status (the
  ingest routes' 202/429/503 included), from an ASGI middleware; on SQLite, the memory
  its page caches hold.
- the retention passes (``--retain-log``): passes, failures, bodies archived, bytes freed
  (docs/operations.md#retention-and-the-archive);
- the Kafka consumer (``--kafka-bootstrap``): messages by outcome, lag per partition,
  paused (docs/producers/kafka.md);
- serve's processes: up, restarts (docs/operations.md#processes).

The last three are this process's threads' under ``serve --single-process``, else what
serve's other processes publish (processes/status.py).

A registry per app, not prometheus_client's global one: tests build many apps in one
process, and each server reports only its own traffic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from embrasure.processes.status import KafkaView, Processes, RetentionView
from embrasure.query.entities import ingest_totals
from embrasure.receiver.backpressure import Backpressure
from embrasure.store import Store
from embrasure.web.auth import requires

# Seconds; an ingest answer is a few ms, a hub lineage tens, an export minutes.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GraphCollector(Collector):
    """The database's figures, read when Prometheus scrapes (off the event loop)."""

    def __init__(self, store: Store, backpressure: Backpressure) -> None:
        self.store = store
        self.backpressure = backpressure

    def collect(self) -> Iterator[Metric]:
        with self.store.reader() as reader:
            totals = ingest_totals(reader)
        deliveries = GaugeMetricFamily(
            "embrasure_deliveries", "Deliveries in the log, by state.", labels=["state"]
        )
        for state, count in totals.deliveries.items():
            deliveries.add_metric([state], count)
        yield deliveries
        items = GaugeMetricFamily(
            "embrasure_items",
            "Events in the log, by outcome: projected, quarantined, pending (received, not"
            " yet projected).",
            labels=["outcome"],
        )
        for outcome in ("projected", "quarantined", "pending"):
            items.add_metric([outcome], totals.items[outcome])
        yield items
        yield GaugeMetricFamily(
            "embrasure_projection_backlog_items",
            "Items received and not yet projected; ingest answers 429 past its bound.",
            value=totals.pending,
        )
        yield GaugeMetricFamily(
            "embrasure_projection_backlog_bound_items",
            "The bound on the backlog (--max-backlog-items).",
            value=self.backpressure.max_backlog_items,
        )
        lag = 0.0
        if totals.oldest_pending is not None:
            received = datetime.fromisoformat(totals.oldest_pending.replace("Z", "+00:00"))
            lag = max(0.0, (datetime.now(UTC) - received).total_seconds())
        yield GaugeMetricFamily(
            "embrasure_projection_lag_seconds",
            "Age of the oldest delivery not yet projected (0 when caught up).",
            value=lag,
        )
        yield from _side_table(self.store)
        free = self.store.free_disk_bytes()
        if free is not None:
            yield GaugeMetricFamily(
                "embrasure_free_disk_bytes", "Free bytes beside the SQLite log.", value=free
            )
        engine = self.store.engine_memory_bytes()
        if engine is not None:
            yield GaugeMetricFamily(
                "embrasure_sqlite_memory_bytes",
                "Memory SQLite holds in this process, its page caches above all (the"
                " projector's grows up to 128 MiB as it touches more of the graph).",
                value=engine,
            )


def _side_table(store: Store) -> Iterator[Metric]:
    """The notifications' outbox (docs/notifications.md#metrics)."""
    counts, oldest = store.outbox_summary()
    by_state = GaugeMetricFamily(
        "embrasure_notifications",
        "Notifications in the outbox, by state: pending (to send, or to retry), sent,"
        " superseded (no longer true when due), failed (given up).",
        labels=["state"],
    )
    for state, count in counts.items():
        by_state.add_metric([state], count)
    yield by_state
    age = 0.0
    if oldest is not None:
        age = max(0.0, (datetime.now(UTC) - datetime.fromisoformat(oldest)).total_seconds())
    yield GaugeMetricFamily(
        "embrasure_notifications_oldest_pending_seconds",
        "Age of the oldest notification not yet sent nor given up (0 when none).",
        value=age,
    )


class RetentionCollector(Collector):
    """The retention passes (docs/operations.md#retention-and-the-archive): this
    process's, or serve's retention process's."""

    def __init__(self, retention: RetentionView) -> None:
        self.retention = retention

    def collect(self) -> Iterator[Metric]:
        state = self.retention.snapshot()
        if state is None:
            return
        yield CounterMetricFamily(
            "embrasure_retention_passes",
            "Retention passes this process ran.",
            value=state.passes,
        )
        yield CounterMetricFamily(
            "embrasure_retention_failures",
            "Retention passes that stopped early (the archive could not be written or"
            " read, the database failed): nothing unarchived was deleted.",
            value=state.failures,
        )
        yield CounterMetricFamily(
            "embrasure_retention_bodies_archived",
            "Delivery bodies this process's passes moved to the archive.",
            value=state.bodies_archived,
        )
        yield CounterMetricFamily(
            "embrasure_retention_runs_removed",
            "Runs this process's passes removed from the graph (--retain-runs).",
            value=state.runs_removed,
        )
        yield CounterMetricFamily(
            "embrasure_retention_freed_bytes",
            "Bytes of stored bodies deleted from the database, and of space given back"
            " (SQLite pages, dropped PostgreSQL partitions).",
            value=state.bytes_freed,
        )
        yield GaugeMetricFamily(
            "embrasure_retention_failing",
            "1 while the last retention pass failed (its reason is in /readyz), else 0.",
            value=1 if state.last_error else 0,
        )
        if state.last_finished is not None:
            yield GaugeMetricFamily(
                "embrasure_retention_last_pass_timestamp_seconds",
                "When the last retention pass ended (Unix time).",
                value=state.last_finished,
            )


class KafkaCollector(Collector):
    """The Kafka consumer (docs/producers/kafka.md): this process's, or serve's
    consumer process's."""

    def __init__(self, consumer: KafkaView) -> None:
        self.consumer = consumer

    def collect(self) -> Iterator[Metric]:
        status = self.consumer.status
        if status is None:
            return
        messages = CounterMetricFamily(
            "embrasure_kafka_messages",
            "Kafka messages stored, by outcome: accepted, quarantined (stored with the"
            " reason), duplicate (read again: nothing stored).",
            labels=["outcome"],
        )
        for outcome in ("accepted", "quarantined", "duplicate"):
            messages.add_metric([outcome], status.outcomes[outcome])
        yield messages
        lag = GaugeMetricFamily(
            "embrasure_kafka_consumer_lag",
            "Messages in a partition past this consumer's position (librdkafka's figure).",
            labels=["topic", "partition"],
        )
        for (topic, partition), behind in sorted(dict(status.lag).items()):
            lag.add_metric([topic, str(partition)], behind)
        yield lag
        yield GaugeMetricFamily(
            "embrasure_kafka_paused",
            "1 while the consumer's partitions are paused (ingest refused: backlog or disk).",
            value=1 if status.paused else 0,
        )
        yield GaugeMetricFamily(
            "embrasure_kafka_broker_unreachable",
            "1 while no broker is reachable (the reason is in /readyz), else 0.",
            value=1 if status.broker_error else 0,
        )


class ProcessCollector(Collector):
    """serve's processes (docs/operations.md#processes): up, and restarts so far."""

    def __init__(self, processes: Processes) -> None:
        self.processes = processes

    def collect(self) -> Iterator[Metric]:
        table = self.processes.table()
        up = GaugeMetricFamily(
            "embrasure_process_up",
            "1 while the process runs, 0 while the supervisor starts it again.",
            labels=["process"],
        )
        restarts = CounterMetricFamily(
            "embrasure_process_restarts",
            "Times the supervisor started the process again after it died.",
            labels=["process"],
        )
        for name, row in sorted(table.items()):
            up.add_metric([name], 1 if row["state"] == "running" else 0)
            restarts.add_metric([name], row["restarts"])
        yield up
        yield restarts


class Metrics:
    """The app's registry, its request histogram, and the /metrics route (scope read)."""

    def __init__(
        self,
        store: Store,
        backpressure: Backpressure,
        retention: RetentionView | None = None,
        kafka: KafkaView | None = None,
        processes: Processes | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Histogram(
            "embrasure_http_request_duration_seconds",
            "Time to answer a request, by method, route template and status.",
            ["method", "route", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.registry.register(GraphCollector(store, backpressure))
        if retention is not None:
            self.registry.register(RetentionCollector(retention))
        if kafka is not None:
            self.registry.register(KafkaCollector(kafka))
        if processes is not None:
            self.registry.register(ProcessCollector(processes))

    async def endpoint(self, request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, self.registry)
        # Text format 0.0.4: what every Prometheus (2.x and 3.x) and agent reads; the
        # names here are all legacy-safe, so nothing needs the 1.0.0 format.
        return Response(body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/metrics", requires("read", everywhere=True)(self.endpoint), methods=["GET"])
        ]

    def middleware(self) -> Middleware:
        return Middleware(TimedRequests, histogram=self.requests)


class TimedRequests:
    """ASGI middleware: observe each HTTP request's duration under its route template
    (the router sets scope["route"]; an unmatched path is "unmatched", so a scan of
    random URLs cannot grow the label set)."""

    def __init__(self, app: ASGIApp, histogram: Histogram) -> None:
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # A Route's path is its template; a Mount's (/ui/static) its prefix.
            route = scope.get("route")
            template = route.path if isinstance(route, Route | Mount) else "unmatched"
            self.histogram.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )
