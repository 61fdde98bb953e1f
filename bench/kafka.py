"""Kafka benchmark (issue 19): events/s consumed into the log beside HTTP batch ingest of
the same events, in one run; and the lag from a producer to the log at a steady rate.

Broker: one Apache Kafka KRaft node from its Maven Central jars (tests/kafka_broker.py),
topic of 4 partitions. Events: bench/events.py's (~4.7 KB, unique runIds).

- **ingest**: a fresh SQLite database each round, ``serve --no-projector`` (the receiver
  alone, as bench/ingest.py measures it). *kafka*: the events are produced to a new topic
  first, then a server started with ``--kafka-bootstrap`` consumes them; *http*: the same
  events POSTed in 500-event batches by 4 concurrent clients. Both rates are taken the same
  way, from the log: deliveries' ``received_at`` from the first to the last (so a
  consumer's group join and a client's connect are outside both), events over that span.
  Each round sends ``--warmup`` events first and measures the rest: a fresh log trains
  its first dictionaries from its first bodies and compresses those again
  (store/compression.py), start-up work that a long-running consumer has done long ago,
  and that only the small single-event bodies pay (a 500-event batch is too large to
  train from). The server's CPU per event (over the whole round) and the broker's are
  recorded too: the broker runs on the same two cores.
  Rounds alternate kafka, http, http, kafka …; medians.
- **lag**: ``serve`` with its projector consuming a topic while a producer sends at a
  steady ``--lag-rate`` for ``--lag-warmup`` seconds (reported apart) and then
  ``--lag-seconds``, each event's eventTime the moment it was
  produced; lag = the delivery's ``received_at`` - that time, p50/p99/max (the delivery
  is durable a commit later: a few ms, bench/ingest.py's receipt latency).

Results: bench/results/kafka.{md,json}.
Usage: ``bench/kafka.py [--events N] [--rounds R] [--rev REV]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import events as bench_events
import servers

from kafka_broker import KAFKA_VERSION, Broker

RESULTS = Path(__file__).resolve().parent / "results" / "kafka"
BATCH = 500
CLIENTS = 4


def _bodies(count: int, offset: int = 0) -> list[bytes]:
    return [json.dumps(bench_events.run_event(offset + i)).encode() for i in range(count)]


def _produce(broker: Broker, topic: str, bodies: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    for body in bodies:
        while True:
            try:
                producer.produce(topic, value=body, key=body[-40:])
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _received(db: Path) -> list[tuple[float, int]]:
    """Each delivery's received_at (seconds) and item count, in log order."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT received_at, item_count FROM deliveries ORDER BY seq")
        return [(_epoch(r[0]), int(r[1])) for r in rows]


def _rate(rows: list[tuple[float, int]], warmup: int) -> float:
    """Events per second after the first ``warmup`` events, from the receipt of the
    delivery that ends the warm-up to the last one's (that delivery's own events are
    before the span, so they are not counted)."""
    done = start = 0
    while done + rows[start][1] < max(warmup, 1):
        done += rows[start][1]
        start += 1
    span = rows[-1][0] - rows[start][0]
    return sum(n for _, n in rows[start + 1 :]) / span


def _wait_count(db: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(sqlite3.OperationalError):
            with contextlib.closing(sqlite3.connect(db)) as conn:
                (have,) = conn.execute(
                    "SELECT COALESCE(SUM(item_count), 0) FROM deliveries"
                ).fetchone()
            if have >= count:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {have} of {count} events stored in {timeout} s")
        time.sleep(0.2)


def _consuming(broker: Broker, topic: str) -> list[str]:
    """serve's flags to consume ``topic`` (a group of its own)."""
    return ["--kafka-bootstrap", broker.bootstrap, "--kafka-topic", topic, "--kafka-group", topic]


@dataclasses.dataclass
class Round:
    events_per_s: float  # after the warm-up
    server_cpu_us: float  # the server's CPU per event over the whole round
    broker_cpu_us: float  # the broker's meanwhile (Kafka rounds; 0 for HTTP)
    threads_us: dict[str, float]  # the server's, by thread kind (servers.thread_cpu_seconds)


def _cpu(pid: int) -> float:
    return servers.cpu_snapshot(pid).process


def _threads_us(before: dict[str, float], after: dict[str, float], events: int) -> dict[str, float]:
    return {k: (v - before.get(k, 0.0)) * 1e6 / events for k, v in sorted(after.items())}


def kafka_round(
    broker: Broker, work: Path, source: Path, bodies: list[bytes], warmup: int
) -> Round:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 4)
    _produce(broker, topic, bodies)
    db = work / f"{topic}.db"
    assert broker.proc is not None
    broker_cpu = _cpu(broker.proc.pid)
    server = servers.start_embrasure(work, db, source, extra=_consuming(broker, topic))
    try:
        server_cpu = _cpu(server.pid)  # after start-up (its imports are not the events')
        threads = servers.thread_cpu_seconds(server.pid)
        _wait_count(db, len(bodies), 600)
        server_cpu = _cpu(server.pid) - server_cpu
        threads = _threads_us(threads, servers.thread_cpu_seconds(server.pid), len(bodies))
        broker_cpu = _cpu(broker.proc.pid) - broker_cpu
    finally:
        server.stop()
    per_event = 1e6 / len(bodies)
    rate = _rate(_received(db), warmup)
    return Round(rate, server_cpu * per_event, broker_cpu * per_event, threads)


