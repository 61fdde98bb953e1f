"""Bearer tokens with scopes (docs/security.md; RFC 6750 for the header and the errors).

A token is ``emb_<id>_<secret>``: the id finds its row, the SHA-256 of the whole token
must match the stored one (tokens are 256 random bits, so a fast hash is enough: there is
nothing to guess by brute force, unlike a password). Only the hash is stored; the token is
printed once, by ``embrasure tokens create``.

Scopes: ``ingest`` (POST events, and the status of a delivery), ``read`` (every GET of
the graph, the log and ``/metrics``), ``admin`` (replay, and everything the other two
allow). A token may be bound to one provider_key, which then replaces the query parameter
on its deliveries.

With --oidc-issuer, a bearer token that is not one of these is read as a JWT of the
company's identity provider (access/jwt_bearer.py). Either kind gets its scopes, per
namespace glob, from the grant rules (access/grants.py; a static token no rule names
keeps its own scopes everywhere).

Auth is on as soon as one token has been created, revoked or not (revoking the last
token must not quietly open the server), or an issuer is configured. Otherwise every
request passes; the CLI refuses to bind a non-loopback address in that state unless
``--insecure`` is given.

Every route declares its scope with ``requires`` (or ``public``); tests/web/test_auth.py
walks the router so that a route without one fails the suite.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Sequence

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from embrasure.access import grants
from embrasure.access.grants import SCOPES
from embrasure.access.jwt_bearer import JwtVerifier, ProviderUnavailable, Refused
from embrasure.access.sign_in import SignIn
from embrasure.errors import Problem, StoreUnavailable
from embrasure.model import Grant, Principal, Token
from embrasure.receiver.refresh import Refreshed
from embrasure.store import Store
from embrasure.web import params, read_bounds
from embrasure.web.responses import store_unavailable

PREFIX = "emb_"
# How long a server trusts what it read of the tokens table: a token created or revoked
# by `embrasure tokens` (another process, maybe another machine) takes effect within it.
CACHE_SECONDS = 2.0
# The web UI's session (web/sign_in.py), and the header its writes carry the session's
# CSRF token in (a cookie comes with every request to this origin, even one another site
# makes the browser send; a header only with this origin's own scripts).
SESSION_COOKIE = "embrasure_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
PRINCIPALS_KEPT = 10_000

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


@dataclasses.dataclass(frozen=True)
class Access:
    """The tokens and grant rules, as read together from the store."""

    tokens: dict[str, Token]
    grants: tuple[Grant, ...]


class Guard:
    """Checks requests' bearer tokens: this server's static tokens, against the store's
    tokens table, and JWTs from the identity provider (access/jwt_bearer.py) when one is
    configured; each gets the scopes its grant rules give (access/grants.py). Tokens and
    grants are read at most once per CACHE_SECONDS, off the event loop, one read at a
    time (refresh.Refreshed)."""

    def __init__(
        self,
        store: Store,
        *,
        enforce: bool = True,
        jwt: JwtVerifier | None = None,
        sign_in: SignIn | None = None,
    ) -> None:
        self.store = store
        self.enforce = enforce  # False: the in-process app of a --db client command
        self.jwt = jwt
        self.sign_in = sign_in
        self._access = Refreshed(self._read, lambda: CACHE_SECONDS)
        # token text → its principal and the Access it was built from (_kept)
        self._principals: dict[str, tuple[Access, Principal]] = {}

    def _read(self) -> Access:
        return Access({t.token_id: t for t in self.store.tokens()}, tuple(self.store.grants()))

    async def tokens(self) -> dict[str, Token]:
        return (await self._access.get()).tokens

    async def check(
        self, request: Request, scopes: Sequence[str], everywhere: bool = False
    ) -> Principal | None:
        """Who sent the request (None while auth is off), which must be allowed one of
        ``scopes`` (on every namespace with ``everywhere``); raises Problem 401/403 (503:
        the identity provider is unreachable)."""
        if not self.enforce:
            return None
        access = await self._access.get()
        if not access.tokens and self.jwt is None:
            return None
        principal = await self._principal(request, access)
        if not any(grants.reaches(principal, scope, everywhere) for scope in scopes):
            raise _insufficient(request, scopes, principal, everywhere)
        return principal

    async def _principal(self, request: Request, access: Access) -> Principal:
        """Whoever the request's bearer token (or, with none, its session cookie) is."""
        header = request.headers.get("authorization", "")
        if not header and self.sign_in is not None and SESSION_COOKIE in request.cookies:
            return await self._session_principal(request, self.sign_in, access)
        kind, _, text = header.partition(" ")
        text = text.strip()
        if kind.lower() != "bearer" or not text:
            raise self._unauthorized(
                "This server needs a bearer token (Authorization: Bearer …)"
                + (" or a signed-in session." if self.sign_in is not None else ".")
            )
        if text.startswith(PREFIX) or self.jwt is None:
            return self._kept(
                text,
                access,
                lambda: grants.token_principal(self._static_token(access, text), access.grants),
            )
        return await self._jwt_principal(self.jwt, text, access)

    def _kept(self, text: str, access: Access, build: Callable[[], Principal]) -> Principal:
        """The principal of a token, built once per read of the tokens and grants
        (Access): a producer sends one token with every event, and what it may do changes
        only when they are read again (a revoked token then finds no principal kept)."""
        kept = self._principals.get(text)
        if kept is not None and kept[0] is access:
            return kept[1]
        principal = build()
        if len(self._principals) >= PRINCIPALS_KEPT:
            self._principals.clear()
        self._principals[text] = (access, principal)
        return principal

    def _static_token(self, access: Access, text: str) -> Token:
        token_id = text[len(PREFIX) :].partition("_")[0] if text.startswith(PREFIX) else ""
        token = access.tokens.get(token_id)
        if token is None or not hmac.compare_digest(token.digest, digest(text)):
            raise self._unauthorized("The bearer token is not one this server issued.")
        if token.revoked_at is not None:
            raise self._unauthorized(
                f"The bearer token {token_id} was revoked at {token.revoked_at}."
            )
        return token

    async def _session_principal(
        self, request: Request, sign_in: SignIn, access: Access
    ) -> Principal:
        """A person signed in to the web UI: their grants, and on a write the CSRF token
        of their session (docs/security.md#signing-in-to-the-web-ui). The session's row
        is read at every request: one ended anywhere is ended here at once."""
        try:
            session = await run_in_threadpool(sign_in.session_of, request.cookies[SESSION_COOKIE])
        except Refused as exc:
            raise self._unauthorized(str(exc)) from None
        if request.method not in SAFE_METHODS and not hmac.compare_digest(
            request.headers.get(CSRF_HEADER, ""), session.csrf
        ):
            raise Problem(
                403,
                "csrf",
                "Missing CSRF token",
                f"A write from a signed-in session needs its {CSRF_HEADER} header"
                " (GET /auth/session gives it).",
            )
        return grants.jwt_principal(
            subject=session.subject,
            issuer=session.issuer,
            token_id="",
            client=sign_in.client_id,
            groups=session.groups,
            grants=access.grants,
            kind="session",
        )

    def _unauthorized(self, detail: str, error: str = "") -> Problem:
        """A 401; with sign-in configured, it names where the UI sends people."""
        problem = _unauthorized(detail, error)
        if self.sign_in is not None:
            problem.extra["sign_in"] = "/auth/login"
        return problem

    async def _jwt_principal(self, verifier: JwtVerifier, text: str, access: Access) -> Principal:
        try:
            verified = await verifier.verify(text)  # every time: it checks the expiry
        except Refused as exc:
            raise self._unauthorized(str(exc), error="invalid_token") from None
        except ProviderUnavailable as exc:
            raise provider_unavailable("The JWT could not be checked", exc) from None
        return self._kept(
            text,
            access,
            lambda: grants.jwt_principal(
                subject=verified.subject,
                issuer=verified.issuer,
                token_id=verified.token_id,
                client=verified.client,
                groups=verified.groups,
                grants=access.grants,
            ),
        )


