"""Conformance through the real server: every event of the OpenLineage corpus is posted
over HTTP to `embrasure serve` (receiver and projector in one process, as users run it).

No 5xx; every item ends projected or quarantined, none left pending; every quarantine
reason names the rule; and each event's outcome over HTTP is the one the pure pipeline
gives (tests/projector/test_pipeline_corpus.py checks those outcomes in detail).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson
import pytest

from embrasure.model import Quarantined
from embrasure.projector.pipeline import project_event

from conftest import ServerProcess, requires_shared
from corpus import EVENT_FILES, MISSING, REASON, load

pytestmark = [requires_shared(), pytest.mark.slow]

JSON = {"Content-Type": "application/json"}


def _events() -> list[tuple[str, list[Any]]]:
    out = []
    for entry in EVENT_FILES:
        if entry["format"] not in ("object", "array") and not entry["format"].startswith(
            "yaml-flow"
        ):
            continue
        out.append((str(entry["file"]), load(entry)))
    return out


def _wait_projected(http: httpx.Client, ids: list[str], timeout: float = 120) -> list[Any]:
    deadline = time.monotonic() + timeout
    views: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for delivery_id in ids:
            if delivery_id in views:
                continue
            view = http.get(f"/api/v1/deliveries/{delivery_id}").json()
            if view["summary"]["pending"] == 0:
                views[delivery_id] = view
        if len(views) == len(set(ids)):  # a repeated body is one delivery
            return [views[i] for i in ids]
        time.sleep(0.2)
    stuck = [i for i in ids if i not in views]
    example = http.get(f"/api/v1/deliveries/{stuck[0]}").json()
    raise AssertionError(f"{len(stuck)} deliveries still pending after {timeout} s: {example}")


def test_every_corpus_event_through_the_server(server: ServerProcess) -> None:
    files = _events()
    assert len(files) > 250, "the corpus should hold a few hundred event files"
    sent: list[tuple[str, str, list[Any]]] = []  # (file, delivery id, events)
    with httpx.Client(base_url=server.url, headers=JSON, timeout=30) as http:
        for n, (name, events) in enumerate(files):
            # Files alternate between the batch route and one request per event.
            if n % 2 == 0 or len(events) == 1:
                r = http.post("/api/v1/lineage/batch", content=orjson.dumps(events))
                assert r.status_code == 202, (name, r.text)
                sent.append((name, r.json()["delivery_id"], events))
            else:
                for event in events:
                    r = http.post("/api/v1/lineage", content=orjson.dumps(event))
                    assert r.status_code == 202, (name, r.text)
                    sent.append((name, r.json()["delivery_id"], [event]))
        views = _wait_projected(http, [delivery_id for _, delivery_id, _ in sent])

    outcomes = {"projected": 0, "quarantined": 0}
    for (name, _, events), view in zip(sent, views, strict=True):
        assert view["state"] in ("projected", "partially_projected", "quarantined"), name
        for event, item in zip(events, view["items"], strict=True):
            expected = project_event(event)
            outcomes[item["outcome"]] += 1
            if isinstance(expected, Quarantined):
                assert item["outcome"] == "quarantined", (name, item)
                assert item["reason"] == expected.reason
                assert REASON.match(item["reason"]), (name, item["reason"])
                assert MISSING.match(item["reason"]) or "runId" in item["reason"], item
            else:
                assert item["outcome"] == "projected", (name, item)
                assert item["warnings"] == list(expected.warnings), name
    # The figures of the pure conformance run (tests/projector/test_pipeline_corpus.py).
    assert outcomes == {"projected": 821, "quarantined": 57}
