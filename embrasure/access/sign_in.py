"""People sign in to the web UI with the company's identity provider
(docs/security.md#signing-in-to-the-web-ui): OpenID Connect's authorization code flow with
PKCE (RFC 7636, S256), then a session cookie.

The flow: ``start`` gives the provider's authorization URL and a short-lived signed
*flow* cookie holding the state, the nonce and the PKCE verifier; the provider sends the
browser back to the callback with a code, which ``finish`` exchanges (with the client
secret) for an ID token, checked like any of the provider's JWTs (jwt_bearer.py) with
this client as its audience and the flow's nonce. The *session* is then a row the server
keeps (store ``sessions``): who signed in (subject, groups), until when, when last seen,
and a CSRF token the UI sends back on writes; the session cookie holds only a random id,
and the row its SHA-256. Every request reads the row, so signing out, an admin ending
someone's sessions, the idle timeout (--oidc-session-idle-minutes) and the absolute
lifetime (--oidc-session-hours) end a session at once, on every process and every
server of the database — a copy of the cookie taken before is worth nothing after
(OWASP ASVS 3.3.1). Each sign-in mints a new id (no session fixation) and ends the
session the browser came with.

The flow cookie is a JWT signed (HS256) with the server's own secret, kept in the
database so that every process and every restart shares it (store ``server_secret``):
tamper-proof, not hidden; it holds no token of the provider's.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import secrets
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Protocol

import httpx
from joserfc import errors, jwt
from joserfc.jwk import OctKey

from embrasure.access.jwt_bearer import FETCH_TIMEOUT, JwtVerifier, ProviderUnavailable, Refused
from embrasure.model import UiSession

FLOW_SECONDS = 600  # from the redirect to the provider to the callback
# A session's last use is written at most this often: its idle time is known to within
# a minute, for one short write per minute of use.
TOUCH_SECONDS = 60
SESSION_ALG = "HS256"


class Sessions(Protocol):
    """Where sessions are kept: the store's (store/base.py; access sits below it)."""

    def add_session(self, session: UiSession) -> None: ...
    def ui_session(self, digest: str) -> UiSession | None: ...
    def touch_session(self, digest: str, seen_at: int) -> None: ...
    def end_sessions(
        self, at: int, by: str, digest: str | None = None, subject: str | None = None
    ) -> int: ...


@dataclasses.dataclass(frozen=True)
class Session:
    """Who signed in to the UI, until when, and the CSRF token of their writes."""

    subject: str
    issuer: str
    name: str
    groups: tuple[str, ...]
    expires: int
    csrf: str