async def _post_all(url: str, bodies: list[bytes]) -> None:
    batches = [b"[" + b",".join(bodies[i : i + BATCH]) + b"]" for i in range(0, len(bodies), BATCH)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            while not queue.empty():
                batch = queue.get_nowait()
                reply = await http.post(
                    "/api/v1/lineage/batch",
                    content=batch,
                    headers={"Content-Type": "application/json"},
                )
                assert reply.status_code == 202, reply.text

    await asyncio.gather(*(client() for _ in range(CLIENTS)))


def http_round(work: Path, source: Path, bodies: list[bytes], warmup: int) -> Round:
    db = work / f"http-{uuid.uuid4().hex[:8]}.db"
    server = servers.start_embrasure(work, db, source)
    try:
        server_cpu = _cpu(server.pid)
        threads = servers.thread_cpu_seconds(server.pid)
        asyncio.run(_post_all(server.url, bodies))
        server_cpu = _cpu(server.pid) - server_cpu
        threads = _threads_us(threads, servers.thread_cpu_seconds(server.pid), len(bodies))
    finally:
        server.stop()
    rate = _rate(_received(db), warmup)
    return Round(rate, server_cpu * 1e6 / len(bodies), 0.0, threads)


def lag_run(
    broker: Broker, work: Path, source: Path, rate: int, seconds: int, warmup: int
) -> dict[str, Any]:
    """Lag at a steady ``rate``: ``warmup`` seconds first (a fresh server's caches and
    first dictionary, reported apart), then ``seconds`` measured."""
    from confluent_kafka import Producer

    topic = f"lag-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 4)
    db = work / f"{topic}.db"
    server = servers.start_embrasure(
        work, db, source, projector=True, extra=_consuming(broker, topic)
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "acks": "all"})
    try:
        time.sleep(5)  # the consumer has joined its group and been assigned the partitions
        start = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - start) < warmup + seconds:
            due = int(elapsed * rate)
            for _ in range(due - sent):
                event = bench_events.run_event(1_000_000 + sent)
                event["eventTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                producer.produce(topic, value=json.dumps(event).encode())
                sent += 1
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(60)
        _wait_count(db, sent, 120)
    finally:
        server.stop()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT received_at FROM deliveries ORDER BY seq").fetchall()
    # eventTime is in the body: read it back through the log's own reader (compressed).
    from embrasure.store import open_store

    # upgrade: the server may have run an older --rev than this harness's code; the
    # database is a throwaway and the server has stopped.
    store = open_store(f"sqlite:///{db}", upgrade=True)
    try:
        lags = []  # (sent at, lag ms)
        for entry in store.read_log(0, sent + 10, 1 << 40):
            sent_at = _epoch(json.loads(entry.stored_body())["eventTime"])
            lags.append((sent_at, (_epoch(_received_at(rows, entry.seq)) - sent_at) * 1000))
    finally:
        store.close()
    first = min(t for t, _ in lags)
    measured = [lag for t, lag in lags if t - first >= warmup]
    warm = [lag for t, lag in lags if t - first < warmup] or [0.0]
    return {
        "rate": rate,
        "seconds": seconds,
        "warmup_seconds": warmup,
        "events": len(measured),
        "lag_ms_p50": servers.percentile(measured, 50),
        "lag_ms_p99": servers.percentile(measured, 99),
        "lag_ms_max": max(measured),
        "warmup_lag_ms_p99": servers.percentile(warm, 99),
        "warmup_lag_ms_max": max(warm),
    }


def _received_at(rows: list[tuple[str]], seq: int) -> str:
    return rows[seq - 1][0]  # a fresh log: seq runs 1, 2, …


THREAD_KINDS = ("main", "other", "rdk")


def _median_of(rounds: list[dict[str, float]], kind: str) -> str:
    values = [r[kind] for r in rounds if kind in r]
    return f"{statistics.median(values):.0f}" if values else "-"


def _rates(rates: list[float]) -> str:
    return f"{statistics.median(rates):,.0f} | {', '.join(f'{x:,.0f}' for x in rates)} |"


def markdown(report: dict[str, Any]) -> str:
    m, ing, lag = report["machine"], report["ingest"], report["lag"]
    lines = [
        "# Kafka ingestion (bench/kafka.py)",
        "",
        f"{m['date']}, commit {m['commit']}, {m['nproc']} cores ({m['cpu']}), Python "
        f"{m['python']}, SQLite {m['sqlite']}, Kafka {KAFKA_VERSION} (one KRaft node, this "
        f"machine); the machine was busy {report['busy_before']:.2f} cores before the run and"
        f" {report['busy_after']:.2f} after it.",
        "",
        f"## Ingest into the log: {ing['events']:,} events (~4.7 KB) after"
        f" {ing['warmup']:,} of warm-up, {ing['rounds']} rounds",
        "",
        "| path | events/s (median) | rounds | server CPU µs/event (median) |"
        " broker CPU µs/event |",
        "|---|---|---|---|---|",
        "| Kafka (`serve --no-projector --kafka-bootstrap`, 4 partitions) | "
        + _rates(ing["kafka"])
        + f" {statistics.median(ing['server_cpu_us']['kafka']):.0f} |"
        + f" {statistics.median(ing['broker_cpu_us']):.0f} |",
        "| HTTP batch (500-event POSTs, 4 clients, `serve --no-projector`) | "
        + _rates(ing["http"])
        + f" {statistics.median(ing['server_cpu_us']['http']):.0f} | n/a |",
        "",
        f"Kafka / HTTP batch: **{ing['ratio']:.2f}** (target ≥ 0.80). Rates are over the"
        " events after the warm-up; CPU over each whole round (warm-up included), the"
        " server's from when it was ready.",
        "",
        "The server's CPU µs/event by thread (median of the rounds): `main` is the event"
        " loop, `rdk` librdkafka's threads (fetching, decompressing), `other` every other"
        " thread (the consumer's, the group commit's, compression's pool):",
        "",
        "| path | " + " | ".join(THREAD_KINDS) + " |",
        "|---|" + "---|" * len(THREAD_KINDS),
        *(
            f"| {path} | "
            + " | ".join(_median_of(ing["threads_us"][path], k) for k in THREAD_KINDS)
            + " |"
            for path in ("kafka", "http")
        ),
        "",
        f"## Lag at {lag['rate']:,} events/s for {lag['seconds']} s ({lag['events']:,} events)",
        "",
        "Produced (eventTime = the moment of sending) → stored in the log (received_at),"
        f" with the projector running, after {lag['warmup_seconds']} s of the same traffic"
        " (a fresh server's first dictionary and caches):",
        "",
        "| p50 ms | p99 ms | max ms | warm-up p99 / max ms |",
        "|---|---|---|---|",
        f"| {lag['lag_ms_p50']:.1f} | {lag['lag_ms_p99']:.1f} | {lag['lag_ms_max']:.1f} |"
        f" {lag['warmup_lag_ms_p99']:.1f} / {lag['warmup_lag_ms_max']:.1f} |",
        "",
        "Raw figures: [kafka.json](kafka.json).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20_000, help="events measured, per round")
    p.add_argument(
        "--warmup",
        type=int,
        default=5_000,
        help="events sent first in each round and not measured (the log's first"
        " dictionaries are trained and adopted meanwhile: store/compression.py)",
    )
    p.add_argument("--rounds", type=int, default=2, help="rounds of each path")
    p.add_argument("--lag-rate", type=int, default=1000)
    p.add_argument("--lag-seconds", type=int, default=30)
    p.add_argument("--lag-warmup", type=int, default=5, help="seconds sent first, not measured")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--rev", default="HEAD", help="the git revision measured")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-kafka-bench-"))
    source = work / "src"
    code = servers.copy_source(source, args.rev)
    busy = servers.busy_cores(2.0)
    broker = Broker(work / "broker", partitions=4)
    broker.start()
    try:
        bodies = _bodies(args.warmup + args.events)
        rounds: dict[str, list[Round]] = {"kafka": [], "http": []}
        for r in range(args.rounds):
            order = ("kafka", "http") if r % 2 == 0 else ("http", "kafka")
            for path in order:
                if path == "kafka":
                    result = kafka_round(broker, work, source, bodies, args.warmup)
                else:
                    result = http_round(work, source, bodies, args.warmup)
                rounds[path].append(result)
                print(
                    f"round {r + 1} {path}: {result.events_per_s:,.0f} ev/s, server"
                    f" {result.server_cpu_us:.0f} µs CPU/event, broker {result.broker_cpu_us:.0f};"
                    f" by thread {', '.join(f'{k} {v:.0f}' for k, v in result.threads_us.items())}"
                )
        lag = lag_run(broker, work, source, args.lag_rate, args.lag_seconds, args.lag_warmup)
        print(f"lag p50/p99 {lag['lag_ms_p50']:.1f}/{lag['lag_ms_p99']:.1f} ms")
    finally:
        broker.stop()
    busy_after = servers.busy_cores(2.0)
    rates = {path: [x.events_per_s for x in rs] for path, rs in rounds.items()}
    report = {
        "machine": servers.machine_facts(code),
        "busy_before": busy,
        "busy_after": busy_after,
        "ingest": {
            "events": args.events,
            "warmup": args.warmup,
            "rounds": args.rounds,
            **rates,
            "server_cpu_us": {p: [x.server_cpu_us for x in rs] for p, rs in rounds.items()},
            "broker_cpu_us": [x.broker_cpu_us for x in rounds["kafka"]],
            "threads_us": {p: [x.threads_us for x in rs] for p, rs in rounds.items()},
            "ratio": statistics.median(rates["kafka"]) / statistics.median(rates["http"]),
        },
        "lag": lag,
    }
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
