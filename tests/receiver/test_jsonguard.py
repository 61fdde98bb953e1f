"""jsonguard against a slow, obviously-correct reference, on generated JSON text."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embrasure.receiver import jsonguard
from embrasure.receiver.jsonguard import JsonRejected


class Duplicate(Exception):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Duplicate
    return dict(pairs)


def reference(text: str) -> tuple[bool, int]:
    """(has a duplicate key, depth) the slow way: stdlib json with a pairs hook."""
    try:
        doc = json.loads(text, object_pairs_hook=_reject_duplicates)
    except Duplicate:
        return True, jsonguard.depth_of(json.loads(text))
    return False, jsonguard.depth_of(doc)


# Keys drawn from a tiny alphabet so that duplicates are common; each key may be written
# plainly or with \u escapes (the same key, other bytes), colons included.
KEY_CHARS = "a:b"


def _encode_key(key: str, escape: list[bool]) -> str:
    out = []
    for ch, esc in zip(key, escape, strict=True):
        out.append(f"\\u{ord(ch):04x}" if esc else ch)
    return '"' + "".join(out) + '"'


@st.composite
def keys(draw: st.DrawFn) -> str:
    key = draw(st.text(KEY_CHARS, max_size=3))
    escape = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return _encode_key(key, escape)


scalars = st.one_of(
    st.just("null"),
    st.just("true"),
    st.integers(-(10**6), 10**6).map(str),
    st.text(KEY_CHARS + "[]{},x", max_size=5).map(lambda s: json.dumps(s)),
)


def _container(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    space = st.sampled_from(["", " ", "\n  "])
    arrays = st.lists(children, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
    members = st.lists(st.tuples(keys(), space, children), max_size=4)
    objects = members.map(lambda ms: "{" + ",".join(f"{k}{s}:{s}{v}" for k, s, v in ms) + "}")
    return st.one_of(arrays, objects)


documents = st.recursive(scalars, _container, max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(documents, st.integers(1, 8))
def test_parse_strict_matches_the_reference(text: str, max_depth: int) -> None:
    duplicate, depth = reference(text)
    body = text.encode()
    if depth > max_depth:
        with pytest.raises(JsonRejected) as info:
            jsonguard.parse_strict(body, max_depth)
        assert info.value.slug in ("json-too-deep", "json-duplicate-key")
    elif duplicate:
        with pytest.raises(JsonRejected) as info:
            jsonguard.parse_strict(body, max_depth)
        assert info.value.slug == "json-duplicate-key"
    else:
        assert jsonguard.parse_strict(body, max_depth) == json.loads(text)


@settings(max_examples=200, deadline=None)
@given(documents)
def test_count_values_matches_a_recursive_count(text: str) -> None:
    def count(node: Any) -> int:
        if isinstance(node, dict):
            return 1 + sum(count(v) for v in node.values())
        if isinstance(node, list):
            return 1 + sum(count(v) for v in node)
        return 1

    doc = json.loads(text)
    assert jsonguard.count_values(doc, 10**9) == count(doc)
    # A value takes at least one byte: the cheap pre-check in receiver/bounds.py relies on it.
    assert count(doc) <= len(text.encode())


@settings(max_examples=200, deadline=None)
@given(st.lists(documents, min_size=1, max_size=5), st.booleans())
def test_split_items_returns_each_items_bytes(items: list[str], envelope: bool) -> None:
    array = "[ " + " ,\n".join(items) + " ]"
    body = ('{"events": ' + array + "}" if envelope else array).encode()
    raws = jsonguard.split_items(body)
    assert [r.decode() for r in raws] == items


def test_facet_bytes_counts_facets_without_whitespace() -> None:
    event: Any = {
        "run": {"facets": {"a": {"x": "s p a c e s"}}, "inputFacets": {"ignored": 1}},
        "job": {"facets": {}},
        "inputs": [{"facets": {"b": 1}, "inputFacets": {"c": [1, 2]}, "outputFacets": {}}],
        "outputs": [{"facets": {"d": "\\u00e9"}, "outputFacets": {"e": None}}],
        "dataset": {"facets": {"f": True}},
    }
    pretty = json.dumps(event, indent=4).encode()
    expected = sum(
        len(orjson.dumps(o))
        for o in (
            event["run"]["facets"],
            event["job"]["facets"],
            event["inputs"][0]["facets"],
            event["inputs"][0]["inputFacets"],
            event["outputs"][0]["facets"],
            event["outputs"][0]["outputFacets"],
            event["dataset"]["facets"],
        )
    )
    assert jsonguard.facet_bytes(pretty) == expected


def test_facet_bytes_counts_escapes_as_sent() -> None:
    # "\u00e9" is six bytes in the request and two once decoded: the bound counts bytes sent
    assert jsonguard.facet_bytes(b'{"run": {"facets": {"a": "\\u00e9"}}}') == len(
        b'{"a":"\\u00e9"}'
    )


def test_facet_bytes_ignores_misplaced_or_odd_shapes() -> None:
    assert jsonguard.facet_bytes(b'{"run": 3, "inputs": {"facets": {}}, "job": []}') == 0
    assert jsonguard.facet_bytes(b"[1, 2]") == 0


@pytest.mark.parametrize("probed", [True, False])
def test_depth_check_with_and_without_the_orjson_limit(
    probed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fast check wraps documents in lists up to orjson's own serialisation limit;
    # without that limit (probe found none) the walk decides. Both must agree.
    assert jsonguard._ORJSON_DEPTH_LIMIT is not None  # the fast path is the one in use
    if not probed:
        monkeypatch.setattr(jsonguard, "_ORJSON_DEPTH_LIMIT", None)
    for depth in (1, 63, 64):
        jsonguard.parse_strict(b"[" * depth + b"]" * depth, 64)
    with pytest.raises(JsonRejected) as info:
        jsonguard.parse_strict(b'{"a":' * 65 + b"1" + b"}" * 65, 64)
    assert (info.value.limit, info.value.actual) == (64, 65)


@settings(max_examples=300, deadline=None)
@given(st.lists(documents, min_size=1, max_size=4), st.integers(2, 8))
def test_parse_array_agrees_with_parse_strict(items: list[str], max_depth: int) -> None:
    # Item by item or whole, the same documents are accepted and refused alike.
    body = ("[" + ", ".join(items) + "]").encode()
    try:
        expected: Any = jsonguard.parse_strict(body, max_depth)
    except JsonRejected as exc:
        expected = exc.slug
    try:
        parsed, spans = jsonguard.parse_array(body, max_depth)
        got: Any = parsed
        assert [s.decode() for s in spans] == items
    except JsonRejected as exc:
        got = exc.slug
    assert got == expected


@settings(max_examples=400, deadline=None)
@given(
    st.lists(documents, max_size=4),
    st.lists(st.tuples(keys(), documents), max_size=3),
    st.booleans(),
    st.integers(3, 8),
)
def test_iter_envelope_agrees_with_parse_strict(
    items: list[str], others: list[tuple[str, str]], events_first: bool, max_depth: int
) -> None:
    # An envelope read in one pass, its events item by item, accepts and refuses what
    # parsing it whole does, and finds the same events.
    members = [f"{k}: {v}" for k, v in others]
    events = '"events": [' + ", ".join(items) + "]"
    members.insert(0 if events_first else len(members), events)
    body = ("{" + ", ".join(members) + "}").encode()
    try:
        doc = jsonguard.parse_strict(body, max_depth)
        expected: Any = doc["events"] if isinstance(doc.get("events"), list) else "no events"
    except JsonRejected as exc:
        expected = exc.slug
    try:
        got: Any = [item for item, _raw in jsonguard.iter_envelope(body, max_depth)]
    except JsonRejected as exc:
        got = exc.slug
    except jsonguard.NotAnEnvelope:
        got = "no events"
    assert got == expected
