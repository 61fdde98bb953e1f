"""An item read from its members (projector/members.py) projects exactly as the item parsed
whole: the same identity, facts and reasons, for any JSON the receiver accepts."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from embrasure.model import Quarantined
from embrasure.projector import members
from embrasure.projector.canonical import event_id
from embrasure.projector.pipeline import project_event, project_raw

from event_strategies import dataset_event, job_event, run_event

# Keys and values of any code point the receiver takes (no lone surrogates: not UTF-8).
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_member_keys = st.sampled_from(
    ["eventType", "eventTime", "run", "job", "inputs", "outputs", "dataset", "producer", "x"]
)


def _spellings(event: dict[str, Any]) -> list[bytes]:
    """The same event as a producer may send it: compact, indented, keys reordered."""
    reordered = dict(reversed(list(event.items())))
    return [
        _dumps(event),
        _dumps(event, indent=2),
        b"  \n" + _dumps(reordered) + b"\n",
    ]


def _dumps(value: Any, indent: int | None = None) -> bytes:
    # The standard library's: it writes integers beyond 64 bits, as a producer may.
    return json.dumps(value, ensure_ascii=False, indent=indent).encode()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_member_keys | _text, _json, max_size=6))
def test_the_identity_from_members_is_the_canonical_json_of_the_whole(
    event: dict[str, Any],
) -> None:
    for raw in _spellings(event):
        parsed = orjson.loads(raw)  # as the receiver's parser reads it (big ints: floats)
        found = members.read(raw)
        if found is None:  # own facets: read whole
            continue
        assert found.identity() == event_id(parsed)


@settings(max_examples=200, deadline=None)
@given(st.one_of(run_event(), job_event(), dataset_event()))
def test_an_event_read_from_its_members_projects_as_when_parsed_whole(event: Any) -> None:
    for raw in _spellings(event):
        assert project_raw(raw) == project_event(orjson.loads(raw))
        assert project_raw(raw) == project_raw(raw)  # again, from the memo


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_member_keys, _json, max_size=6) | _json)
def test_any_item_gets_the_same_outcome_either_way(item: Any) -> None:
    raw = _dumps(item)
    assert project_raw(raw) == project_event(orjson.loads(raw))


def test_own_facets_spelled_with_escapes_are_still_the_runs_own() -> None:
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-30T09:00:00Z",
        "run": {"runId": "0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f8091"},
        "job": {"namespace": "n", "name": "j"},
        "inputs": [
            {
                "namespace": "s3://b",
                "name": "in",
                "inputFacets": {"dataQualityMetrics": {"rowCount": 1, "columnMetrics": {}}},
            }
        ],
    }
    raw = orjson.dumps(event).replace(b'"inputFacets"', b'"inputFacet\\u0073"')
    assert orjson.loads(raw) == event
    assert members.read(raw) is None  # read whole, as own facets are
    facts = project_raw(raw)
    assert facts == project_event(event)
    assert not isinstance(facts, Quarantined)
    assert facts.datasets[0].role_facets