class SignIn:
    def __init__(
        self,
        verifier: JwtVerifier,
        client_id: str,
        client_secret: str,
        scopes: str,
        session_seconds: int,
        idle_seconds: int,
        store: Sessions,
        secret: Callable[[], bytes],
        now: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.client_id = client_id
        self.client_secret = client_secret
        self.scopes = scopes
        self.session_seconds = session_seconds
        self.idle_seconds = idle_seconds  # 0: no idle timeout
        self.store = store  # the sessions (store/sessions_sql.py)
        self._secret = secret  # the server's signing secret, read when first needed
        self._key: OctKey | None = None
        self._now = now
        # ID tokens are for this client, not for the API (OIDC Core §2: aud).
        self._id_tokens = verifier.for_audience(client_id)

    def key(self) -> OctKey:
        if self._key is None:
            self._key = OctKey.import_key(self._secret())
        return self._key

    async def start(self, redirect_uri: str, then: str) -> tuple[str, str]:
        """The provider's authorization URL, and the flow cookie to set meanwhile."""
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)  # 64 characters: RFC 7636 §4.1 allows 43-128
        challenge = _b64(hashlib.sha256(verifier.encode()).digest())
        endpoint = (await self.verifier.provider.discovery())["authorization_endpoint"]
        query = urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": self.scopes,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        flow = {
            "state": state,
            "nonce": nonce,
            "verifier": verifier,
            "then": then,
            "exp": int(self._now()) + FLOW_SECONDS,
        }
        return f"{endpoint}?{query}", self._sign(flow)

    async def finish(
        self, flow_cookie: str, state: str, code: str, redirect_uri: str
    ) -> tuple[Session, str]:
        """The session of the person the provider sent back, and where they were going.
        Refused: a flow that is not this browser's, expired, or a code the provider
        does not honour."""
        flow = self._read(flow_cookie, "sign-in")
        if not secrets.compare_digest(str(flow.get("state", "")), state):
            raise Refused("The sign-in's state does not match this browser's: start again.")
        endpoint = (await self.verifier.provider.discovery())["token_endpoint"]
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
            try:
                reply = await http.post(
                    endpoint,
                    data={
                        "grant_type": "authorization_code",
                        "code": code,
                        "redirect_uri": redirect_uri,
                        "code_verifier": flow["verifier"],
                    },
                    auth=(self.client_id, self.client_secret),
                )
            except httpx.HTTPError as exc:
                raise ProviderUnavailable(f"{endpoint} could not be reached: {exc}") from None
        if reply.status_code != 200:
            raise Refused(f"The identity provider refused the sign-in: {_oauth_error(reply)}.")
        id_token = reply.json().get("id_token")
        if not isinstance(id_token, str):
            raise Refused("The identity provider answered without an ID token.")
        verified = await self._id_tokens.verify(id_token)
        if not secrets.compare_digest(str(verified.claims.get("nonce", "")), flow["nonce"]):
            raise Refused("The ID token's nonce is not this sign-in's: start again.")
        claims = verified.claims
        session = Session(
            subject=verified.subject,
            issuer=verified.issuer,
            name=str(claims.get("name") or claims.get("preferred_username") or verified.subject),
            groups=verified.groups,
            expires=int(self._now()) + self.session_seconds,
            csrf=secrets.token_urlsafe(24),
        )
        return session, str(flow.get("then") or "/")

    def open_session(self, session: Session, replacing: str | None) -> str:
        """Store ``session`` under a new random id and return the id, the cookie's
        value; the session the browser came with (``replacing``), if any, ends."""
        if replacing:
            self.end(replacing, "signed in again")
        cookie = secrets.token_urlsafe(32)
        now = int(self._now())
        self.store.add_session(
            UiSession(
                _digest(cookie),
                session.subject,
                session.issuer,
                session.name,
                session.groups,
                session.csrf,
                now,
                now,
                session.expires,
            )
        )
        return cookie

    def session_of(self, cookie: str) -> Session:
        """The live session a cookie names (its last use noted); Refused when there is
        none, or it was ended, is past its lifetime or was idle too long."""
        stored = self.store.ui_session(_digest(cookie))
        if stored is None:
            raise Refused("The session cookie is not one of this server's.")
        now = int(self._now())
        if stored.ended_at is not None:
            raise Refused(f"The session was ended ({stored.ended_by}): sign in again.")
        if now >= stored.expires_at:
            raise Refused("The session is over: sign in again.")
        if self.idle_seconds and now - stored.seen_at > self.idle_seconds:
            minutes = self.idle_seconds // 60
            raise Refused(f"The session was idle for over {minutes} minutes: sign in again.")
        if now - stored.seen_at >= TOUCH_SECONDS:
            self.store.touch_session(stored.digest, now)
        return Session(
            stored.subject,
            stored.issuer,
            stored.name,
            stored.groups,
            stored.expires_at,
            stored.csrf,
        )

    def end(self, cookie: str, why: str) -> None:
        """End the session a cookie names (signing out): on every process at once."""
        self.store.end_sessions(int(self._now()), why, digest=_digest(cookie))

    def _sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode({"alg": SESSION_ALG}, claims, self.key(), algorithms=[SESSION_ALG])

    def _read(self, text: str, what: str) -> dict[str, Any]:
        try:
            token = jwt.decode(text, self.key(), algorithms=[SESSION_ALG])
            jwt.JWTClaimsRegistry(now=lambda: int(self._now()), exp={"essential": True}).validate(
                token.claims
            )
        except errors.ExpiredTokenError:
            raise Refused(f"The {what} is over: sign in again.") from None
        except (errors.JoseError, ValueError):
            raise Refused(f"The {what} cookie is not one of this server's.") from None
        return dict(token.claims)


def _digest(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _oauth_error(reply: httpx.Response) -> str:
    """RFC 6749 §5.2's error and description, or the HTTP status."""
    try:
        body = reply.json()
        return str(body.get("error_description") or body.get("error"))
    except ValueError:
        return f"HTTP {reply.status_code}"
