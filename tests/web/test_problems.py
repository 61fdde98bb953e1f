"""Every error a route raises, rendered as RFC 9457 problem+json: the exact documents,
statuses and headers (docs/receiver.md, docs/queries.md). A store that cannot answer
gives 503 with the configured Retry-After, a log that cannot commit the 503
log-unavailable problem, a refused replay its 404 or 409, an unknown path or method its
404 or 405."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure import errors, projector
from embrasure.app import build_app
from embrasure.errors import PROBLEM_BASE, ReplayError, StoreUnavailable
from embrasure.settings import Settings
from embrasure.store import open_store
from embrasure.web.responses import replay_refused

from conftest import MINIMAL_EVENT
from graph_api import Api, at, daily_run, ds, run_event, run_id

JSON = {"Content-Type": "application/json"}
RETRY_AFTER = 7  # not the default (1), so that a test sees whose Retry-After is sent


@pytest.fixture
def api(db_url: str) -> Iterator[Api]:
    store = open_store(db_url)
    app = build_app(Settings(db=db_url, retry_after=RETRY_AFTER), store)
    # A 500 is answered, not raised into the test (the test checks the answer).
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Api(client)
    store.close()


def problem(response: Any, status: int, slug: str, title: str, detail: str) -> dict[str, str]:
    """Assert the response is exactly this problem document; its headers, for more checks."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == {
        "type": PROBLEM_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    return dict(response.headers)


def fail(*args: Any, **kwargs: Any) -> Any:
    raise StoreUnavailable("the disk is on fire")


async def fail_async(*args: Any, **kwargs: Any) -> Any:
    raise StoreUnavailable("the disk is on fire")


def replay(api: Api, delivery_id: str, index: int | str) -> Any:
    return api.client.post(f"/api/v1/quarantine/{delivery_id}/{index}/replay")


# -- a Problem raised by a route -----------------------------------------------------------


def test_a_bad_parameter_is_its_problem_without_retry_after(api: Api) -> None:
    headers = problem(
        api.client.get("/api/v1/deliveries", params={"limit": "0"}),
        400,
        "bad-parameter",
        "Bad query parameter",
        "limit must be between 1 and 1000; got 0",
    )
    assert "retry-after" not in headers


def test_a_namespace_may_be_empty_a_name_may_not_and_both_must_be_there(api: Api) -> None:
    # A dataset sent with namespace "" (openlineage-flink's default-catalog tables) is
    # stored, so its lineage is asked for with namespace= (web/params.py MAY_BE_EMPTY).
    api.ingest(run_event("COMPLETE", "flink", run_id(1), at(9), outputs=[ds("", "catalog.t")]))
    walk = api.get("/api/v1/lineage", namespace="", name="catalog.t", depth="1")
    assert walk["root"] == "dataset::catalog.t" and len(walk["edges"]) == 1
    for params, missing in (
        ({"name": "catalog.t"}, "namespace"),
        ({"namespace": "", "name": ""}, "name"),
        ({"namespace": ""}, "name"),
    ):
        problem(
            api.client.get("/api/v1/lineage", params=params),
            400,
            "bad-parameter",
            "Bad query parameter",
            f"missing query parameter(s): {missing}",
        )


def test_a_parameter_a_read_does_not_take_is_400_naming_the_closest(api: Api) -> None:
    where = {"namespace": "s3://x", "name": "t"}
    problem(
        api.client.get("/api/v1/lineage", params={**where, "asof": "2026-01-01T00:00:00Z"}),
        400,
        "bad-parameter",
        "Bad query parameter",
        "unknown query parameter(s): asof (did you mean asOf?); this route takes: asOf,"
        " depth, direction, limit, name, namespace, states, type",
    )
    problem(
        api.client.get("/api/v1/namespaces", params={"cursr": "", "zzz": "1"}),
        400,
        "bad-parameter",
        "Bad query parameter",
        "unknown query parameter(s): cursr (did you mean cursor?), zzz; this route takes:"
        " cursor, limit",
    )
    # Ingest keeps a producer's event whatever its client appends to the URL.
    ingest = api.client.post("/api/v1/lineage?client=x", json=MINIMAL_EVENT)
    assert ingest.status_code == 202, ingest.text


