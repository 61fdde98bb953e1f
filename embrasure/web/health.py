"""``/healthz`` and ``/readyz`` (docs/operations.md#health): open to all, no token needed."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from embrasure.errors import Problem, StoreUnavailable
from embrasure.processes.status import KafkaView, Processes, RetentionView
from embrasure.receiver.backpressure import Backpressure
from embrasure.store import Store
from embrasure.web.auth import public
from embrasure.web.responses import json_response

# Refusals of one notification after which /readyz names its subscription (5 s, 10 s,
# 20 s… of backoff: about a minute and a quarter of a receiver that is down).
FAILING_AFTER = 4


class Health:
    def __init__(
        self,
        store: Store,
        retry_after: int,
        backpressure: Backpressure,
        retention: RetentionView | None = None,
        kafka: KafkaView | None = None,
        processes: Processes | None = None,
    ) -> None:
        self.store = store
        self.retry_after = retry_after
        self.backpressure = backpressure
        self.retention = retention
        self.kafka = kafka
        self.processes = processes

    def kafka_check(self) -> dict[str, object] | None:
        """docs/producers/kafka.md: this process's consumer. An unreachable broker fails
        this check but not readiness: HTTP ingest still works, and the consumer resumes
        from its committed offsets when the broker is back."""
        status = None if self.kafka is None else self.kafka.status
        if status is None:
            return None
        reason = status.broker_error
        return {
            "status": "unreachable" if reason else ("paused" if status.paused else "ok"),
            "reason": reason,
            "lag": sum(status.lag.values()),
        }

    def retention_check(self) -> dict[str, object] | None:
        """docs/operations.md#retention-and-the-archive: this process's last pass. A
        failing archive fails this check but not readiness: ingest still works, and no
        body leaves the database until the archive takes it."""
        state = None if self.retention is None else self.retention.snapshot()
        if state is None:
            return None
        last = state.last
        return {
            "status": "failing" if state.last_error else "ok",
            "reason": state.last_error,
            "last_pass_at": None if last is None else last.started_at,
            "horizon": None if last is None else last.horizon,
            "bodies_archived": state.bodies_archived,
            "bytes_freed": state.bytes_freed,
            "failures": state.failures,
        }

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        """docs/operations.md#health: ready when the store answers and the backlog is under
        its bound (so is free disk); otherwise 503, saying why, with the load measured.
        With retention on, the body's ``retention`` member reports its last pass."""
        try:
            await run_in_threadpool(self.store.ping)
            load = await self.backpressure.load()
        except StoreUnavailable as exc:
            # Not the store-unavailable problem: what is asked here is readiness.
            raise Problem(
                503, "not-ready", "Not ready", str(exc), retry_after=self.retry_after
            ) from exc
        starting = [] if self.processes is None else self.processes.starting()
        if starting:  # docs/operations.md#processes: reads forwarded to them would wait
            raise Problem(
                503,
                "not-ready",
                "Not ready: read processes starting",
                f"{', '.join(starting)} not serving yet; ingest is accepted meanwhile",
                retry_after=1,
                starting=starting,
            )
        if load.refusing is not None:
            raise Problem(
                503,
                "not-ready",
                "Not ready: refusing ingest",
                load.refusing,
                retry_after=self.retry_after,
                ingest=load.to_json(),
            )
        doc: dict[str, object] = {"status": "ready", "ingest": load.to_json()}
        retention = self.retention_check()
        if retention is not None:
            doc["retention"] = retention
        kafka = self.kafka_check()
        if kafka is not None:
            doc["kafka"] = kafka
        failing = await run_in_threadpool(self.store.failing_subscriptions, FAILING_AFTER)
        if failing:  # docs/notifications.md#delivery: not readiness, as retention's
            doc["notifications"] = {"status": "failing", "subscriptions": failing}
        if self.processes is not None:  # docs/operations.md#processes
            doc["processes"] = self.processes.table()
        return json_response(doc)

    def routes(self) -> list[Route]:
        return [
            Route("/healthz", public(self.healthz), methods=["GET"]),
            Route("/readyz", public(self.readyz), methods=["GET"]),
        ]
