"""Every receiver bound (docs/receiver.md#bounds), at the limit and one past it, and the receipt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.receiver.bounds import Limits

from conftest import ServerProcess
from http_client import HTTP

JSON = {"Content-Type": "application/json"}
MiB = 1024 * 1024
LIMITS = Limits()


def job_event(name: str = "job", **extra: Any) -> dict[str, Any]:
    return {"eventTime": "2026-11-30T00:00:00Z", "job": {"namespace": "ns", "name": name}, **extra}


def post(client: TestClient, body: Any, path: str = "/api/v1/lineage", **kw: Any) -> Any:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {**JSON, **kw.pop("headers", {})}
    return client.post(path, content=content, headers=headers, **kw)


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    doc: dict[str, Any] = response.json()
    assert doc["status"] == status
    assert doc["type"].endswith("/" + slug)
    assert doc["title"] and doc["detail"]
    if status in (400, 413, 409, 415):
        assert "retry-after" not in response.headers  # retrying cannot help
    return doc


def nested(depth: int) -> Any:
    """A value of exactly ``depth`` levels, alternating arrays and objects."""
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# -- the receipt ---------------------------------------------------------------------------


def test_single_event_receipt(client: TestClient) -> None:
    r = post(client, job_event())
    assert r.status_code == 202
    receipt = r.json()
    assert set(receipt) == {"delivery_id", "state", "duplicate", "item_count", "invalid_item_count"}
    assert receipt["state"] == "accepted"
    assert receipt["duplicate"] is False
    assert (receipt["item_count"], receipt["invalid_item_count"]) == (1, 0)


@pytest.mark.parametrize("path", ["/api/v1/lineage", "/api/v1/openlineage/lineage"])
def test_both_single_routes(client: TestClient, path: str) -> None:
    assert post(client, job_event(), path).status_code == 202


@pytest.mark.parametrize("path", ["/api/v1/lineage/batch", "/api/v1/openlineage/lineage/batch"])
@pytest.mark.parametrize("envelope", [False, True])
def test_batch_routes_and_shapes(client: TestClient, path: str, envelope: bool) -> None:
    events = [job_event(f"j{i}") for i in range(3)]
    r = post(client, {"events": events} if envelope else events, path)
    assert r.status_code == 202, r.text
    assert r.json()["item_count"] == 3


def test_delivery_ids_sort_by_arrival(client: TestClient) -> None:
    ids = [post(client, job_event(f"j{i}")).json()["delivery_id"] for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


def test_delivery_view(client: TestClient) -> None:
    batch = [job_event("a"), 7, job_event("b")]
    receipt = post(
        client, batch, "/api/v1/lineage/batch", params={"provider_key": "airflow-prod"}
    ).json()
    assert (receipt["item_count"], receipt["invalid_item_count"]) == (3, 1)
    view = client.get(f"/api/v1/deliveries/{receipt['delivery_id']}").json()
    assert view["provider_key"] == "airflow-prod"
    assert view["received_at"].endswith("Z")
    assert view["summary"] == {"received": 3, "projected": 0, "quarantined": 1, "pending": 2}
    outcomes = [(i["index"], i["outcome"]) for i in view["items"]]
    assert outcomes == [(0, "pending"), (1, "quarantined"), (2, "pending")]
    assert "not an object" in view["items"][1]["reason"]
    assert view["items"][1]["retriable"] is False


def test_unknown_delivery_is_404(client: TestClient) -> None:
    assert_problem(client.get("/api/v1/deliveries/nope"), 404, "not-found")


def test_unknown_route_is_problem_json(client: TestClient) -> None:
    assert_problem(client.get("/api/v1/nothing-here"), 404, "http-404")
    assert_problem(client.delete("/api/v1/lineage"), 405, "http-405")


# -- idempotency ---------------------------------------------------------------------------


def test_same_body_twice_is_a_duplicate(client: TestClient) -> None:
    first = post(client, job_event()).json()
    again = post(client, job_event()).json()
    assert again == {**first, "duplicate": True}


def test_same_key_same_body_is_a_duplicate(client: TestClient) -> None:
    first = post(client, job_event(), headers={"Idempotency-Key": "k1"}).json()
    again = post(client, job_event(), headers={"Idempotency-Key": "k1"}).json()
    assert again["duplicate"] is True and again["delivery_id"] == first["delivery_id"]


def test_same_key_other_body_is_409(client: TestClient) -> None:
    first = post(client, job_event("a"), headers={"Idempotency-Key": "k1"}).json()
    r = post(client, job_event("b"), headers={"Idempotency-Key": "k1"})
    doc = assert_problem(r, 409, "idempotency-key-reused")
    assert doc["delivery_id"] == first["delivery_id"]


def test_key_and_hash_identities_are_scoped_by_provider(client: TestClient) -> None:
    a = post(client, job_event(), params={"provider_key": "a"}).json()
    b = post(client, job_event(), params={"provider_key": "b"}).json()
    assert a["delivery_id"] != b["delivery_id"] and not b["duplicate"]
    ka = post(
        client, job_event("x"), headers={"Idempotency-Key": "k"}, params={"provider_key": "a"}
    ).json()
    kb = post(
        client, job_event("y"), headers={"Idempotency-Key": "k"}, params={"provider_key": "b"}
    ).json()
    assert ka["delivery_id"] != kb["delivery_id"]


def test_key_identity_differs_from_body_identity(client: TestClient) -> None:
    keyed = post(client, job_event(), headers={"Idempotency-Key": "k"}).json()
    plain = post(client, job_event()).json()
    assert plain["delivery_id"] != keyed["delivery_id"] and not plain["duplicate"]


def test_quarantined_delivery_is_deduplicated_too(client: TestClient) -> None:
    first = post(client, [1, 2], "/api/v1/lineage/batch").json()
    assert first["state"] == "quarantined"
    again = post(client, [1, 2], "/api/v1/lineage/batch").json()
    assert again == {**first, "duplicate": True}


# -- headers -------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_compressed_body_is_415(client: TestClient, encoding: str) -> None:
    r = post(client, job_event(), headers={"Content-Encoding": encoding})
    doc = assert_problem(r, 415, "unsupported-content-encoding")
    assert "compression" in doc["detail"]


@pytest.mark.parametrize("encoding", ["identity", "IDENTITY", " Identity\t", ""])
def test_identity_in_any_case_is_accepted(client: TestClient, encoding: str) -> None:
    # Content-codings are case-insensitive (RFC 9110 §8.4.1); the document's pattern agrees.
    r = post(client, job_event(), headers={"Content-Encoding": encoding})
    assert r.status_code == 202, r.text


@pytest.mark.parametrize("encoding", ["identity, gzip", "identity;q=1", "identity identity"])
def test_anything_else_as_content_encoding_is_415(client: TestClient, encoding: str) -> None:
    r = post(client, job_event(), headers={"Content-Encoding": encoding})
    assert_problem(r, 415, "unsupported-content-encoding")


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_non_json_content_type_is_415(client: TestClient, ctype: str) -> None:
    r = client.post(
        "/api/v1/lineage", content=orjson.dumps(job_event()), headers={"Content-Type": ctype}
    )
    assert_problem(r, 415, "unsupported-media-type")


def test_charset(client: TestClient) -> None:
    ok = post(client, job_event(), headers={"Content-Type": "application/json; charset=UTF-8"})
    assert ok.status_code == 202
    bad = post(
        client, job_event("x"), headers={"Content-Type": "application/json; charset=latin-1"}
    )
    assert_problem(bad, 415, "unsupported-charset")


@pytest.mark.parametrize(("length", "status"), [(1, 202), (600, 202), (601, 400)])
def test_idempotency_key_length(client: TestClient, length: int, status: int) -> None:
    r = post(client, job_event(), headers={"Idempotency-Key": "k" * length})
    assert r.status_code == status
    if status == 400:
        doc = assert_problem(r, 400, "idempotency-key-length")
        assert (doc["limit"], doc["actual"]) == (600, 601)


def test_empty_idempotency_key_is_400(client: TestClient) -> None:
    assert_problem(
        post(client, job_event(), headers={"Idempotency-Key": ""}), 400, "idempotency-key-length"
    )


@pytest.mark.parametrize(("length", "status"), [(0, 400), (1, 202), (500, 202), (501, 400)])
def test_provider_key_length(client: TestClient, length: int, status: int) -> None:
    r = post(client, job_event(), params={"provider_key": "p" * length})
    assert r.status_code == status
    if length == 501:
        doc = assert_problem(r, 400, "provider-key-length")
        assert (doc["limit"], doc["actual"]) == (500, 501)


# -- body size -----------------------------------------------------------------------------


def padded_event(total: int) -> bytes:
    """A valid single event of exactly ``total`` bytes, padded outside any facet."""
    head = orjson.dumps(job_event(producer=""))
    pad = total - len(head)
    body = orjson.dumps(job_event(producer="x" * pad))
    assert len(body) == total
    return body


def test_body_at_limit_is_accepted(client: TestClient) -> None:
    r = post(client, padded_event(8 * MiB))
    assert r.status_code == 202, r.text
    assert r.json()["state"] == "accepted"


def test_body_past_limit_is_413_from_content_length(client: TestClient) -> None:
    doc = assert_problem(post(client, padded_event(8 * MiB + 1)), 413, "body-too-large")
    assert (doc["limit"], doc["actual"]) == (8 * MiB, 8 * MiB + 1)
    assert "spark.logicalPlan" in doc["detail"]


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


@pytest.mark.slow
def test_chunked_body_past_limit_is_413_while_reading(server: ServerProcess) -> None:
    import httpx

    with httpx.Client(base_url=server.url, headers=JSON) as http:
        ok = http.post("/api/v1/lineage", content=_chunks(padded_event(8 * MiB)))
        assert ok.status_code == 202, ok.text
        r = http.post("/api/v1/lineage", content=_chunks(padded_event(8 * MiB + 1)))
        doc = assert_problem(r, 413, "body-too-large")
        assert doc["limit"] == 8 * MiB and doc["actual"] > 8 * MiB


# -- JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"   ", b"{", b'{"a":1,}', b"NaN", b"{'a': 1}"])
def test_not_json_is_400(client: TestClient, body: bytes) -> None:
    assert_problem(post(client, body), 400, "not-json")


def test_not_utf8_is_400(client: TestClient) -> None:
    doc = assert_problem(post(client, b'{"job": "\xff"}'), 400, "not-utf8")
    assert "offset 9" in doc["detail"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"job": 1, "job": 2}',
        b'{"job": {"namespace": "a", "name": "b", "name": "c"}}',
        b'{"run": {"facets": {"x": {"deep": [{"a": 1, "a": 1}]}}}}',
        b'{"a\\u003a": 1, "a:": 2}',  # the same key, once escaped
        b'{"\\u0061": 1, "a": 2}',
    ],
)
def test_duplicate_keys_anywhere_are_400(client: TestClient, body: bytes) -> None:
    assert_problem(post(client, body), 400, "json-duplicate-key")


def test_duplicate_keys_in_a_batch_child_are_400(client: TestClient) -> None:
    body = b'[{"job": {"namespace": "a", "name": "b"}}, {"x": {"k": 1, "k": 2}}]'
    assert_problem(post(client, body, "/api/v1/lineage/batch"), 400, "json-duplicate-key")


def test_escaped_colons_without_duplicates_are_fine(client: TestClient) -> None:
    body = b'{"job": {"namespace": "a\\u003ab", "name": "c:d"}, "x\\u003A": 1, "x": 2}'
    assert post(client, body).status_code == 202


@pytest.mark.parametrize("shape", ["single", "envelope", "array"])
def test_depth_at_limit_and_past_it(client: TestClient, shape: str) -> None:
    # The event sits at depth 1 (single route), 3 ({"events": [event]}) or 2 ([event]);
    # its "x" member adds one more level, then ``nested`` fills the rest up to the limit.
    base = {"single": 2, "envelope": 4, "array": 3}[shape]
    path = "/api/v1/lineage" if shape == "single" else "/api/v1/lineage/batch"

    def body(depth: int) -> Any:
        event = job_event(x=nested(depth - base + 1))
        return {"single": event, "envelope": {"events": [event]}, "array": [event]}[shape]

    assert post(client, body(64), path).status_code == 202
    doc = assert_problem(post(client, body(65), path), 400, "json-too-deep")
    assert (doc["limit"], doc["actual"]) == (64, 65)


@pytest.mark.parametrize("path", ["/api/v1/lineage", "/api/v1/lineage/batch"])
@pytest.mark.parametrize("levels", [100, 2_000, 100_000])
def test_extremely_deep_body_is_400(client: TestClient, path: str, levels: int) -> None:
    body = b"[" * levels + b"]" * levels
    doc = assert_problem(post(client, body, path), 400, "json-too-deep")
    assert doc["limit"] == 64 and doc["actual"] > 64


# -- shape -----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"[]", b"1", b'"x"', b"null"])
def test_single_route_needs_an_object(client: TestClient, body: bytes) -> None:
    assert_problem(post(client, body), 400, "not-an-event")


@pytest.mark.parametrize("body", [b"{}", b'{"events": {}}', b'"x"', b"3"])
def test_batch_route_needs_an_array(client: TestClient, body: bytes) -> None:
    assert_problem(post(client, body, "/api/v1/lineage/batch"), 400, "not-a-batch")


@pytest.mark.parametrize(("count", "status"), [(0, 400), (1, 202), (1000, 202), (1001, 400)])
def test_batch_size(client: TestClient, count: int, status: int) -> None:
    r = post(client, [job_event(f"j{i}") for i in range(count)], "/api/v1/lineage/batch")
    assert r.status_code == status, r.text
    if status == 400:
        doc = assert_problem(r, 400, "batch-size")
        assert (doc["limit"], doc["actual"]) == (1000, count)
    else:
        assert r.json()["item_count"] == count


# -- per-event bounds: the item is rejected, the rest goes on -------------------------------


def datasets_event(count: int) -> dict[str, Any]:
    half = count // 2
    inputs = [{"namespace": "s3://b", "name": f"in{i}"} for i in range(half)]
    outputs = [{"namespace": "s3://b", "name": f"out{i}"} for i in range(count - half)]
    return {
        **job_event(),
        "run": {"runId": "0190a2d4-0000-7000-8000-000000000001"},
        "inputs": inputs,
        "outputs": outputs,
    }


def values_event(values: int) -> dict[str, Any]:
    # event, job, namespace, name, eventTime, x: 6 values, then the list's elements
    return job_event(x=[0] * (values - 6))


def facets_event(facet_bytes: int) -> bytes:
    """An event whose facet objects take exactly ``facet_bytes`` bytes as sent, pretty
    printed so that the whitespace the bound does not count is there too."""

    def make(pad: int) -> dict[str, Any]:
        return {
            **job_event(),
            "run": {
                "runId": "0190a2d4-0000-7000-8000-000000000002",
                "facets": {"f": {"_producer": "p", "s": "x" * pad}},
            },
            "inputs": [
                {
                    "namespace": "s3://b",
                    "name": "i",
                    "facets": {"schema": {"fields": []}},
                    "inputFacets": {},
                }
            ],
        }

    def size(event: dict[str, Any]) -> int:
        facet_objects = [
            event["run"]["facets"],
            event["inputs"][0]["facets"],
            event["inputs"][0]["inputFacets"],
        ]
        return sum(len(orjson.dumps(f)) for f in facet_objects)

    pad = facet_bytes - size(make(0))
    event = make(pad)
    assert size(event) == facet_bytes
    return json.dumps(event, indent=2).encode()


@pytest.mark.parametrize(
    ("make", "limit", "words"),
    [
        (datasets_event, LIMITS.datasets_per_event, "inputs and outputs"),
        (values_event, LIMITS.values_per_event, "JSON values"),
        (facets_event, LIMITS.facet_bytes_per_event, "bytes of facets"),
    ],
)
def test_per_event_bound(client: TestClient, make: Any, limit: int, words: str) -> None:
    at, past = make(limit), make(limit + 1)
    assert post(client, at).json()["state"] == "accepted"

    single = post(client, past).json()
    assert (single["state"], single["invalid_item_count"]) == ("quarantined", 1)
    view = client.get(f"/api/v1/deliveries/{single['delivery_id']}").json()
    assert words in view["items"][0]["reason"]

    as_bytes = [x if isinstance(x, bytes) else orjson.dumps(x) for x in (at, past)]
    batch = b"[" + b",".join([as_bytes[0], as_bytes[1], orjson.dumps(job_event("z"))]) + b"]"
    receipt = post(client, batch, "/api/v1/lineage/batch").json()
    assert receipt["state"] == "accepted"
    assert (receipt["item_count"], receipt["invalid_item_count"]) == (3, 1)
    view = client.get(f"/api/v1/deliveries/{receipt['delivery_id']}").json()
    assert [i["outcome"] for i in view["items"]] == ["pending", "quarantined", "pending"]


def test_oversized_facets_name_the_spark_plan(client: TestClient) -> None:
    receipt = post(client, facets_event(LIMITS.facet_bytes_per_event + 1)).json()
    view = client.get(f"/api/v1/deliveries/{receipt['delivery_id']}").json()
    assert "spark.logicalPlan" in view["items"][0]["reason"]


def test_every_item_rejected_means_quarantined(client: TestClient) -> None:
    r = post(client, [1, "x", None], "/api/v1/lineage/batch").json()
    assert (r["state"], r["item_count"], r["invalid_item_count"]) == ("quarantined", 3, 3)


# -- concurrency over real HTTP -------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_identical_deliveries_store_one(server: ServerProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = orjson.dumps(job_event("raced"))

    def send(_: int) -> dict[str, Any]:
        r = HTTP.post(server.url + "/api/v1/lineage", content=body, headers=JSON, timeout=30)
        assert r.status_code == 202, r.text
        return r.json()  # type: ignore[no-any-return]

    with ThreadPoolExecutor(32) as pool:
        receipts = list(pool.map(send, range(64)))
    assert len({r["delivery_id"] for r in receipts}) == 1
    assert sum(not r["duplicate"] for r in receipts) == 1


@pytest.mark.slow
def test_concurrent_distinct_deliveries_all_stored(server: ServerProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def send(i: int) -> str:
        r = HTTP.post(
            server.url + "/api/v1/lineage",
            content=orjson.dumps(job_event(f"j{i}")),
            headers=JSON,
            timeout=30,
        )
        assert r.status_code == 202 and not r.json()["duplicate"], r.text
        return r.json()["delivery_id"]  # type: ignore[no-any-return]

    with ThreadPoolExecutor(32) as pool:
        ids = list(pool.map(send, range(200)))
    assert len(set(ids)) == 200
    for delivery_id in ids[::20]:
        assert HTTP.get(f"{server.url}/api/v1/deliveries/{delivery_id}").status_code == 200
