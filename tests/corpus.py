"""The OpenLineage corpus (../shared/openlineage/events) as events a test can send.

The corpus holds few raw captures: most files are templates (placeholders such as
``${json-unit.any-string}`` or ``{{ any(result) }}``) or partial "subset matchers" that
omit runId and eventTime. Both are turned into events here by filling the placeholders
with values of the right shape (a UUID for runIds, an RFC 3339 time for times, "x" for
strings, 1 for numbers) and, for partials, adding the run and runId they leave out.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from conftest import OPENLINEAGE

EVENTS = OPENLINEAGE / "events"
FILL_TIME = "2026-01-02T03:04:05.678Z"
# Placeholders of the corpus's template styles (events/README: json-unit, Jinja-like).
_PLACEHOLDER = re.compile(r"\$\{json-unit\.[^}]*\}\S*|\{\{.*?\}\}")
_WHOLE_TIME = re.compile(r"\{\{\s*(is_datetime\(result\)|RUN_\w*TIME\w*)\s*\}\}")
_TIME_KEYS = frozenset({"eventTime", "nominalStartTime", "nominalEndTime"})
# Rules a quarantine reason may name: the event kind, or the shape of the item.
REASON = re.compile(r"^(RunEvent|JobEvent|DatasetEvent): |^the event ")
MISSING = re.compile(r"^\w+: [\w.\[\]]+ is missing( \(.*\))?$")


def _manifest() -> list[dict[str, Any]]:
    if not EVENTS.is_dir():
        return []
    files: list[dict[str, Any]] = json.loads((EVENTS / "MANIFEST.json").read_text())["files"]
    return files


MANIFEST = _manifest()
EVENT_FILES = [f for f in MANIFEST if f["kind"] != "facet-fixture"]
FACET_FIXTURES = [f for f in MANIFEST if f["kind"] == "facet-fixture"]


def _fill_string(key: str | None, text: str, path: str) -> Any:
    if not _PLACEHOLDER.search(text):
        return text
    whole = _PLACEHOLDER.fullmatch(text) is not None
    if whole and "any-number" in text:
        return 1
    if whole and (key == "runId" or "is_uuid" in text):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, path))  # one UUID per place
    if whole and (key in _TIME_KEYS or _WHOLE_TIME.fullmatch(text)):
        return FILL_TIME
    return _PLACEHOLDER.sub("x", text)


def fill(value: Any, path: str, key: str | None = None) -> Any:
    """``value`` with every placeholder replaced by a plausible value of its shape;
    ``path`` (file and place in it) makes each filled UUID distinct and deterministic."""
    if isinstance(value, dict):
        return {k: fill(v, f"{path}/{k}", k) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, f"{path}/{i}", key) for i, v in enumerate(value)]
    if isinstance(value, str):
        return _fill_string(key, value, path)
    return value


def complete_partial(event: Any, where: str) -> Any:
    """A partial matcher (or a template written like one) made into an event: the run,
    runId and eventTime it omits. Nothing else is invented."""
    if not isinstance(event, dict):
        return event
    event = dict(event)
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, where))
    if "run" not in event and "eventType" in event:
        event["run"] = {"runId": run_id}
    elif isinstance(event.get("run"), dict) and "runId" not in event["run"]:
        event["run"] = {**event["run"], "runId": run_id}
    event.setdefault("eventTime", FILL_TIME)
    return event


def yaml_flow_to_json(text: str) -> str:
    """The dbt ``*_OL.yaml`` files are YAML flow syntax: JSON plus ``#`` comments and
    trailing commas. Drop both, outside strings (no YAML library is a dependency)."""
    out: list[str] = []
    in_string = escaped = in_comment = False
    for char in text:
        if in_comment:
            in_comment = char != "\n"
            if in_comment:
                continue
        elif in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char == "#":
            in_comment = True
            continue
        elif char in "]}":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
        out.append(char)
    return "".join(out)


def load(entry: dict[str, Any]) -> list[Any]:
    """The events of one corpus file, as the manifest's ``format`` says they are stored."""
    text = (OPENLINEAGE / entry["file"]).read_text(encoding="utf-8")
    if entry["format"].startswith("yaml-flow"):
        text = yaml_flow_to_json(text)
    elif entry["format"] not in ("object", "array"):
        pytest.skip(f"{entry['file']}: format {entry['format']!r} is not read by this test")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        pytest.skip(f"{entry['file']}: cannot be read as {entry['format']}: {exc}")
    events = doc if entry["format"] != "object" else [doc]
    assert len(events) == entry["events"], entry["file"]
    if entry["kind"] in ("template", "partial"):
        events = [fill(e, f"{entry['file']}#{i}") for i, e in enumerate(events)]
    if entry["kind"] in ("template", "partial"):
        events = [complete_partial(e, f"{entry['file']}#{i}") for i, e in enumerate(events)]
    return events
