"""Nothing acknowledged is lost over Kafka either (docs/producers/kafka.md): the offset
is the acknowledgement, committed only after the commit holding its deliveries. The
consumer is killed (SIGKILL) at random instants while a producer sends; the broker is
restarted mid-stream. Every event is projected once, and the graph is the one the same
events give over HTTP."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from conftest import ServerProcess, run_sql, sqlite_url
from graph_api import at, run_event, run_id
from kafka_broker import Broker

pytestmark = pytest.mark.slow

EVENTS = 20_000
KILLS = 20


def _events(count: int) -> list[bytes]:
    """``count`` distinct RunEvents of 50 jobs, each run reading and writing a table."""
    return [
        json.dumps(
            run_event(
                "COMPLETE",
                f"job_{i % 50}",
                run_id(i),
                at(i // 3600 % 24, i // 60 % 60, i % 60),
                inputs=[{"namespace": "warehouse", "name": f"table_{i % 50}"}],
                outputs=[{"namespace": "warehouse", "name": f"table_{i % 50 + 1}"}],
            )
        ).encode()
        for i in range(count)
    ]


class Sender(threading.Thread):
    """Sends ``bodies`` spread over about ``seconds`` (acks=all), keyed as OpenLineage
    keys them, as a client that must not drop events does: what the broker did not
    acknowledge (a message timed out across the broker's restart, a producer fenced by
    it) is sent again by a new producer, until every message is acknowledged or
    ``deadline_s`` has passed. ``problem`` says why it gave up, for the test to assert."""

    def __init__(
        self, broker: Broker, topic: str, bodies: list[bytes], seconds: float,
        deadline_s: float = 240.0,
    ) -> None:  # fmt: skip
        super().__init__(name="kafka-sender")
        self.broker, self.topic, self.bodies = broker, topic, bodies
        self.seconds, self.deadline_s = seconds, deadline_s
        self.problem: str | None = "not finished"

    def run(self) -> None:
        try:
            self.problem = self._send()
        except Exception as exc:  # the test reports it, instead of a thread's traceback
            self.problem = f"{type(exc).__name__}: {exc}"

    def _send(self) -> str | None:
        deadline = time.monotonic() + self.deadline_s
        pending = list(range(len(self.bodies)))
        spread = self.seconds  # the first round is spread out; resends go at once
        while pending:
            failed: list[tuple[int, str]] = []
            left = self._round(pending, spread, failed, deadline)
            if left:
                return f"{left} messages still queued at the deadline"
            pending, spread = sorted(i for i, _ in failed), 0.0
            if pending and time.monotonic() > deadline:
                return f"{len(pending)} messages unacknowledged: {[e for _, e in failed[:3]]}"
        return None

    def _round(
        self, pending: list[int], seconds: float, failed: list[tuple[int, str]], deadline: float
    ) -> int:
        """Send ``pending`` with a new producer (a new producer id: librdkafka's
        idempotent producer may have raised a fatal error), idempotent so that its own
        retries add no copy; ``failed`` gets what the broker refused. Returns how many
        are still queued at the deadline."""
        config = {"bootstrap.servers": self.broker.bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 30_000}  # fmt: skip
        producer = Producer(config)

        def report(index: int) -> Any:
            def settled(err: Any, _msg: Any) -> None:
                if err is not None:
                    failed.append((index, str(err)))

            return settled

        step = max(1, len(pending) // 100)
        for start in range(0, len(pending), step):
            for index in pending[start : start + step]:
                body = self.bodies[index]
                key = json.loads(body)["job"]["name"].encode()
                while True:
                    try:
                        producer.produce(self.topic, body, key, on_delivery=report(index))
                        break
                    except BufferError:  # the local queue is full: let it drain
                        producer.poll(0.1)
            producer.poll(0)
            time.sleep(seconds / 100)
        return int(producer.flush(max(1.0, deadline - time.monotonic())))


def _consume(
    db: str, broker: Broker, topic: str, log: Path, instance: str = "1"
) -> subprocess.Popen[bytes]:
    """``embrasure consume`` as its own process. Static membership (group.instance.id):
    a consumer restarted after a crash takes its partitions back at once, instead of
    after the dead member's session times out."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "embrasure", "consume", "--db", db,
             "--kafka-bootstrap", broker.bootstrap, "--kafka-topic", topic,
             "--kafka-group", topic, "--kafka-config", f"group.instance.id=consumer-{instance}",
             "--kafka-config", "session.timeout.ms=10000"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _graph_of(db: str, tmp_path: Path) -> dict[str, Any]:
    """Serve ``db`` (its projector catches up) and return the export."""
    proc = ServerProcess(db, log_dir=tmp_path).start()
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as http:
            deadline = time.monotonic() + 180
            while True:
                page = http.get("/api/v1/deliveries", params={"limit": 1}).json()["deliveries"]
                if page and page[0]["state"] != "accepted":
                    break
                assert time.monotonic() < deadline, "not projected in 180 s"
                time.sleep(0.2)
            export: dict[str, Any] = http.get("/api/v1/export").json()
            return export
    finally:
        proc.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own, since it is restarted."""
    own = Broker(tmp_path / "kafka", partitions=4)
    own.start()
    try:
        yield own
    finally:
        own.kill()


def test_kill_9_of_the_consumer_and_a_broker_restart_lose_and_double_nothing(
    broker: Broker, db_url: str, tmp_path: Path
) -> None:
    topic = f"ol-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 4)
    bodies = _events(EVENTS)
    sender = Sender(broker, topic, bodies, 40.0)
    sender.start()
    rng = random.Random(19)
    log = tmp_path / "consume.log"
    consumer = _consume(db_url, broker, topic, log)
    try:
        for kill in range(KILLS):
            time.sleep(rng.uniform(0.3, 2.5))
            consumer.kill()
            consumer.wait()
            if kill == KILLS // 2:  # the broker too, once: stopped, then started again
                broker.stop()
                time.sleep(1)
                broker.start()
            consumer = _consume(db_url, broker, topic, log)
        sender.join()
        assert sender.problem is None, sender.problem
        deadline = time.monotonic() + 240
        while run_sql(db_url, "SELECT COUNT(*) FROM deliveries")[0][0] < EVENTS:
            assert consumer.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, run_sql(db_url, "SELECT COUNT(*) FROM deliveries")
            time.sleep(0.5)
    finally:
        consumer.terminate()
        consumer.wait(60)
    # Each event stored once: a message read again after a kill is a duplicate.
    assert run_sql(db_url, "SELECT COUNT(*), COUNT(DISTINCT body_sha256) FROM deliveries") == [
        (EVENTS, EVENTS)
    ]
    via_kafka = _graph_of(db_url, tmp_path)
    assert len(via_kafka["runs"]) == EVENTS

    http_db = tmp_path / "http.db"
    proc = ServerProcess(http_db, log_dir=tmp_path).start()
    try:
        with httpx.Client(base_url=proc.url, timeout=60) as http:
            for start in range(0, EVENTS, 500):
                batch = b"[" + b",".join(bodies[start : start + 500]) + b"]"
                reply = http.post("/api/v1/lineage/batch", content=batch,
                                  headers={"Content-Type": "application/json"})  # fmt: skip
                assert reply.status_code == 202, reply.text
    finally:
        proc.stop()
    assert _graph_of(sqlite_url(http_db), tmp_path) == via_kafka


def test_two_consumers_of_one_group_share_the_topic_and_one_killed_loses_nothing(
    broker: Broker, pg_db: str, tmp_path: Path
) -> None:
    """On PostgreSQL two consumers share the partitions; one is killed mid-stream and the
    other takes its partitions over (after the session timeout): every event once."""
    topic = f"ol-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 4)
    bodies = _events(5_000)
    log = tmp_path / "consume.log"
    first = _consume(pg_db, broker, topic, log, instance="a")
    second = _consume(pg_db, broker, topic, log, instance="b")
    try:
        sender = Sender(broker, topic, bodies, 20.0)
        sender.start()
        time.sleep(8)
        first.kill()  # mid-stream, its last batch perhaps stored but not committed
        first.wait()
        sender.join()
        assert sender.problem is None, sender.problem
        deadline = time.monotonic() + 120
        while run_sql(pg_db, "SELECT COUNT(*) FROM deliveries")[0][0] < len(bodies):
            assert second.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
    finally:
        second.terminate()
        second.wait(60)
    assert run_sql(pg_db, "SELECT COUNT(*), COUNT(DISTINCT body_sha256) FROM deliveries") == [
        (len(bodies), len(bodies))
    ]


def test_past_the_backlog_bound_the_consumer_pauses_and_resumes_below_it(
    kafka: Broker, tmp_path: Path
) -> None:
    """With no projector the backlog passes its bound: the consumer pauses (metrics say
    so) and stores no more; `embrasure project` catches up, and it resumes."""
    topic = f"ol-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    db = tmp_path / "e.db"
    proc = ServerProcess(
        db, "--no-projector", "--max-backlog-items", "50", "--kafka-bootstrap", kafka.bootstrap,
        "--kafka-topic", topic, "--kafka-group", topic,
    ).start()  # fmt: skip
    bodies = _events(10_000)
    try:
        with httpx.Client(base_url=proc.url) as http:
            sender = Sender(kafka, topic, bodies, 1.0)
            sender.run()  # in this thread
            assert sender.problem is None, sender.problem
            deadline = time.monotonic() + 60
            while "embrasure_kafka_paused 1.0" not in http.get("/metrics").text:
                assert time.monotonic() < deadline, "never paused"
                time.sleep(0.2)
            assert http.get("/readyz").status_code == 503  # the backlog bound: not ready
            time.sleep(3)  # paused: nothing more is stored meanwhile
            held = run_sql(sqlite_url(db), "SELECT COUNT(*) FROM deliveries")[0][0]
            time.sleep(2)
            assert run_sql(sqlite_url(db), "SELECT COUNT(*) FROM deliveries")[0][0] == held
            assert held < len(bodies) // 2  # the bound is looked at every 0.1 s
            projector = subprocess.Popen(
                [sys.executable, "-m", "embrasure", "project", "--db", sqlite_url(db)],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 120
                while run_sql(sqlite_url(db), "SELECT COUNT(*) FROM deliveries")[0][0] < len(
                    bodies
                ):
                    assert time.monotonic() < deadline, "never resumed"
                    time.sleep(0.5)
            finally:
                projector.terminate()
                projector.wait(60)
    finally:
        proc.stop()
