"""Web UI sessions kept by the server (access/sign_in.py, docs/security.md#signing-in-to-the
-web-ui), on each backend, with a clock the test moves: the idle timeout, the absolute
lifetime, a sign-in that ends the session the browser came with, and an admin ending one
person's or everyone's. The sign-in itself, with a real identity provider and two
servers, is tests/ui/test_sign_in.py's."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import orjson
import pytest
from click.testing import CliRunner

from embrasure.access.jwt_bearer import IdentityProvider, JwtVerifier, Refused
from embrasure.access.sign_in import TOUCH_SECONDS, Session, SignIn
from embrasure.app import ui_sign_in
from embrasure.cli.main import main
from embrasure.settings import Settings
from embrasure.store import Store, open_store

HOUR = 3600


class Clock:
    def __init__(self) -> None:
        self.at = 1_800_000_000.0

    def __call__(self) -> float:
        return self.at


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    yield s
    s.close()


def signing_in(store: Store, clock: Clock, idle_minutes: int = 30) -> SignIn:
    # The provider is never asked: sessions are the server's own.
    verifier = JwtVerifier(IdentityProvider("https://idp.example.com"), "embrasure")
    return SignIn(
        verifier,
        "embrasure-ui",
        "secret",
        "openid",
        8 * HOUR,
        idle_minutes * 60,
        store,
        lambda: store.server_secret("session-cookies"),
        now=clock,
    )


def person(subject: str, clock: Clock) -> Session:
    return Session(
        subject, "https://idp.example.com", subject, ("finance",), int(clock()) + 8 * HOUR, "csrf"
    )


def test_a_session_ends_when_idle_too_long_and_lives_while_used(store: Store) -> None:
    clock = Clock()
    sign_in = signing_in(store, clock)
    cookie = sign_in.open_session(person("alice", clock), None)
    for _ in range(10):  # used every 20 minutes for over three hours: alive
        clock.at += 20 * 60
        assert sign_in.session_of(cookie).subject == "alice"
    clock.at += 31 * 60
    with pytest.raises(Refused, match="idle for over 30 minutes"):
        sign_in.session_of(cookie)


def test_use_is_written_at_most_once_a_minute(store: Store) -> None:
    clock = Clock()
    sign_in = signing_in(store, clock)
    cookie = sign_in.open_session(person("alice", clock), None)
    row = store.ui_session(hashlib.sha256(cookie.encode()).hexdigest())  # never the id
    assert row is not None and row.seen_at == int(clock())
    clock.at += TOUCH_SECONDS - 1
    sign_in.session_of(cookie)
    assert store.ui_session(row.digest).seen_at == row.seen_at  # type: ignore[union-attr]
    clock.at += 1
    sign_in.session_of(cookie)
    assert store.ui_session(row.digest).seen_at == int(clock())  # type: ignore[union-attr]


def test_a_session_ends_at_its_lifetime_however_used(store: Store) -> None:
    clock = Clock()
    sign_in = signing_in(store, clock, idle_minutes=0)  # no idle timeout
    cookie = sign_in.open_session(person("alice", clock), None)
    clock.at += 8 * HOUR - 1
    assert sign_in.session_of(cookie).subject == "alice"
    clock.at += 1
    with pytest.raises(Refused, match="The session is over"):
        sign_in.session_of(cookie)


def test_signing_in_again_ends_the_session_the_browser_came_with(store: Store) -> None:
    clock = Clock()
    sign_in = signing_in(store, clock)
    first = sign_in.open_session(person("alice", clock), None)
    second = sign_in.open_session(person("alice", clock), first)
    assert second != first
    assert sign_in.session_of(second).subject == "alice"
    with pytest.raises(Refused, match=r"ended \(signed in again\)"):
        sign_in.session_of(first)
    with pytest.raises(Refused, match="not one of this server's"):
        sign_in.session_of(first[:-2] + "xx")


def test_an_admin_ends_one_persons_sessions_or_everyones(store: Store) -> None:
    clock = Clock()
    sign_in = signing_in(store, clock)
    alice = [sign_in.open_session(person("alice", clock), None) for _ in range(2)]
    bob = sign_in.open_session(person("bob", clock), None)
    assert store.end_sessions(int(clock()), "ended by admin", subject="alice") == 2
    for cookie in alice:
        with pytest.raises(Refused, match=r"ended \(ended by admin\)"):
            sign_in.session_of(cookie)
    assert sign_in.session_of(bob).subject == "bob"
    assert store.end_sessions(int(clock()), "ended by admin") == 1  # everyone's: bob's
    with pytest.raises(Refused):
        sign_in.session_of(bob)


def test_the_server_builds_sign_in_with_the_idle_setting(store: Store) -> None:
    settings = Settings(
        oidc_issuer="https://idp.example.com",
        oidc_audience="embrasure",
        oidc_client_id="ui",
        oidc_client_secret="s",
        oidc_session_idle_minutes=15,
    )
    verifier = JwtVerifier(IdentityProvider(settings.oidc_issuer), settings.oidc_audience)
    built = ui_sign_in(settings, verifier, store)
    assert built is not None and built.idle_seconds == 15 * 60


def test_the_admin_command_ends_sessions_in_one_line(store: Store, db_url: str) -> None:
    clock = Clock()
    clock.at = time.time()
    sign_in = signing_in(store, clock)
    cookies = [sign_in.open_session(person(p, clock), None) for p in ("alice", "alice", "bob")]
    runner = CliRunner()
    alice = runner.invoke(main, ["admin", "sign-out", "--db", db_url, "--subject", "alice"])
    assert (alice.exit_code, alice.output) == (0, "ended 2 session(s) of alice\n")
    assert sign_in.session_of(cookies[2]).subject == "bob"
    both = runner.invoke(
        main, ["admin", "sign-out", "--db", db_url, "--subject", "x", "--everyone"]
    )
    assert both.exit_code == 1
    assert both.output == "embrasure: error: give --subject SUBJECT or --everyone\n"
    everyone = runner.invoke(main, ["admin", "sign-out", "--db", db_url, "--everyone", "--json"])
    assert everyone.exit_code == 0 and orjson.loads(everyone.output) == {"ended": 1}
