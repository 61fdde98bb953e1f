"""Kafka ingestion (docs/producers/kafka.md) against a real broker (tests/kafka_broker.py)
and the real openlineage-python KafkaTransport: each message a delivery with its
coordinates, projected as the same events sent over HTTP are; bad messages quarantined
with their reasons and coordinates without stalling their partition; a message read
again (a new group, a crash before the offset commit) a duplicate."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from openlineage.client.serde import Serde
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

import olclient as ol
from conftest import ServerProcess
from kafka_broker import Broker

pytestmark = pytest.mark.slow


def _topic(broker: Broker, partitions: int = 2) -> str:
    name = f"ol-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _send_with_client(broker: Broker, topic: str) -> int:
    """The pipeline's events through openlineage-python's KafkaTransport (flush on each
    event, as its Airflow integration runs it); how many."""
    config = KafkaConfig.from_dict(
        {"type": "kafka", "topic": topic, "config": {"bootstrap.servers": broker.bootstrap}}
    )
    client = ol.client(KafkaTransport(config))
    events = ol.pipeline_events()
    for event in events:
        client.emit(event)
    return len(events)


@pytest.fixture
def consuming(kafka: Broker, db_url: str, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    """A topic, and a server consuming it (on each backend)."""
    topic = _topic(kafka)
    proc = ServerProcess(
        db_url, "--kafka-bootstrap", kafka.bootstrap, "--kafka-topic", topic,
        # A group of its own: a group an earlier test's killed server was in waits out
        # that member's session (45 s) before it hands out partitions.
        "--kafka-group", topic, log_dir=tmp_path,
    ).start()  # fmt: skip
    try:
        yield topic, proc
    finally:
        proc.stop()


def _deliveries(http: httpx.Client, count: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The newest ``count`` deliveries, once there are that many and all are settled."""
    deadline = time.monotonic() + timeout
    while True:
        page: list[dict[str, Any]] = http.get("/api/v1/deliveries", params={"limit": 1000}).json()[
            "deliveries"
        ]
        if len(page) >= count and all(d["state"] != "accepted" for d in page):
            return page
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(page)} of {count} deliveries settled: {page[:3]}")
        time.sleep(0.1)


def test_the_client_kafka_transport_gives_the_graph_http_gives(
    consuming: tuple[str, ServerProcess], kafka: Broker, tmp_path: Path, monkeypatch: Any
) -> None:
    ol.clean_environment(monkeypatch, tmp_path)
    topic, proc = consuming
    sent = _send_with_client(kafka, topic)
    with httpx.Client(base_url=proc.url) as http:
        deliveries = _deliveries(http, sent)
        assert {d["provider_key"] for d in deliveries} == {topic}
        assert {d["state"] for d in deliveries} == {"projected"}
        views = [http.get(f"/api/v1/deliveries/{d['delivery_id']}").json() for d in deliveries]
        partitions: dict[str, set[int]] = {}
        for view in views:
            where = view["kafka"]
            assert where["topic"] == topic and where["offset"] >= 0
            partitions.setdefault(where["key"], set()).add(where["partition"])
        # The client keys a run's events by its root job (run:NS/NAME), a JobEvent by its
        # job: each key's messages are on one partition, in order.
        assert f"run:{ol.DAG_NS}/{ol.DAG}" in partitions
        assert all(len(p) == 1 for p in partitions.values()), partitions
        via_kafka = http.get("/api/v1/export").json()

    http_db = tmp_path / "http.db"
    other = ServerProcess(http_db, log_dir=tmp_path).start()
    try:
        client = ol.client(HttpTransport(HttpConfig.from_dict({"type": "http", "url": other.url})))
        for event in ol.pipeline_events():
            client.emit(event)
        with httpx.Client(base_url=other.url) as http:
            ol.wait_projected(http, sent)
            via_http = http.get("/api/v1/export").json()
    finally:
        other.stop()
    assert via_kafka == via_http


POISON = {
    b"not json {": "invalid json",
    b'{"eventType": "START", "eventType": "COMPLETE"}': "duplicate",
    b"[" * 1_000_000 + b"]" * 1_000_000: "deep",
    b'[{"eventType": "START"}]': "object",
}


def test_bad_messages_are_quarantined_with_their_coordinates_and_do_not_stall(
    consuming: tuple[str, ServerProcess], kafka: Broker
) -> None:
    topic, proc = consuming
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "message.max.bytes": 4_000_000})
    good = ol.completed_run(ol.GOOD_RUN)

    failed: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(error)

    # One partition: the good event comes after every bad one.
    for body in [*POISON, Serde.to_json(good).encode()]:
        producer.produce(topic, value=body, key=b"k", partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and not failed, failed
    with httpx.Client(base_url=proc.url) as http:
        deliveries = _deliveries(http, len(POISON) + 1)
        by_offset = {
            d["kafka"]["offset"]: d
            for d in (http.get(f"/api/v1/deliveries/{x['delivery_id']}").json() for x in deliveries)
        }
        assert sorted(by_offset) == list(range(len(POISON) + 1))
        for offset, (body, word) in enumerate(POISON.items()):
            delivery = by_offset[offset]
            assert delivery["state"] == "quarantined", (body[:40], delivery)
            assert delivery["kafka"] == {"topic": topic, "partition": 0, "offset": offset,
                                         "key": "k"}  # fmt: skip
            reasons = [i["reason"] for i in delivery["items"]]
            assert len(reasons) == 1 and word in reasons[0].lower(), (word, reasons)
        assert by_offset[len(POISON)]["state"] == "projected"
        run = http.get(f"/api/v1/runs/{ol.GOOD_RUN}")
        assert run.status_code == 200 and run.json()["state"] == "COMPLETE"


def _duplicates(http: httpx.Client, expected: int, timeout: float = 60) -> int:
    """The consumer's duplicate count (/metrics), once it reaches ``expected`` or the
    time is up."""
    line = 'embrasure_kafka_messages_total{outcome="duplicate"} '
    deadline = time.monotonic() + timeout
    while True:
        text = http.get("/metrics").text
        count = int(float(text.split(line, 1)[1].split()[0])) if line in text else 0
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def test_a_message_read_again_is_a_duplicate(
    kafka: Broker, db_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Another group reads the whole topic again (what a crash before the offset commit,
    or a reset offset, looks like to the log): nothing is stored twice."""
    ol.clean_environment(monkeypatch, tmp_path)
    topic = _topic(kafka)
    sent = _send_with_client(kafka, topic)
    exports = []
    for group in ("first", "second"):
        proc = ServerProcess(
            db_url, "--kafka-bootstrap", kafka.bootstrap, "--kafka-topic", topic,
            "--kafka-group", f"{topic}-{group}", log_dir=tmp_path,
        ).start()  # fmt: skip
        try:
            with httpx.Client(base_url=proc.url) as http:
                assert len(_deliveries(http, sent)) == sent
                expected = sent if group == "second" else 0
                assert _duplicates(http, expected) == expected
                assert len(_deliveries(http, sent)) == sent
                exports.append(http.get("/api/v1/export").json())
        finally:
            proc.stop()
    assert exports[0] == exports[1]