def test_an_unknown_delivery_is_404(api: Api) -> None:
    problem(
        api.client.get("/api/v1/deliveries/nope"),
        404,
        "not-found",
        "No such delivery",
        "No delivery 'nope' is stored.",
    )


def test_an_unknown_path_and_an_unknown_method(api: Api) -> None:
    problem(
        api.client.get("/api/v1/nothing-here"),
        404,
        "http-404",
        "Not Found",
        "GET /api/v1/nothing-here: Not Found",
    )
    headers = problem(
        api.client.delete("/api/v1/lineage"),
        405,
        "http-405",
        "Method Not Allowed",
        "DELETE /api/v1/lineage: Method Not Allowed",
    )
    assert headers["allow"] == "GET, HEAD, POST"


def test_an_unexpected_error_is_a_logged_500(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(api.store, "reader", broken)
    problem(
        api.client.get("/api/v1/deliveries"),
        500,
        "internal-error",
        "Internal server error",
        "The server failed on this request; it has been logged.",
    )


# -- the store cannot answer: 503 with the configured Retry-After ------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/deliveries"),
        ("GET", "/api/v1/lineage?namespace=a&name=b"),
        ("GET", "/api/v1/admin/hidden"),
        ("GET", "/api/v1/export"),
        ("GET", "/metrics"),  # a 500 before every route's errors had one handler
        ("POST", "/api/v1/quarantine/01JNOSUCHDELIVERY000000000/0/replay"),
    ],
)
def test_a_store_that_cannot_be_read_is_503_store_unavailable(
    api: Api, monkeypatch: pytest.MonkeyPatch, method: str, path: str
) -> None:
    monkeypatch.setattr(api.store, "reader", fail)
    headers = problem(
        api.client.request(method, path),
        503,
        "store-unavailable",
        "Store unavailable",
        "the disk is on fire",
    )
    assert headers["retry-after"] == str(RETRY_AFTER)


