"""People sign in to the web UI with the company's identity provider
(docs/security.md#signing-in-to-the-web-ui): node's oidc-provider on loopback
(tests/oidc_provider.py) and its own sign-in form, Debian's chromium driven by
Playwright, a real server."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import orjson
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from conftest import MINIMAL_EVENT, ServerProcess, sqlite_url
from graph_api import at, ds, run_event, run_id
from oidc_provider import RESOURCE, OidcProvider

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} is absent (scripts/test installs it)"
    ),
]
expect.set_options(timeout=15_000)
GROUPS = {"alice": ["finance"], "bob": ["marketing"], "carol": ["team-amber"]}
# carol's team may read its own namespace only: its job reads the other teams' tables.
AMBER_EVENT = run_event(
    "COMPLETE",
    "amber_job",
    run_id(1),
    at(9),
    inputs=[ds("team-blue", "blue_table"), ds("team-coral", "coral_table")],
    outputs=[ds("team-amber", "amber_table")],
    namespace="team-amber",
)


def signing_in(provider: OidcProvider) -> dict[str, str]:
    """The settings of a server whose web UI signs people in with ``provider``."""
    client_id, secret = provider.ui_client()
    return {
        "EMBRASURE_OIDC_ISSUER": provider.issuer,
        "EMBRASURE_OIDC_AUDIENCE": RESOURCE,
        "EMBRASURE_OIDC_CLIENT_ID": client_id,
        "EMBRASURE_OIDC_CLIENT_SECRET": secret,
        "EMBRASURE_OIDC_SCOPES": "openid profile groups",
    }


@dataclass
class Setup:
    provider: OidcProvider
    server: ServerProcess


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    work = tmp_path_factory.mktemp("sign-in")
    db = work / "ui.db"

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "embrasure", *args, "--db", sqlite_url(db)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("grants", "add", "--to", "group:finance", "--scope", "read")
    cli(
        "grants", "add", "--to", "group:team-amber", "--scope", "read", "--namespaces", "team-amber"
    )
    writer = cli("tokens", "create", "--scope", "ingest").splitlines()[-1]
    provider = OidcProvider(work, clients={}, groups=GROUPS)
    env = signing_in(provider)
    server = ServerProcess(db, env=env)
    provider.redirect_uris = [f"{server.url}/auth/callback"]
    provider.start()
    try:
        server.start()
        try:
            reply = httpx.post(
                f"{server.url}/api/v1/lineage",
                content=orjson.dumps(MINIMAL_EVENT),
                headers={"Content-Type": "application/json"},
            )
            assert reply.status_code == 401  # auth is on: the issuer is set
            reply = httpx.post(
                f"{server.url}/api/v1/lineage",
                content=orjson.dumps(AMBER_EVENT),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {writer}"},
            )
            assert reply.status_code == 202, reply.text
            yield Setup(provider, server)
        finally:
            server.stop()
    finally:
        provider.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:  # Debian's chromium; --no-sandbox: CI runs as root
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def context(browser: Browser, setup: Setup) -> Iterator[BrowserContext]:
    c = browser.new_context(base_url=setup.server.url)
    yield c
    c.close()


def sign_in(page: Page, who: str) -> None:
    """From the UI's sign-in page through the provider's own forms, and back."""
    page.goto("/#/deliveries")
    page.get_by_role("link", name="Sign in with your company account").click()
    page.locator("input[name=login]").fill(who)
    page.locator("input[name=password]").fill("anything")  # its dev form takes any
    page.locator("button[type=submit]").click()
    page.get_by_role("button", name="Continue").click()  # consent to the UI client
    page.wait_for_url("**/#/deliveries")


def test_a_person_signs_in_and_sees_what_their_group_may_read(
    context: BrowserContext, setup: Setup
) -> None:
    page = context.new_page()
    sign_in(page, "alice")
    expect(page.get_by_role("heading", name="Deliveries", exact=True)).to_be_visible()
    expect(page.locator("#account")).to_have_text("alice")
    cookie = next(c for c in context.cookies() if c["name"] == "embrasure_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert not cookie["secure"]  # served over plain http on loopback; Secure under TLS
    assert not any(c["name"] == "embrasure_sign_in" for c in context.cookies())
    # The cookie is the session: the API answers it, and a write needs the CSRF token.
    jar = {"embrasure_session": cookie["value"]}
    url = setup.server.url
    assert httpx.get(f"{url}/api/v1/namespaces", cookies=jar).status_code == 200
    hide = httpx.post(f"{url}/api/v1/admin/hide", cookies=jar, content=b"{}")
    assert hide.status_code == 403 and hide.json()["type"].endswith("/csrf")
    session = httpx.get(f"{url}/auth/session", cookies=jar).json()
    assert (session["subject"], session["groups"]) == ("alice", ["finance"])
    assert session["signed_in"]
    assert documented(url, "/auth/session", "get", session)
    csrf = {session["csrf_header"]: session["csrf_token"]}
    hide = httpx.post(f"{url}/api/v1/admin/hide", cookies=jar, headers=csrf, content=b"{}")
    assert hide.status_code == 403 and hide.json()["type"].endswith("/insufficient-scope")
    forged = {"embrasure_session": cookie["value"][:-4] + "AAAA"}
    assert httpx.get(f"{url}/api/v1/namespaces", cookies=forged).status_code == 401
    assert httpx.post(f"{url}/auth/logout", cookies=jar).status_code == 403  # no CSRF token
    # Signing out in the browser ends the session on the server: the copy is worthless.
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name="Sign in with your company account")).to_be_visible()
    assert not any(c["name"] == "embrasure_session" for c in context.cookies())
    copied = httpx.get(f"{url}/api/v1/namespaces", cookies=jar)
    assert copied.status_code == 401 and "ended (signed out)" in copied.json()["detail"]
    assert httpx.get(f"{url}/auth/session", cookies=jar).json()["signed_in"] is False
    signed_out = httpx.post(f"{url}/auth/logout", cookies=jar)  # over: nothing to protect
    assert signed_out.status_code == 200
    assert documented(url, "/auth/logout", "post", signed_out.json())


def documented(url: str, path: str, method: str, answer: Any) -> bool:
    """``answer`` is what /openapi.json says ``path`` answers with 200."""
    doc = httpx.get(f"{url}/openapi.json").json()
    schema = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    validator = jsonschema_rs.validator_for({**schema["schema"], "additionalProperties": False})
    errors = [e.message for e in validator.iter_errors(answer)]
    assert errors == [], errors
    return True


def test_a_person_without_a_grant_is_told_so(context: BrowserContext) -> None:
    page = context.new_page()
    sign_in(page, "bob")
    expect(page.get_by_role("alert")).to_contain_text("needs scope 'read'")
    expect(page.get_by_role("alert")).to_contain_text("marketing")


def test_the_lineage_stops_at_other_teams_namespaces(context: BrowserContext) -> None:
    page = context.new_page()
    sign_in(page, "carol")
    page.goto("/#/dataset?namespace=team-amber&name=amber_table")
    nodes = page.get_by_role("list", name="Nodes in the lineage graph")
    expect(nodes.get_by_role("link", name="amber_job")).to_be_visible()  # once projected
    expect(nodes).to_contain_text("hidden: 2 nodes in namespaces you cannot read")
    expect(page.locator("body")).not_to_contain_text("blue_table")
    expect(page.locator("body")).not_to_contain_text("coral_table")


def test_the_flow_refuses_a_foreign_state_and_an_open_redirect(setup: Setup) -> None:
    url = setup.server.url
    start = httpx.get(f"{url}/auth/login", params={"then": "https://evil.example/"})
    assert start.status_code == 303
    assert start.headers["location"].startswith(f"{setup.provider.issuer}/")
    assert "code_challenge_method=S256" in start.headers["location"]
    flow = start.cookies["embrasure_sign_in"]
    back = httpx.get(
        f"{url}/auth/callback",
        params={"state": "not-this-one", "code": "x"},
        cookies={"embrasure_sign_in": flow},
    )
    assert back.status_code == 401 and "state" in back.json()["detail"]
    refused = httpx.get(f"{url}/auth/callback", params={"error": "access_denied"})
    assert refused.status_code == 401 and "access_denied" in refused.json()["detail"]


def test_sign_in_is_404_without_a_client(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "plain.db").start()
    try:
        reply = httpx.get(f"{server.url}/auth/login")
        assert reply.status_code == 404 and reply.json()["type"].endswith("/sign-in-off")
        nobody = httpx.get(f"{server.url}/auth/session").json()
        assert nobody == {"signed_in": False, "sign_in": None}
    finally:
        server.stop()


def test_sign_out_ends_a_copied_cookie_at_once_on_every_server(
    db_url: str, tmp_path: Path, browser: Browser
) -> None:
    """Two `serve` processes on one database (SQLite and PostgreSQL): a session cookie
    copied before signing out on one is refused by both at once; signing in again gives
    a new cookie; an admin ending someone's sessions on one ends them on the other."""

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "embrasure", *args, "--db", db_url],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("grants", "add", "--to", "group:finance", "--scope", "read")
    admin = cli("tokens", "create", "--scope", "admin").splitlines()[-1]
    provider = OidcProvider(tmp_path, clients={}, groups=GROUPS)
    env = signing_in(provider)
    one, two = (ServerProcess(db_url, env=env, log_dir=tmp_path) for _ in range(2))
    provider.redirect_uris = [f"{one.url}/auth/callback"]
    provider.start()
    context = browser.new_context(base_url=one.url)
    try:
        one.start()
        two.start()
        page = context.new_page()
        sign_in(page, "alice")

        def session_cookie() -> dict[str, str]:
            found = [c for c in context.cookies() if c["name"] == "embrasure_session"]
            return {"embrasure_session": found[0]["value"]}

        jar = session_cookie()
        for server in (one, two):
            assert httpx.get(f"{server.url}/api/v1/namespaces", cookies=jar).status_code == 200
        session = httpx.get(f"{two.url}/auth/session", cookies=jar).json()
        csrf = {session["csrf_header"]: session["csrf_token"]}
        assert httpx.post(f"{one.url}/auth/logout", cookies=jar, headers=csrf).status_code == 200
        for server in (one, two):
            refused = httpx.get(f"{server.url}/api/v1/namespaces", cookies=jar)
            assert refused.status_code == 401, refused.text
            assert "ended (signed out)" in refused.json()["detail"]
        # A new sign-in (in a browser of its own) is a new session under a new cookie;
        # the old one stays ended.
        context.close()
        context = browser.new_context(base_url=one.url)
        sign_in(context.new_page(), "alice")
        again = session_cookie()
        assert again != jar
        assert httpx.get(f"{two.url}/api/v1/namespaces", cookies=again).status_code == 200
        assert httpx.get(f"{two.url}/api/v1/namespaces", cookies=jar).status_code == 401
        # An admin signs alice out everywhere, through the other server.
        ended = httpx.post(
            f"{two.url}/api/v1/admin/sign-out",
            json={"subject": "alice"},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert ended.status_code == 200 and ended.json() == {"ended": 1}, ended.text
        refused = httpx.get(f"{one.url}/api/v1/namespaces", cookies=again)
        assert refused.status_code == 401 and "ended by " in refused.json()["detail"]
    finally:
        context.close()
        one.stop()
        two.stop()
        provider.stop()
