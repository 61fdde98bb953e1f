"""Bearer tokens and scopes (docs/security.md, embrasure/web/auth.py), over the real app and CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from embrasure.access.grants import SCOPES
from embrasure.model import Token
from embrasure.store import open_store
from embrasure.web import auth
from embrasure.web.auth import required_scopes

from conftest import MINIMAL_EVENT as EVENT
from conftest import ServerProcess, make_client
from graph_api import Api

# Every route and the scope it needs (a tuple: any one of them); None: open to all. A
# route added without a scope fails test_every_route_declares_its_scope; one added to the
# app but not here fails test_the_table_lists_every_route.
ROUTES: dict[tuple[str, str], str | tuple[str, ...] | None] = {
    ("POST", "/api/v1/lineage"): "ingest",
    ("POST", "/api/v1/lineage/batch"): "ingest",
    ("POST", "/api/v1/openlineage/lineage"): "ingest",
    ("POST", "/api/v1/openlineage/lineage/batch"): "ingest",
    ("GET", "/api/v1/deliveries"): "read",
    ("GET", "/api/v1/deliveries/{delivery_id}"): ("read", "ingest"),  # a producer's outcome
    ("GET", "/api/v1/quarantine"): "read",
    ("POST", "/api/v1/quarantine/{delivery_id}/{index}/replay"): "admin",
    ("GET", "/api/v1/export"): "read",
    ("GET", "/api/v1/runs"): "read",
    ("GET", "/api/v1/runs/{run_id}"): "read",
    ("GET", "/api/v1/runs/{run_id}/children"): "read",
    ("GET", "/api/v1/datasets"): "read",
    ("GET", "/api/v1/datasets/runs"): "read",
    ("GET", "/api/v1/jobs"): "read",
    ("GET", "/api/v1/lineage"): "read",
    ("GET", "/api/v1/column-lineage"): "read",
    ("GET", "/api/v1/impact"): "read",
    ("GET", "/api/v1/overview"): "read",
    ("GET", "/api/v1/namespaces"): "read",
    ("GET", "/api/v1/search"): "read",
    ("GET", "/api/v1/events"): "read",
    ("POST", "/api/v1/admin/hide"): "admin",
    ("POST", "/api/v1/admin/unhide"): "admin",
    ("GET", "/api/v1/admin/hidden"): "admin",
    ("POST", "/api/v1/admin/sign-out"): "admin",
    ("GET", "/api/v1/subscriptions"): ("read", "subscriptions"),  # URLs masked for read
    ("POST", "/api/v1/subscriptions"): "subscriptions",
    ("DELETE", "/api/v1/subscriptions/{subscription_id}"): "subscriptions",
    ("GET", "/metrics"): "read",
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", "/openapi.json"): None,
    ("GET", "/docs"): None,
    ("GET", "/"): None,  # the web UI's page; its API calls carry the token
    ("GET", "/auth/login"): None,  # the web UI's sign-in (docs/security.md)
    ("GET", "/auth/callback"): None,
    ("GET", "/auth/session"): None,
    ("POST", "/auth/logout"): None,  # needs the session's CSRF token
}
# Mounted apps serve files that hold no data: the web UI's own JS, CSS and images.
PUBLIC_MOUNTS = {"/ui/static"}


def needed(method: str, path: str) -> tuple[str, ...]:
    """The scopes ROUTES lists for a route, any one of which suffices."""
    scopes = ROUTES.get((method, path), "missing")
    return () if scopes is None else (scopes,) if isinstance(scopes, str) else scopes


def app_routes(client: TestClient) -> Iterator[tuple[str, str, Route]]:
    for route in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Mount):
            assert route.path in PUBLIC_MOUNTS, f"a mount nobody decided is public: {route.path}"
            continue
        assert isinstance(route, Route)
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                yield method, route.path, route


def cli(db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    url = db if isinstance(db, str) else f"sqlite:///{db}"
    return subprocess.run(
        [sys.executable, "-m", "embrasure", *args, "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


def create(db: Path | str, *args: str) -> str:
    out = cli(db, "tokens", "create", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1]  # docs/security.md: the token alone on the last line


def add_token(db_url: str, scope: str) -> str:
    """A token made in process (the CLI's own test makes them through the CLI)."""
    token_id, text = auth.new_token()
    store = open_store(db_url)
    store.add_token(Token(token_id, auth.digest(text), frozenset([scope]), None, "", "t", None))
    store.close()
    return text


@pytest.fixture
def tokens(db_url: str) -> dict[str, str]:
    """One token per scope, made before the app starts."""
    return {scope: add_token(db_url, scope) for scope in SCOPES}


@pytest.fixture
def secured(db_url: str, tokens: dict[str, str]) -> Iterator[TestClient]:
    """The app on each backend, with one token per scope."""
    with make_client(db_url) as c:
        yield c
    c.app.state.store.close()  # type: ignore[attr-defined]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def call(client: TestClient, method: str, path: str, token: str | None) -> Any:
    url = path.replace("{delivery_id}", "01NOSUCHDELIVERY").replace("{index}", "0")
    url = url.replace("{run_id}", "no-such-run")
    headers = bearer(token) if token else {}
    if method == "POST" and "/lineage" in path:
        body = orjson.dumps([EVENT] if path.endswith("batch") else EVENT)
        headers["Content-Type"] = "application/json"
        return client.request(method, url, content=body, headers=headers)
    return client.request(method, url, headers=headers)


def test_every_route_declares_its_scope(client: TestClient) -> None:
    for method, path, route in app_routes(client):
        try:
            scopes = required_scopes(route.endpoint)
        except AttributeError:
            pytest.fail(f"{method} {path} declares no scope (auth.requires or auth.public)")
        assert scopes == needed(method, path), (method, path)


def test_the_table_lists_every_route(client: TestClient) -> None:
    assert {(m, p) for m, p, _ in app_routes(client)} == set(ROUTES)


@pytest.mark.parametrize(("method", "path"), sorted(ROUTES))
def test_each_route_asks_for_its_scope(
    secured: TestClient, tokens: dict[str, str], method: str, path: str
) -> None:
    scopes = needed(method, path)
    anonymous = call(secured, method, path, None)
    if not scopes:
        assert anonymous.status_code not in (401, 403)
        return
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"] == "application/problem+json"
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    for scope, token in tokens.items():
        answer = call(secured, method, path, token)
        if scope in (*scopes, "admin"):
            assert answer.status_code not in (401, 403), (scope, answer.text)
        else:
            assert answer.status_code == 403, (scope, answer.text)
            problem = answer.json()
            assert problem["status"] == 403 and all(s in problem["detail"] for s in scopes)
            assert f'scope="{" ".join(scopes)}"' in answer.headers["www-authenticate"]


def test_without_tokens_everything_is_open(client: TestClient) -> None:
    assert client.get("/api/v1/datasets").status_code == 200
    assert call(client, "POST", "/api/v1/lineage", None).status_code == 202


def test_a_wrong_or_malformed_token_is_refused(secured: TestClient, tokens: dict[str, str]) -> None:
    good = tokens["read"]
    for header in (
        f"Bearer {good[:-1]}x",  # right id, wrong secret
        "Bearer emb_000000000000_whatever",
        "Bearer",
        f"Basic {good}",
        good,
    ):
        r = secured.get("/api/v1/datasets", headers={"Authorization": header})
        assert r.status_code == 401, header
    assert secured.get("/api/v1/datasets", headers=bearer(good)).status_code == 200


def test_a_revoked_token_is_refused(
    db_url: str, secured: TestClient, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "CACHE_SECONDS", 0.0)
    token_id = tokens["read"].split("_")[1]
    assert secured.get("/api/v1/datasets", headers=bearer(tokens["read"])).status_code == 200
    out = cli(db_url, "tokens", "revoke", token_id)
    assert out.returncode == 0, out.stderr
    r = secured.get("/api/v1/datasets", headers=bearer(tokens["read"]))
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_revoking_every_token_keeps_auth_on(
    db_url: str, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "CACHE_SECONDS", 0.0)
    for token in tokens.values():
        assert cli(db_url, "tokens", "revoke", token.split("_")[1]).returncode == 0
    with make_client(db_url) as c:
        assert c.get("/api/v1/datasets").status_code == 401
    c.app.state.store.close()  # type: ignore[attr-defined]


def test_a_bound_token_names_the_provider_whatever_the_query_says(
    db_url: str, tokens: dict[str, str]
) -> None:
    airflow = create(db_url, "--scope", "ingest", "--provider-key", "airflow-prod")
    with make_client(db_url) as c:
        r = c.post(
            "/api/v1/lineage?provider_key=someone-else",
            content=orjson.dumps(EVENT),
            headers={**bearer(airflow), "Content-Type": "application/json"},
        )
        assert r.status_code == 202, r.text
        delivery = c.get(
            f"/api/v1/deliveries/{r.json()['delivery_id']}", headers=bearer(tokens["read"])
        ).json()
    c.app.state.store.close()  # type: ignore[attr-defined]
    assert delivery["provider_key"] == "airflow-prod"


def test_an_ingest_token_sees_the_status_of_its_own_deliveries_only(
    db_url: str, tokens: dict[str, str]
) -> None:
    airflow = create(db_url, "--scope", "ingest", "--provider-key", "airflow-prod")
    with make_client(db_url) as c:

        def deliver(token: str, provider_key: str) -> str:
            r = c.post(
                f"/api/v1/lineage?provider_key={provider_key}",
                content=orjson.dumps(EVENT),
                headers={**bearer(token), "Content-Type": "application/json"},
            )
            assert r.status_code == 202, r.text
            delivery_id: str = r.json()["delivery_id"]
            return delivery_id

        own = deliver(airflow, "airflow-prod")
        other = deliver(tokens["ingest"], "spark-prod")  # an unbound token, another key
        status = {
            (who, delivery): c.get(f"/api/v1/deliveries/{delivery}", headers=bearer(token))
            for who, token in (("airflow", airflow), ("ingest", tokens["ingest"]))
            for delivery in (own, other)
        }
        listing = c.get("/api/v1/deliveries", headers=bearer(airflow))
    c.app.state.store.close()  # type: ignore[attr-defined]
    assert status["airflow", own].status_code == 200
    assert status["airflow", own].json()["provider_key"] == "airflow-prod"
    # Another provider's delivery is "not stored" to a bound token: no probing of ids.
    assert status["airflow", other].status_code == 404
    # An unbound ingest token sees what it wrote (the delivery's writer), not others'.
    assert status["ingest", other].status_code == 200
    assert status["ingest", own].status_code == 404
    assert listing.status_code == 403  # the listing stays read's


def test_the_cli_prints_a_token_once_and_stores_only_its_digest(db_path: Path) -> None:
    out = cli(db_path, "tokens", "create", "--scope", "read", "--scope", "ingest", "--name", "ci")
    assert out.returncode == 0, out.stderr
    token = out.stdout.splitlines()[-1]
    assert token.startswith("emb_") and " " not in token
    listed = cli(db_path, "tokens", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = orjson.loads(listed.stdout)
    assert [(r["scopes"], r["name"], r["revoked_at"]) for r in rows] == [
        (["ingest", "read"], "ci", None)
    ]
    assert token not in listed.stdout
    stored = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert token.encode() not in stored
    assert auth.digest(token).encode() in stored


def test_the_cli_says_what_is_wrong_in_one_line(db_path: Path) -> None:
    bad_scope = cli(db_path, "tokens", "create", "--scope", "root")
    assert bad_scope.returncode != 0 and "root" in bad_scope.stderr
    assert cli(db_path, "tokens", "revoke", "nosuchtoken").stderr.startswith(
        f"embrasure: error: --db sqlite:///{db_path}: no database at"  # revoke creates none
    )
    assert cli(db_path, "db", "upgrade").returncode == 0
    unknown = cli(db_path, "tokens", "revoke", "nosuchtoken")
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines() == [
        "embrasure: error: no live token 'nosuchtoken' (see `embrasure tokens list`)"
    ]


@pytest.mark.slow
def test_serving_a_network_address_needs_a_token_or_insecure(db_path: Path) -> None:
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "embrasure",
            "serve",
            "--host",
            "0.0.0.0",
            "--db",
            f"sqlite:///{db_path}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "--insecure" in refused.stderr and "no bearer token" in refused.stderr
    for extra in (("--insecure",), ()):
        if not extra:
            create(db_path, "--scope", "read")
        server = ServerProcess(db_path, "--host", "0.0.0.0", *extra).start()
        server.terminate()


def test_client_commands_on_the_database_need_no_token(db_path: Path) -> None:
    create(db_path, "--scope", "admin")
    out = cli(db_path, "runs", "--namespace", "demo", "--name", "hello")
    # Whoever can open the file reads it: no 401, the job is simply unknown.
    assert "401" not in out.stderr and "token" not in out.stderr, out.stderr


@pytest.mark.slow
def test_client_commands_send_the_token_to_a_server(db_path: Path) -> None:
    token = create(db_path, "--scope", "read")
    server = ServerProcess(db_path).start()
    try:
        command = [sys.executable, "-m", "embrasure", "deliveries", "--url", server.url, "--json"]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert len(refused.stderr.strip().splitlines()) == 1
        assert "bearer token" in refused.stderr
        allowed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "EMBRASURE_TOKEN": token},
        )
        assert allowed.returncode == 0, allowed.stderr
        assert orjson.loads(allowed.stdout)["deliveries"] == []
    finally:
        server.stop()


def test_an_admin_entry_names_the_token_that_made_it(
    secured: TestClient, tokens: dict[str, str]
) -> None:
    body = orjson.dumps({"type": "namespace", "namespace": "demo"})
    api = Api(secured)
    api.client.headers.update(bearer(tokens["ingest"]))
    api.post(EVENT)
    refused = secured.post("/api/v1/admin/hide", content=body, headers=bearer(tokens["read"]))
    assert refused.status_code == 403
    api.project()
    hid = secured.post("/api/v1/admin/hide", content=body, headers=bearer(tokens["admin"]))
    assert hid.status_code == 202, hid.text
    api.project()
    listed = secured.get("/api/v1/admin/hidden", headers=bearer(tokens["admin"])).json()
    token_id = tokens["admin"].split("_")[1]
    assert [(e["namespace"], e["by"]) for e in listed["hidden"]] == [("demo", token_id)]