def test_tokens_that_cannot_be_read_are_503_with_retry_after_1(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The guard re-reads the tokens table every auth.CACHE_SECONDS: it has always told
    # clients to retry in 1 s, whatever --retry-after says.
    monkeypatch.setattr(api.store, "tokens", fail)
    headers = problem(
        api.client.get("/api/v1/deliveries"),
        503,
        "store-unavailable",
        "Store unavailable",
        "the disk is on fire",
    )
    assert headers["retry-after"] == "1"


def test_a_store_that_does_not_answer_is_not_ready(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.store, "ping", fail)
    headers = problem(
        api.client.get("/readyz"), 503, "not-ready", "Not ready", "the disk is on fire"
    )
    assert headers["retry-after"] == str(RETRY_AFTER)


# -- the log cannot commit: 503 log-unavailable ------------------------------------------


def test_an_ingest_the_log_cannot_commit_is_503_log_unavailable(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.client.app.state.committer, "append", fail_async)  # type: ignore[attr-defined]
    for path, body in (
        ("/api/v1/lineage", MINIMAL_EVENT),
        ("/api/v1/lineage/batch", [MINIMAL_EVENT]),
    ):
        headers = problem(
            api.client.post(path, content=orjson.dumps(body), headers=JSON),
            503,
            "log-unavailable",
            "Delivery log unavailable",
            "The delivery was not stored and is not acknowledged: the disk is on fire. "
            "Retry later.",
        )
        assert headers["retry-after"] == str(RETRY_AFTER)


@pytest.mark.parametrize("action", ["hide", "unhide"])
def test_a_hide_the_log_cannot_commit_is_503_log_unavailable(
    api: Api, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    api.ingest(daily_run(1))
    monkeypatch.setattr(api.client.app.state.committer, "append", fail_async)  # type: ignore[attr-defined]
    body = {"type": "job", "namespace": "spark", "name": "daily"}
    headers = problem(
        api.client.post(f"/api/v1/admin/{action}", content=orjson.dumps(body)),
        503,
        "log-unavailable",
        "Delivery log unavailable",
        f"The {action} was not stored: the disk is on fire. Retry later.",
    )
    assert headers["retry-after"] == str(RETRY_AFTER)


def test_a_hide_whose_store_cannot_be_read_is_503_log_unavailable(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing was stored either way: the hide answers as a failed append does.
    monkeypatch.setattr(api.store, "reader", fail)
    body = {"type": "namespace", "namespace": "spark"}
    problem(
        api.client.post("/api/v1/admin/hide", content=orjson.dumps(body)),
        503,
        "log-unavailable",
        "Delivery log unavailable",
        "The hide was not stored: the disk is on fire. Retry later.",
    )


# -- replay refusals -----------------------------------------------------------------------


def test_replay_refusals_are_their_problems(api: Api) -> None:
    view = api.ingest(daily_run(1), ["not", "an", "event"])
    delivery = view["delivery_id"]
    problem(
        replay(api, "01JNOSUCHDELIVERY000000000", 0),
        404,
        "not-found",
        "No such delivery",
        "No delivery '01JNOSUCHDELIVERY000000000' is stored.",
    )
    problem(
        replay(api, delivery, 2),
        404,
        "not-found",
        "No such item",
        f"Delivery {delivery} has items 0 to 1.",
    )
    problem(
        replay(api, delivery, 0),
        409,
        "not-quarantined",
        "Item is not quarantined",
        f"Item 0 of delivery {delivery} is projected.",
    )
    problem(
        replay(api, delivery, 1),
        409,
        "not-replayable",
        "Item cannot be replayed",
        "The item was rejected at the transport boundary (a receiver bound): its bytes "
        "are kept for audit but are never projected.",
    )
    problem(
        replay(api, delivery, "one"),
        400,
        "bad-parameter",
        "Bad query parameter",
        "the item index is not a whole number",
    )


def test_an_item_not_yet_projected_is_not_quarantined(api: Api) -> None:
    receipt = api.post(daily_run(1))
    problem(
        replay(api, receipt["delivery_id"], 0),
        409,
        "not-quarantined",
        "Item is not quarantined",
        f"Item 0 of delivery {receipt['delivery_id']} is pending.",
    )


def test_an_admin_entry_is_not_replayed(api: Api) -> None:
    api.ingest(daily_run(1))
    r = api.client.post(
        "/api/v1/admin/hide",
        content=orjson.dumps({"type": "job", "namespace": "spark", "name": "daily"}),
    )
    assert r.status_code == 202, r.text
    problem(
        replay(api, r.json()["entries"][0]["delivery_id"], 0),
        409,
        "not-replayable",
        "Item cannot be replayed",
        "An administrative entry (hide or unhide) is not replayed: hide or unhide again instead.",
    )


def subclasses(kind: type[ReplayError]) -> list[type[ReplayError]]:
    return [c for s in kind.__subclasses__() for c in (s, *subclasses(s))]


def test_every_replay_error_has_its_problem() -> None:
    kinds = subclasses(ReplayError)
    assert kinds, "errors.py defines the replay's refusals"
    for kind in kinds:
        doc = replay_refused(kind("why")).body()
        assert doc["status"] in (404, 409) and doc["detail"] == "why", kind
    with pytest.raises(TypeError):
        replay_refused(ReplayError("no kind of refusal"))


def test_the_projector_raises_no_http_problem() -> None:
    # Domain errors only (errors.ReplayError …): the HTTP layer maps them to problems.
    names = {"Problem", "PROBLEM_BASE"}
    assert names <= set(vars(errors))
    for path in Path(projector.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not used & names, path


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (
            "/api/v1/subscriptions",
            {"target": "namespace", "namespace": "a", "url": "https://x.test/", "colour": 1},
            "unknown keys: colour",
        ),
        (
            "/api/v1/subscriptions",
            [],
            'the body is a JSON object: {"target": …, "namespace": …, "url": …}',
        ),
        (
            "/api/v1/admin/hide",
            {"type": "table", "namespace": "a", "name": "b"},
            "type must be one of dataset, job, namespace; got 'table'",
        ),
    ],
)
def test_a_bad_request_body_is_named_as_the_body(
    api: Api, path: str, body: Any, detail: str
) -> None:
    r = api.client.post(path, content=orjson.dumps(body), headers=JSON)
    problem(r, 400, "bad-body", "Bad request body", detail)
