"""The web UI's sign-in routes (docs/security.md#signing-in-to-the-web-ui;
access/sign_in.py holds the protocol): ``/auth/login`` sends the browser to the identity
provider, ``/auth/callback`` takes it back and sets the session cookie, ``/auth/session``
tells the UI who is signed in (and the CSRF token its writes send), ``/auth/logout``
ends the session. Without --oidc-client-id they answer 404, but ``/auth/session``, which
says nobody is signed in."""

from __future__ import annotations

import logging
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from embrasure.access.jwt_bearer import ProviderUnavailable, Refused
from embrasure.access.sign_in import FLOW_SECONDS, Session, SignIn
from embrasure.errors import Problem
from embrasure.web.auth import CSRF_HEADER, SESSION_COOKIE, provider_unavailable, public
from embrasure.web.responses import json_response

log = logging.getLogger(__name__)

FLOW_COOKIE = "embrasure_sign_in"
CALLBACK = "/auth/callback"


def _configured(request: Request) -> SignIn:
    sign_in: SignIn | None = request.app.state.sign_in
    if sign_in is None:
        raise Problem(
            404,
            "sign-in-off",
            "Sign-in is not configured",
            "This server has no --oidc-client-id: use a bearer token.",
        )
    return sign_in


def _redirect_uri(request: Request) -> str:
    return str(request.url.replace(path=CALLBACK, query=""))


def _local(then: str | None) -> str:
    """Where to go after signing in: a path of this server's only (an absolute or
    scheme-relative URL would make this an open redirect)."""
    if not then or not then.startswith("/") or then.startswith("//") or "\\" in then:
        return "/"
    return then


def _cookie(request: Request, response: Response, name: str, value: str, seconds: int) -> None:
    # HttpOnly: no script reads it; SameSite=Lax: sent on the provider's top-level
    # redirect back, never on another site's POST; Secure whenever served over TLS.
    response.set_cookie(
        name,
        value,
        max_age=seconds,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )


@public
async def login(request: Request) -> Response:
    sign_in = _configured(request)
    then = _local(request.query_params.get("then"))
    try:
        where, flow = await sign_in.start(_redirect_uri(request), then)
    except ProviderUnavailable as exc:
        raise provider_unavailable("Sign-in cannot go on", exc) from None
    response = RedirectResponse(where, status_code=303)
    _cookie(request, response, FLOW_COOKIE, flow, FLOW_SECONDS)
    return response


@public
async def callback(request: Request) -> Response:
    sign_in = _configured(request)
    query = request.query_params
    if "error" in query:  # RFC 6749 §4.1.2.1: the provider (or the person) said no
        reason = query.get("error_description") or query["error"]
        raise Problem(401, "sign-in-refused", "Sign-in refused", f"The provider said: {reason}.")
    try:
        session, then = await sign_in.finish(
            request.cookies.get(FLOW_COOKIE, ""),
            query.get("state", ""),
            query.get("code", ""),
            _redirect_uri(request),
        )
    except Refused as exc:
        raise Problem(401, "sign-in-refused", "Sign-in refused", str(exc)) from None
    except ProviderUnavailable as exc:
        raise provider_unavailable("Sign-in cannot go on", exc) from None
    log.info(
        "%s signed in to the web UI",
        session.subject,
        extra={"subject": session.subject, "issuer": session.issuer},
    )
    # A new id at every sign-in (no fixation); the session the browser came with ends.
    cookie = await run_in_threadpool(
        sign_in.open_session, session, request.cookies.get(SESSION_COOKIE)
    )
    response = RedirectResponse(then, status_code=303)
    _cookie(request, response, SESSION_COOKIE, cookie, _left(session))
    response.delete_cookie(FLOW_COOKIE, path="/")
    return response


@public
async def session(request: Request) -> Response:
    """Who is signed in; 200 either way (the UI asks on every page load, and a 4xx would
    be a console error there), ``signed_in`` saying which."""
    sign_in: SignIn | None = request.app.state.sign_in
    cookie = request.cookies.get(SESSION_COOKIE)
    try:
        current = (
            await run_in_threadpool(sign_in.session_of, cookie)
            if sign_in is not None and cookie
            else None
        )
    except Refused:
        current = None
    if sign_in is None or current is None:
        return json_response(
            {"signed_in": False, "sign_in": "/auth/login" if sign_in is not None else None}
        )
    return json_response(
        {
            "signed_in": True,
            "sign_in": "/auth/login",
            "subject": current.subject,
            "name": current.name,
            "issuer": current.issuer,
            "groups": list(current.groups),
            "expires": current.expires,
            "csrf_token": current.csrf,  # sent back as X-CSRF-Token on the UI's writes
            "csrf_header": CSRF_HEADER,
        }
    )


@public
async def logout(request: Request) -> Response:
    sign_in = _configured(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        try:
            current = await run_in_threadpool(sign_in.session_of, cookie)
        except Refused:
            current = None  # over or not ours: nothing to protect, clear it anyway
        if current is not None and request.headers.get(CSRF_HEADER) != current.csrf:
            raise Problem(
                403, "csrf", "Missing CSRF token", f"Sign-out needs the {CSRF_HEADER} header."
            )
        if current is not None:  # ended in the store: a copy of the cookie is worth nothing
            await run_in_threadpool(sign_in.end, cookie, "signed out")
    response = json_response({"signed_out": True})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _left(session: Session) -> int:
    return max(0, session.expires - int(time.time()))


def routes() -> list[Route]:
    return [
        Route("/auth/login", login, methods=["GET"]),
        Route(CALLBACK, callback, methods=["GET"]),
        Route("/auth/session", session, methods=["GET"]),
        Route("/auth/logout", logout, methods=["POST"]),
    ]