def provider_unavailable(what: str, exc: Exception) -> Problem:
    """A 503: the identity provider could not be reached (the token may well be good)."""
    return Problem(
        503,
        "identity-provider-unavailable",
        "Identity provider unavailable",
        f"{what}: {exc}. Try again later.",
        retry_after=5,
    )


def _insufficient(
    request: Request, scopes: Sequence[str], principal: Principal, everywhere: bool
) -> Problem:
    needed = " or ".join(repr(s) for s in scopes)
    held = ", ".join(sorted({s for s, _ in principal.scopes})) or "no grant"
    narrow = sorted(
        {f"{s} on {p!r}" for s, p in principal.scopes if s in (*scopes, "admin") and p != "*"}
    )
    if narrow:  # grants.reaches: these need their scope on every namespace
        held = (
            f"{', '.join(narrow)} only; "
            + ("this route spans every namespace" if everywhere else "admin actions")
            + " so it needs its scope on '*' (docs/security.md#grants)"
        )
    if principal.kind != "token":
        groups = ", ".join(sorted(principal.groups)) or "none"
        held = f"{held} (grants of subject {principal.subject!r}, groups {groups})"
    # RFC 6750 §3: scope is a space-delimited list; here any one of them suffices.
    listed = " ".join(scopes)
    return Problem(
        403,
        "insufficient-scope",
        "Insufficient scope",
        f"{request.method} {request.url.path} needs scope {needed}; {principal.who} has {held}.",
        headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{listed}"'},
    )


