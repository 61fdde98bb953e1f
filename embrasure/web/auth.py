"""Bearer tokens with scopes (docs/security.md; RFC 6750 for the header and the errors).

A token is ``emb_<id>_<secret>``: the id finds its row, the SHA-256 of the whole token
must match the stored one (tokens are 256 random bits, so a fast hash is enough: there is
nothing to guess by brute force, unlike a password). Only the hash is stored; the token is
printed once, by ``embrasure tokens create``.

Scopes: ``ingest`` (POST events, and the status of a delivery), ``read`` (every GET of
the graph, the log and ``/metrics``), ``admin`` (replay, and everything the other two
allow). A token may be bound to one provider_key, which then replaces the query parameter
on its deliveries.

Auth is on as soon as one token has been created, revoked or not: revoking the last
token must not quietly open the server. With none, every request passes; the CLI refuses
to bind a non-loopback address in that state unless ``--insecure`` is given.

Every route declares its scope with ``requires`` (or ``public``); tests/web/test_auth.py
walks the router so that a route without one fails the suite.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import Response

from embrasure.errors import Problem, StoreUnavailable
from embrasure.model import Token
from embrasure.store import Store
from embrasure.web import params
from embrasure.web.refresh import Refreshed
from embrasure.web.responses import store_unavailable

SCOPES = ("ingest", "read", "admin")
PREFIX = "emb_"
# How long a server trusts what it read of the tokens table: a token created or revoked
# by `embrasure tokens` (another process, maybe another machine) takes effect within it.
CACHE_SECONDS = 2.0

Endpoint = Callable[[Request], Awaitable[Response]]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh (token_id, token text)."""
    token_id = secrets.token_hex(6)
    return token_id, f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"


def check_scopes(scopes: Sequence[str]) -> frozenset[str]:
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; got {', '.join(scopes)}")
    return frozenset(scopes)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Checks requests' bearer tokens against the store's tokens table, read at most
    once per CACHE_SECONDS, off the event loop, one read at a time (refresh.Refreshed)."""

    def __init__(self, store: Store, *, enforce: bool = True) -> None:
        self.store = store
        self.enforce = enforce  # False: the in-process app of a --db client command
        self._tokens = Refreshed(self._read, lambda: CACHE_SECONDS)

    def _read(self) -> dict[str, Token]:
        return {t.token_id: t for t in self.store.tokens()}

    async def tokens(self) -> dict[str, Token]:
        return await self._tokens.get()

    async def check(self, request: Request, scopes: Sequence[str]) -> Token | None:
        """The request's token (None while auth is off), which allows one of ``scopes``;
        raises Problem 401/403."""
        tokens = await self.tokens() if self.enforce else {}
        if not tokens:
            return None
        header = request.headers.get("authorization", "")
        kind, _, text = header.partition(" ")
        if kind.lower() != "bearer" or not text.strip():
            raise _unauthorized("This server needs a bearer token (Authorization: Bearer …).")
        text = text.strip()
        token_id = text[len(PREFIX) :].partition("_")[0] if text.startswith(PREFIX) else ""
        token = tokens.get(token_id)
        if token is None or not hmac.compare_digest(token.digest, digest(text)):
            raise _unauthorized("The bearer token is not one this server issued.")
        if token.revoked_at is not None:
            raise _unauthorized(f"The bearer token {token_id} was revoked at {token.revoked_at}.")
        if not any(token.allows(scope) for scope in scopes):
            needed = " or ".join(repr(s) for s in scopes)
            # RFC 6750 §3: scope is a space-delimited list; here any one of them suffices.
            listed = " ".join(scopes)
            raise Problem(
                403,
                "insufficient-scope",
                "Insufficient scope",
                f"{request.method} {request.url.path} needs scope {needed}; token "
                f"{token_id} has {', '.join(sorted(token.scopes))}.",
                headers={
                    "WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{listed}"'
                },
            )
        return token


def _unauthorized(detail: str) -> Problem:
    return Problem(
        401,
        "unauthorized",
        "Unauthorized",
        detail,
        headers={"WWW-Authenticate": 'Bearer realm="embrasure"'},
    )


def requires(*scopes: str) -> Callable[[Endpoint], Endpoint]:
    """Mark an endpoint as needing one of ``scopes``; the token checked is on
    request.state.token.

    The check runs inside the route's endpoint, so what it raises (a 401 or 403
    Problem) reaches the app's exception handlers like any route's error."""
    if not scopes or set(scopes) - set(SCOPES):
        raise ValueError(f"unknown scopes {scopes!r}")

    def wrap(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def guarded(request: Request) -> Response:
            guard: Guard = request.app.state.guard
            try:
                request.state.token = await guard.check(request, scopes)
            except StoreUnavailable as exc:
                # Retry-After 1, not --retry-after: the guard is not given the
                # setting and has always sent 1 (tests/web/test_problems.py pins it).
                raise store_unavailable(exc, retry_after=1) from exc
            params.refuse_unknown(request)
            return await endpoint(request)

        guarded.required_scopes = scopes  # type: ignore[attr-defined]
        return guarded

    return wrap


def public(endpoint: Endpoint) -> Endpoint:
    """Mark an endpoint as needing no token (health checks, the API's own description)."""

    @functools.wraps(endpoint)
    async def open_to_all(request: Request) -> Response:
        return await endpoint(request)

    open_to_all.required_scopes = ()  # type: ignore[attr-defined]
    return open_to_all


def required_scopes(endpoint: object) -> tuple[str, ...]:
    """The scopes an endpoint declared, any one of which suffices (none: open to all);
    AttributeError when it declared nothing."""
    scopes: tuple[str, ...] = endpoint.required_scopes  # type: ignore[attr-defined]
    return scopes
