"""--log-format json: one JSON object per line, with the delivery id on the lines about a
delivery, so a delivery can be followed through the logs."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from embrasure.logs import JsonFormatter

from conftest import MINIMAL_EVENT, ServerProcess
from http_client import HTTP


def test_a_record_becomes_one_json_object_with_its_extra_fields() -> None:
    record = logging.makeLogRecord(
        {
            "name": "embrasure.test",
            "levelname": "WARNING",
            "msg": "delivery %s late",
            "args": ("01ABC",),
            "delivery_id": "01ABC",
            "seq": 7,
        }
    )
    doc = orjson.loads(JsonFormatter().format(record))
    assert doc["message"] == "delivery 01ABC late"
    assert doc["level"] == "warning" and doc["logger"] == "embrasure.test"
    assert doc["delivery_id"] == "01ABC" and doc["seq"] == 7
    assert doc["time"].endswith("Z")


@pytest.mark.slow
def test_the_server_logs_each_delivery_by_its_id(db_path: Path) -> None:
    server = ServerProcess(db_path, "--log-format", "json", "--log-level", "debug").start()
    try:
        r = HTTP.post(
            server.url + "/api/v1/lineage?provider_key=logs-test",
            content=orjson.dumps(MINIMAL_EVENT),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 202
        delivery_id = r.json()["delivery_id"]
    finally:
        server.terminate()
    docs = [orjson.loads(ln) for ln in server.log_path.read_text().splitlines()]  # all JSON
    (mine,) = [d for d in docs if d.get("delivery_id") == delivery_id]
    assert mine["provider_key"] == "logs-test" and mine["logger"] == "embrasure.receiver"
    assert any(d.get("first_seq") == 1 for d in docs)  # the projector's batch line