def _unauthorized(detail: str, error: str = "") -> Problem:
    # RFC 6750 §3.1: invalid_token when a token was given and is bad (expired, forged…).
    challenge = 'Bearer realm="embrasure"' + (f', error="{error}"' if error else "")
    return Problem(
        401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": challenge}
    )


def requires(*scopes: str, everywhere: bool = False) -> Callable[[Endpoint], Endpoint]:
    """Mark an endpoint as needing one of ``scopes`` (on every namespace with
    ``everywhere``: routes that span them all, such as the delivery log); who sent it (a
    Principal, None while auth is off) is on request.state.principal, what it may
    read on grants.READING (query/hidden.py hides the rest), and the bounds of a read on
    read_bounds.CURRENT.

    The check runs inside the route's endpoint, so what it raises (a 401 or 403
    Problem) reaches the app's exception handlers like any route's error."""
    if not scopes or set(scopes) - set(SCOPES):
        raise ValueError(f"unknown scopes {scopes!r}")

    def wrap(endpoint: Endpoint) -> Endpoint:
        @functools.wraps(endpoint)
        async def guarded(request: Request) -> Response:
            guard: Guard = request.app.state.guard
            try:
                principal = await guard.check(request, scopes, everywhere)
            except StoreUnavailable as exc:
                # Retry-After 1, not --retry-after: the guard is not given the
                # setting and has always sent 1 (tests/web/test_problems.py pins it).
                raise store_unavailable(exc, retry_after=1) from exc
            request.state.principal = principal
            params.refuse_unknown(request)
            reading = grants.READING.set(grants.restricted(principal, "read"))
            bounds = read_bounds.CURRENT.set(getattr(request.app.state, "read_bounds", None))
            try:
                return await endpoint(request)
            finally:
                read_bounds.CURRENT.reset(bounds)
                grants.READING.reset(reading)

        guarded.required_scopes = scopes  # type: ignore[attr-defined]
        guarded.everywhere = everywhere  # type: ignore[attr-defined]
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
