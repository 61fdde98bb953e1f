"""Every route of both APIs — Embrasure's and the Marquez port's, read from the apps' own
route tables, so a route added is walked without a line here — tried as a hostile
client would (docs/security.md#threat-model), on each backend:

- with auth on and no credentials, every route but the public ones answers 401, and a
  token without the route's scope 403 (test_auth.py's table holds Embrasure's scopes;
  here the Marquez port's are checked to be some scope, never none);
- with an admin token (every scope), every query parameter either API reads, set to
  integers past every bound (2^63, 2^64, negative, exponent, not a number) and to a
  60 KB string, every path parameter as long as the URL allows, an unknown parameter, and bodies
  that are empty, not JSON, or the wrong JSON: never a 5xx; Embrasure refuses an
  unknown parameter of a read with its 400.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.routing import BaseRoute, Mount, Route
from starlette.testclient import TestClient

from embrasure.access.grants import SCOPES
from embrasure.app import build_app
from embrasure.model import Token
from embrasure.settings import Settings
from embrasure.store import open_store
from embrasure.web import auth
from embrasure.web.auth import required_scopes
from embrasure.web.openapi.document import document

from graph_api import Api, daily_run

# What either API reads from a query string: Embrasure's from its OpenAPI document
# (the one place that says what each route takes), Marquez's from its spec (0.50.0).
MARQUEZ_PARAMS = {
    "limit", "offset", "depth", "nodeId", "q", "filter", "sort", "namespace", "type",
    "lastRunStates", "before", "after", "sortDirection", "period", "timezone",
    "withDownstream", "includeFacets", "name",
}  # fmt: skip
HUGE = "9" * 60_000  # the HTTP client refuses a query of 64 KiB or more
BAD_INTEGERS = (
    str(2**63),
    str(2**64),
    str(2**63 - 1),
    "99999999999999999999999999999999999999",
    "-1",
    "-9223372036854775809",
    "1e3",
    "0x10",
    "NaN",
    "abc",
    "",
)
BODIES = (b"", b"[", b"null", b"{}", b'{"a": ' + b"[" * 5_000, orjson.dumps({"x": HUGE}))


def routes(app: Any) -> Iterator[tuple[str, str, Route]]:
    """(method, path template, route) of every route, mounts' files left out."""
    found: list[BaseRoute] = list(app.routes)
    for route in found:
        if isinstance(route, Mount):
            continue
        assert isinstance(route, Route), route
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            yield method, route.path, route


def filled(path: str, value: str = "x") -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def embrasure_params() -> dict[str, set[str]]:
    """Each documented path's query parameters (its operations'), by path."""
    names: dict[str, set[str]] = {}
    for path, item in document()["paths"].items():
        for operation in item.values():
            query = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "query"}
            names.setdefault(path, set()).update(query)
    return names


@pytest.fixture
def apps(db_url: str) -> Iterator[tuple[TestClient, TestClient, dict[str, str]]]:
    """Both apps on each backend with data in them, auth on: one token per scope."""
    store = open_store(db_url)
    tokens = {}
    for scope in SCOPES:
        token_id, text = auth.new_token()
        store.add_token(Token(token_id, auth.digest(text), frozenset([scope]), None, "", "t", None))
        tokens[scope] = text
    app = build_app(Settings(db=db_url), store)
    with (
        TestClient(app, raise_server_exceptions=False) as main,
        TestClient(app.state.marquez, raise_server_exceptions=False) as marquez,
    ):
        main.headers["Authorization"] = f"Bearer {tokens['admin']}"
        Api(main).ingest(daily_run(1), daily_run(2))
        del main.headers["Authorization"]
        yield main, marquez, tokens
    store.close()


def test_every_route_of_both_apis_needs_a_token_unless_public(
    apps: tuple[TestClient, TestClient, dict[str, str]],
) -> None:
    main, marquez, tokens = apps
    checked = 0
    for client in (main, marquez):
        for method, path, route in routes(client.app):
            scopes = required_scopes(route.endpoint)
            answer = client.request(method, filled(path))
            if not scopes:
                assert answer.status_code not in (401, 403), (method, path)
                continue
            assert answer.status_code == 401, (method, path, answer.status_code, answer.text)
            for scope, token in tokens.items():
                if scope in (*scopes, "admin"):
                    continue
                denied = client.request(
                    method, filled(path), headers={"Authorization": f"Bearer {token}"}
                )
                assert denied.status_code == 403, (method, path, scope, denied.text)
            checked += 1
    assert checked > 60  # both route tables were walked


def test_no_parameter_or_body_makes_either_api_fail(
    apps: tuple[TestClient, TestClient, dict[str, str]],
) -> None:
    main, marquez, tokens = apps
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    failures: list[str] = []
    tried = 0

    def attempt(client: TestClient, method: str, url: str, **kwargs: Any) -> Any:
        nonlocal tried
        tried += 1
        answer = client.request(method, url, headers=admin, **kwargs)
        if answer.status_code >= 500:
            failures.append(f"{method} {url[:120]} {kwargs.get('params', '')!s:.120}"
                            f" → {answer.status_code} {answer.text[:200]}")  # fmt: skip
        return answer

    # Embrasure's routes refuse a parameter they do not declare (the unknown one below), so
    # each gets the bad values in its own parameters; the port's, lenient as Marquez, in
    # every parameter the port reads.
    declared = embrasure_params()
    everything = set().union(*declared.values())
    for client in (main, marquez):
        for method, path, _route in routes(client.app):
            if method == "GET":
                params = declared.get(path, everything) if client is main else MARQUEZ_PARAMS
                for name, value in itertools.product(sorted(params), (*BAD_INTEGERS, HUGE)):
                    attempt(client, method, filled(path), params={name: value})
                unknown = attempt(client, method, filled(path), params={"zzz_unknown": "1"})
                if client is main and path.startswith("/api/v1/") and unknown.status_code < 300:
                    failures.append(f"GET {path}: an unknown parameter answered {unknown}")
            else:
                for body in BODIES:
                    attempt(client, method, filled(path), content=body)
            segments = max(1, path.count("{"))  # the URL stays under the client's 64 KiB
            attempt(client, method, filled(path, HUGE[: 60_000 // segments]))
    assert tried > 5_000
    assert not failures, f"{len(failures)} of {tried}:\n" + "\n".join(failures[:20])
