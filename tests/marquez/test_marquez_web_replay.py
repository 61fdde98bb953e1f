"""The requests marquez-web 0.50.0 made when driven in chromium against the Marquez port
(bench/peers/marquez_web.py, recorded in tests/data/marquez_web_requests.json), replayed
against the Marquez port on both backends, over the same events
(tests/marquez_web_platform.py): each answers with the status recorded, in the shape
marquez-web reads (tests/marquez_ui_types.py), and with every key the recorded answer
had, of the same JSON type (docs/marquez.md#clients)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from starlette.testclient import TestClient

from graph_api import Api
from marquez_ui_types import shape_of
from marquez_web_platform import events

RECORDING = Path(__file__).resolve().parents[1] / "data" / "marquez_web_requests.json"
CALLS: list[dict[str, Any]] = json.loads(RECORDING.read_text()) if RECORDING.exists() else []
# Answers that change with the clock (stats are relative to now): their shape is checked,
# their content is not compared with the recording's.
NOW_RELATIVE = ("/api/v1/stats/",)


def same_keys(recorded: Any, ours: Any, where: str = "$") -> list[str]:
    """Where ``ours`` lacks a key ``recorded`` has, or has another JSON type there
    (recursively; list items by their ``id``, else the first by the first). A key
    recorded as null may be absent: JSON readers see the same (Marquez writes every
    field of its model, null or not, where Embrasure serves events as sent)."""
    if recorded is None:
        return []
    if type(recorded) is not type(ours) and not (
        isinstance(recorded, int | float) and isinstance(ours, int | float)
    ):
        return [f"{where}: {type(recorded).__name__} recorded, {type(ours).__name__} now"]
    if isinstance(recorded, dict):
        missing = [
            f"{where}.{k}: missing" for k in recorded if k not in ours and recorded[k] is not None
        ]
        return missing + [
            problem
            for k in recorded
            if k in ours
            for problem in same_keys(recorded[k], ours[k], f"{where}.{k}")
        ]
    if isinstance(recorded, list) and recorded and ours:
        # Items with ids (lineage nodes, jobs, datasets) each against ours of that id,
        # else the first against the first.
        mine = {_id(item): item for item in ours}
        pairs = [(r, mine.get(_id(r))) for r in recorded if _id(r) is not None]
        pairs = [(r, o) for r, o in pairs if o is not None] or [(recorded[0], ours[0])]
        return [p for r, o in pairs for p in same_keys(r, o, f"{where}[{_id(r) or 0}]")]
    return []


def _id(item: Any) -> str | None:
    return json.dumps(item["id"]) if isinstance(item, dict) and "id" in item else None


@pytest.mark.skipif(not CALLS, reason=f"{RECORDING} is absent")
def test_marquez_web_requests_replayed(api: Api, marquez: TestClient) -> None:
    api.ingest(*events())
    replayed = 0
    for call in CALLS:
        if call["method"] != "GET":
            continue  # writes (a tag) are replayed by test_marquez_writes, with a projector
        answer = marquez.get(call["path"], params=call["query"])
        assert answer.status_code == call["status"], (call["path"], answer.text[:500])
        if answer.status_code != 200:
            continue
        body = answer.json()
        schema = shape_of(call["path"])
        assert schema is not None, f"no shape for {call['path']}"
        errors = [e.message for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(body)]
        assert not errors, (call["path"], errors[:5])
        if not call["path"].startswith(NOW_RELATIVE):
            assert not same_keys(call["response"], body), call["path"]
        replayed += 1
    assert replayed >= 10


MARQUEZ_RECORDING = RECORDING.with_name("marquez_web_requests_marquez.json")
# Where the Marquez port answers otherwise than Marquez did, on purpose
# (docs/marquez.md#what-differs).
DIFFERS = {
    # A run's job facets: Marquez answered an empty body for a dbt run whose events sent
    # no job facets; the port answers {runId, facets} as for any other run.
    "/api/v1/jobs/runs/01943c00-0000-7000-8000-0000000000f1/facets": "$: str recorded, dict now",
}


def test_marquez_own_answers_keys_are_served(api: Api, marquez: TestClient) -> None:
    """The GETs marquez-web made of Marquez 0.50.0 itself, over the same events
    (tests/data/marquez_web_requests_marquez.json, bench/peers/marquez_web.py marquez):
    the port answers each with the status Marquez did, in the shape marquez-web reads,
    with every key Marquez's answer had, of the same JSON type."""
    calls = json.loads(MARQUEZ_RECORDING.read_text())
    api.ingest(*events())
    compared = 0
    for call in calls:
        if call["method"] != "GET":
            continue
        answer = marquez.get(call["path"], params=call["query"])
        assert answer.status_code == call["status"], (call["path"], answer.text[:500])
        body = answer.json()
        schema = shape_of(call["path"])
        assert schema is not None, f"no shape for {call['path']}"
        errors = [e.message for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(body)]
        assert not errors, (call["path"], errors[:5])
        found = same_keys(call["response"], body)
        assert found == ([DIFFERS[call["path"]]] if call["path"] in DIFFERS else []), call
        compared += 1
    assert compared == 43  # 40, and the symlinked path's lineage, drawer and column graph
