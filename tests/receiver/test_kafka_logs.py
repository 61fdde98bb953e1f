"""The Kafka consumer as an operator reads it (docs/producers/kafka.md#logs): librdkafka's
lines through Embrasure's logging, an outage said once a minute rather than twenty times
a second, lag from the first statistics, progress lines."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from embrasure.logs import Repeats
from embrasure.receiver.kafka import partition_lag

from conftest import free_port


def test_repeats_stand_for_their_kind_once_a_window() -> None:
    caught: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caught.append(record.getMessage())

    logger = logging.getLogger("test.repeats")
    logger.propagate = False
    logger.addHandler(Keep())
    logger.addFilter(Repeats(window=0.3))
    for port in range(5):  # the same line but for its numbers
        logger.warning("Connect to ipv4#127.0.0.1:%d failed: Connection refused", 9000 + port)
    logger.warning("another kind of line")
    time.sleep(0.35)
    logger.warning("Connect to ipv4#127.0.0.1:%d failed: Connection refused", 9999)
    assert caught == [
        "Connect to ipv4#127.0.0.1:9000 failed: Connection refused",
        "another kind of line",
        "Connect to ipv4#127.0.0.1:9999 failed: Connection refused (4 more like it since)",
    ]


def partition(**fields: object) -> dict[str, object]:
    return {"fetch_state": "active", "consumer_lag": -1, "hi_offset": 100, **fields}


@pytest.mark.parametrize(
    ("fields", "lag"),
    [
        ({"consumer_lag": 7}, 7),  # the group committed: librdkafka's own figure
        ({"app_offset": 60, "committed_offset": -1001}, 40),  # read, nothing committed
        ({"app_offset": -1001, "committed_offset": -1001, "lo_offset": 10}, 90),  # not read
        ({"fetch_state": "none", "consumer_lag": 3}, None),  # not assigned to this consumer
        ({"hi_offset": -1, "lo_offset": 0}, None),  # the broker's offsets not known yet
        ({"app_offset": 120}, 0),  # watermarks lag behind what was read: never negative
    ],
)
def test_lag_from_the_first_statistics(fields: dict[str, object], lag: int | None) -> None:
    stats = {"topics": {"ol": {"partitions": {"0": partition(**fields), "-1": partition()}}}}
    assert partition_lag(stats) == ({} if lag is None else {("ol", 0): lag})


def test_a_broker_outage_is_a_few_json_lines(tmp_path: Path) -> None:
    """`consume --log-format json` against a port no broker listens on, for 6 s:
    every line on stderr is JSON (librdkafka's too), and the refusals, about twenty a
    second from librdkafka, are a handful of lines."""
    dead = f"127.0.0.1:{free_port()}"
    db = tmp_path / "e.db"
    args = ["--db", f"sqlite:///{db}", "--kafka-bootstrap", dead, "--kafka-topic", "ol"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "consume", *args, "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(6)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = [orjson.loads(line) for line in err.splitlines() if line.strip()]
    loggers = [line["logger"] for line in lines]
    assert "embrasure.kafka.librdkafka" in loggers  # librdkafka's own lines, as JSON
    refused = [line for line in lines if "refused" in line["message"].lower()]
    assert 1 <= len(refused) <= 4, [line["message"] for line in lines]
    assert any(line["message"].startswith("Kafka: no broker reachable") for line in lines)
