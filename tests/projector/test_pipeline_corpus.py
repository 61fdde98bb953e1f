"""Conformance: every event of the OpenLineage corpus (../shared/openlineage/events) through
``project_event``.

The corpus holds few raw captures: most files are templates (placeholders such as
``${json-unit.any-string}`` or ``{{ any(result) }}``) or partial "subset matchers" that
omit runId and eventTime. Both are turned into events here by filling the placeholders
with values of the right shape (a UUID for runIds, an RFC 3339 time for times, "x" for
strings, 1 for numbers) and, for partials, adding the run and runId they leave out. Facet
fixtures are not events: each is checked against the facet schemas instead.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embrasure.model import EventFacts, Quarantined
from embrasure.projector.facet_schemas import STANDARD_FACETS, check_facets
from embrasure.projector.pipeline import project_event

from conftest import OPENLINEAGE, requires_shared
from corpus import EVENT_FILES, FACET_FIXTURES, MANIFEST, MISSING, REASON, load

pytestmark = requires_shared()


def _name(entry: dict[str, Any]) -> str:
    return str(entry["file"]).removeprefix("events/")


def _outcomes(entry: dict[str, Any]) -> Iterator[EventFacts | Quarantined]:
    for event in load(entry):
        yield project_event(event)


@pytest.mark.parametrize("entry", EVENT_FILES, ids=_name)
def test_corpus_event_projects(entry: dict[str, Any]) -> None:
    """Complete events (concrete, lenient-accept) are all projected. Templates and partial
    matchers are projected unless they leave out a required field that this test does not
    invent (job.namespace, job.name, a dataset's name…): then the reason says which.
    Every quarantine reason names its rule; none is a projector error."""
    for outcome in _outcomes(entry):
        if isinstance(outcome, EventFacts):
            assert len(outcome.event_id) == 64
            continue
        assert outcome.reason and REASON.match(outcome.reason), outcome.reason
        assert not outcome.retriable, outcome.reason
        if entry["kind"] in ("template", "partial"):
            assert MISSING.search(outcome.reason), (entry["file"], outcome.reason)
        else:
            assert entry["kind"] == "invalid-on-purpose", (entry["file"], outcome.reason)


INVALID_ON_PURPOSE = {
    # file → the facet that must be dropped (None: the event must be quarantined)
    "fluentd-proxy/events/event_no_run_id.json": None,
    "fluentd-proxy/events/event_invalid_run_facet.json": "run.facets.parent",
    "fluentd-proxy/events/event_invalid_job_facet.json": "job.facets.ownership",
    "fluentd-proxy/events/event_invalid_dataset_facet.json": "outputs[0].facets.ownership",
    "fluentd-proxy/events/event_invalid_input_dataset_facet.json": (
        "inputs[0].inputFacets.dataQualityMetrics"
    ),
    "fluentd-proxy/events/event_invalid_output_dataset_facet.json": (
        "outputs[0].outputFacets.outputStatistics"
    ),
}


@pytest.mark.parametrize("name", sorted(INVALID_ON_PURPOSE))
def test_invalid_on_purpose(name: str) -> None:
    (outcome,) = _outcomes({"file": f"events/{name}", "format": "object", "kind": "x", "events": 1})
    dropped = INVALID_ON_PURPOSE[name]
    if dropped is None:
        assert isinstance(outcome, Quarantined)
        assert outcome.reason == "RunEvent: run.runId is missing"
        return
    assert isinstance(outcome, EventFacts)
    assert any(w.startswith(f"{dropped} dropped: it breaks ") for w in outcome.warnings), (
        outcome.warnings
    )


def test_manifest_lists_every_invalid_fixture() -> None:
    listed = {_name(f) for f in MANIFEST if f["kind"] == "invalid-on-purpose"}
    assert listed == set(INVALID_ON_PURPOSE)


@pytest.mark.parametrize(
    "name",
    [
        "marquez/open_lineage/event_required_nanoseconds.json",
        "marquez/open_lineage/event_required_no_timezone.json",
        "python-client/serde_example_run_event.json",
    ],
)
def test_sub_second_digits_are_kept(name: str) -> None:
    """The source's fraction digits survive exactly in the shown time
    (docs/queries.md#the-graph-served)."""
    entry: dict[str, Any] = {
        "file": f"events/{name}",
        "format": "object",
        "kind": "concrete",
        "events": 1,
    }
    (outcome,) = _outcomes(entry)
    assert isinstance(outcome, EventFacts) and outcome.time is not None
    raw = json.loads((OPENLINEAGE / entry["file"]).read_text())["eventTime"]
    fraction = re.search(r"\.(\d+)", raw)
    assert fraction is not None
    assert outcome.time.text.endswith(f".{fraction[1]}Z")
    assert outcome.time.key.endswith(f".{fraction[1].ljust(9, '0')}Z")


@pytest.mark.parametrize("entry", FACET_FIXTURES, ids=_name)
def test_facet_fixture_passes_its_schema(entry: dict[str, Any]) -> None:
    """Each spec facet fixture is kept by the checker at a place its key is standard."""
    doc = json.loads((OPENLINEAGE / entry["file"]).read_text())
    (key,) = entry["facets"]
    facet = doc[key] if list(doc) == [key] else doc  # {"<key>": {...}} or a bare facet
    places = [loc for loc, schemas in STANDARD_FACETS.items() if key in schemas]
    assert places, f"{key} is not a standard facet anywhere"
    results = [check_facets(loc, {key: facet}, loc) for loc in places]
    assert any(kept == {key: facet} for kept, _ in results), [w for _, w in results]


def test_corpus_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Counts of outcomes over the whole corpus (printed for the record)."""
    counts: collections.Counter[str] = collections.Counter()
    warnings: collections.Counter[str] = collections.Counter()
    for entry in EVENT_FILES:
        for outcome in _outcomes(entry):
            if isinstance(outcome, Quarantined):
                counts[f"quarantined: {outcome.reason}"] += 1
            else:
                counts[f"projected {outcome.kind}"] += 1
                for warning in outcome.warnings:
                    warnings[re.sub(r"'[^']*'|\[\d+\]|\d+", "…", warning)[:110]] += 1
    with capsys.disabled():
        print(f"\ncorpus: {sum(counts.values())} events from {len(EVENT_FILES)} files")
        for line, count in sorted(counts.items()):
            print(f"  {count:4d}  {line}")
        print("warnings (by shape):")
        for line, count in warnings.most_common():
            print(f"  {count:4d}  {line}")
    assert counts["quarantined: RunEvent: run.runId is missing"] == 1
    assert sum(counts.values()) == sum(f["events"] for f in EVENT_FILES)


def test_corpus_is_present_when_expected() -> None:
    assert Path(OPENLINEAGE).is_dir() and MANIFEST
