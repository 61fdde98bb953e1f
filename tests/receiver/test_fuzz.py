"""Fuzzing the receiver and the projector with hypothesis (issue 7): arbitrary JSON text
(deep, wide, duplicate keys, odd unicode, lone surrogates, huge numbers, not JSON at all)
and near-valid OpenLineage events. Whatever comes in: no 5xx, and once projected every
stored item is projected or quarantined with a reason — never left behind, never a
projector error (the retry path's "projector error: …" means a bug was hit)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from embrasure.projector.worker import Projector

from conftest import make_client

ANSWERS = {202, 400, 409, 413, 415}

# -- arbitrary JSON text ------------------------------------------------------------------

odd_strings = st.one_of(
    st.text(),  # any unicode, astral planes and controls included
    st.sampled_from(["\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0000", "\\\\", '\\"']).map(
        lambda esc: esc  # written raw into the JSON text below: lone surrogates, NUL…
    ),
)
numbers = st.one_of(
    st.integers(-(10**40), 10**40).map(str),
    st.sampled_from(["1e400", "-1e400", "1e-400", "0.1e1", "-0", "123456789012345678901234567890"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)


def _string(raw: str) -> str:
    # A raw escape sequence stays as written (a lone surrogate, say); text is encoded.
    return f'"{raw}"' if raw.startswith("\\") else json.dumps(raw, ensure_ascii=False)


scalars = st.one_of(st.sampled_from(["null", "true", "false"]), numbers, odd_strings.map(_string))


def _containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    keys = st.one_of(st.sampled_from(['"a"', '"a"', '"\\u0061"', '"run"', '"job"']), scalars)
    arrays = st.lists(children, max_size=6).map(lambda xs: "[" + ",".join(xs) + "]")
    members = st.lists(st.tuples(keys, children), max_size=6)
    objects = members.map(lambda ms: "{" + ",".join(f"{k}:{v}" for k, v in ms) + "}")
    return st.one_of(arrays, objects)


json_text = st.recursive(scalars, _containers, max_leaves=60)
deep = st.integers(1, 200).map(lambda n: "[" * n + "]" * n)
bodies = st.one_of(
    json_text.map(str.encode),
    deep.map(str.encode),
    st.binary(max_size=200),  # not JSON, maybe not UTF-8
    json_text.map(lambda t: ("\ufeff" + t).encode()),  # a byte-order mark
)

# -- near-valid events --------------------------------------------------------------------

VALID: dict[str, Any] = {
    "eventType": "COMPLETE",
    "eventTime": "2026-11-30T09:00:00Z",
    "producer": "https://example.com/fuzz",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {
        "runId": "0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f8091",
        "facets": {
            "parent": {
                "_producer": "https://example.com/fuzz",
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
                "run": {"runId": "0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f8092"},
                "job": {"namespace": "airflow", "name": "dag"},
            }
        },
    },
    "job": {"namespace": "airflow", "name": "dag.task"},
    "inputs": [
        {
            "namespace": "s3://bucket",
            "name": "raw/orders",
            "facets": {
                "schema": {
                    "_producer": "https://example.com/fuzz",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json",
                    "fields": [{"name": "id", "type": "bigint"}],
                },
                "symlinks": {
                    "_producer": "https://example.com/fuzz",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
                    "identifiers": [
                        {"namespace": "hive://m", "name": "raw.orders", "type": "TABLE"}
                    ],
                },
            },
        }
    ],
    "outputs": [
        {
            "namespace": "s3://bucket",
            "name": "clean/orders",
            "facets": {
                "columnLineage": {
                    "_producer": "https://example.com/fuzz",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
                    "fields": {
                        "id": {
                            "inputFields": [
                                {
                                    "namespace": "s3://bucket",
                                    "name": "raw/orders",
                                    "field": "id",
                                    "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                                }
                            ]
                        }
                    },
                }
            },
        }
    ],
}

weird_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "not-a-uuid", "2026-13-45T99:99:99Z", "START", "OTHER", "s3://"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(VALID) if p]


@st.composite
def near_valid(draw: st.DrawFn) -> Any:
    """VALID with a few values replaced, removed or duplicated into odd places."""
    event = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = event
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = draw(st.sampled_from(["replace", "delete"]))
            if action == "delete" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(weird_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced the way there
    return event


# -- the properties ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    # One database for every example: fuzzing is about what a long-lived server survives.
    db: Path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    with make_client(db) as c:
        yield c
    c.app.state.store.close()  # type: ignore[attr-defined]


def post(client: TestClient, path: str, body: bytes) -> int:
    r = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code in ANSWERS, (r.status_code, r.text, body[:200])
    if r.status_code != 202:
        assert r.headers["content-type"] == "application/problem+json"
    return r.status_code


def project_and_check(client: TestClient) -> None:
    store = client.app.state.store  # type: ignore[attr-defined]
    Projector(store).run_until_caught_up()
    deliveries = client.get("/api/v1/deliveries", params={"limit": 1000}).json()["deliveries"]
    for d in deliveries:
        assert d["state"] != "accepted", d  # every delivery's items were dealt with
        view = client.get(f"/api/v1/deliveries/{d['delivery_id']}").json()
        for item in view.get("items", []):
            assert item["outcome"] in ("projected", "quarantined"), item
            if item["outcome"] == "quarantined":
                assert item["reason"], item
                assert not item["reason"].startswith("projector error"), item


FUZZ = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(body=bodies)
def test_arbitrary_bytes_never_get_a_5xx(client: TestClient, body: bytes) -> None:
    post(client, "/api/v1/lineage", body)
    post(client, "/api/v1/lineage/batch", body)
    post(client, "/api/v1/lineage/batch", b'{"events": [' + body + b"]}")


@FUZZ
@given(events=st.lists(near_valid(), min_size=1, max_size=5))
def test_near_valid_events_are_projected_or_quarantined(
    client: TestClient, events: list[Any]
) -> None:
    # The stdlib writes integers past 64 bits, which orjson refuses to.
    assert post(client, "/api/v1/lineage/batch", json.dumps(events).encode()) == 202
    project_and_check(client)


def test_every_fuzzed_delivery_was_dealt_with(client: TestClient) -> None:
    """After both properties: the arbitrary bodies that were stored are dealt with too."""
    project_and_check(client)
