"""The OpenAPI 3.1 document of every route, served at /openapi.json, and the /docs page.

Kept as Python that builds a dict, not as a JSON or YAML file, because most of what it
states is already a constant in the code: the receiver's bounds (``Limits``, and the app's
own ones when a deployment or a test changes them), the read API's page and depth caps,
the run states, the mapping classes. Built from them, the document cannot drift from
them; mypy and ruff check it like the rest; and tests/web/test_openapi.py checks what is
not a constant (routes, handler-local defaults and bounds, response shapes) against the app.

The read API's operations are in paths.py, the schemas of the bodies in schemas.py. The
page at /docs is a small self-written HTML file (docs.html) that fetches /openapi.json and
renders it with plain JS: no CDN, nothing fetched from elsewhere, nothing vendored to keep
up to date.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, NamedTuple

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from embrasure import __version__
from embrasure.receiver.bounds import DEFAULT_PROVIDER_KEY, IDENTITY_ENCODING, Limits
from embrasure.web.auth import public, required_scopes
from embrasure.web.openapi.builders import (
    Schema,
    array,
    boolean,
    free_object,
    integer,
    nullable,
    obj,
    ref,
    string,
)
from embrasure.web.openapi.paths import (
    JSON,
    Operation,
    json_body,
    operation,
    problem,
    query,
    read_paths,
)
from embrasure.web.openapi.schemas import component_schemas
from embrasure.web.openapi.subscriptions import (
    subscription_paths,
    subscription_schemas,
)

# -- ingestion (docs/receiver.md) ------------------------------------------------------------------


def _ingest(limits: Limits, batch: bool, compat: bool) -> dict[str, Operation]:
    # What the receiver takes (202) is wider than a valid event: it stores first and
    # validates in the projector, quarantining what breaks a rule (docs/receiver.md-3). So the
    # body is any object (single) or any JSON value per item (batch), and the event's own
    # schema is one branch of it, there for the reader.
    event = {"anyOf": [ref("OpenLineageEvent"), free_object("Any other object: quarantined.")]}
    if batch:
        item = {
            "anyOf": [
                ref("OpenLineageEvent"),
                {"description": "Any other JSON value: quarantined."},
            ]
        }
        items: Schema = array(item, minItems=1, maxItems=limits.batch_events)
        schema: Schema = {
            "oneOf": [
                items,
                {"type": "object", "required": ["events"], "properties": {"events": items}},
            ]
        }
        what = (
            f"A bare JSON array of 1 to {limits.batch_events:,} events, or "
            '`{"events": [...]}`. An item that is not an object, or an event over a per-event '
            "bound, is kept and quarantined (`invalid_item_count`); the others go on."
        )
    else:
        schema = event
        what = "One event, a JSON object."
    bounds = (
        f"Bounds: body ≤ {limits.body_bytes:,} bytes (413); JSON nesting ≤ {limits.json_depth} "
        f"(400); per event, ≤ {limits.datasets_per_event:,} inputs + outputs, ≤ "
        f"{limits.values_per_event:,} JSON values and ≤ {limits.facet_bytes_per_event:,} bytes "
        "of facets (else the item is quarantined at the transport boundary). Duplicate object "
        "keys, bytes that are not UTF-8 or not JSON: 400."
    )
    parameters = [
        query(
            "provider_key",
            string(minLength=1, maxLength=limits.provider_key_chars, default=DEFAULT_PROVIDER_KEY),
            "The producer or integration sending the delivery: scopes the Idempotency-Key, "
            "is stored with the delivery and filters delivery listings.",
        ),
        {
            "name": "Idempotency-Key",
            "in": "header",
            "description": "Identifies the delivery: the same key and body again is a "
            "duplicate; the same key with another body, 409. Absent: the body's SHA-256.",
            "schema": string(minLength=1, maxLength=limits.idempotency_key_chars),
        },
        {
            "name": "Content-Encoding",
            "in": "header",
            "description": "`identity` (any case) or empty; absent means identity. "
            "Compressed bodies are refused (415): turn compression off in the producer's "
            "transport.",
            "schema": string(pattern=IDENTITY_ENCODING),
        },
    ]
    route = "batch" if batch else "event"
    path = "/api/v1/openlineage/lineage" if compat else "/api/v1/lineage"
    return {
        "post": operation(
            f"ingest{route.title()}{'OpenLineage' if compat else ''}",
            "ingest",
            f"Ingest {'a batch of OpenLineage events' if batch else 'one OpenLineage event'}",
            (
                f"The same route as `{path}{'/batch' if batch else ''}`, for producers configured "
                "for other catalogs. "
                if compat
                else ""
            )
            + f"{what} Answered once the delivery is durable. Content-Type: application/json "
            f"(or any `+json` type; charset utf-8 only, else 415). {bounds}",
            parameters,
            {
                "202": json_body("Receipt", "Stored durably (or already stored: `duplicate`)."),
                "400": problem(
                    "Not JSON, not UTF-8, a duplicate key, too deep, the wrong shape, a batch "
                    "size or a key length out of bounds. Nothing stored."
                ),
                "408": problem("The body did not arrive within the body timeout. Nothing stored."),
                "409": problem("The Idempotency-Key names a delivery with another body."),
                "413": problem("The body is over the size limit. Nothing stored."),
                "415": problem("Compressed, not JSON, or not UTF-8 per Content-Type."),
                "429": problem(
                    "Overloaded: the projection backlog, free disk or the bodies held in "
                    "memory are past their bound. Nothing stored.",
                    retry_after=True,
                ),
                "503": problem("The log cannot commit: nothing acknowledged.", retry_after=True),
            },
            request_body={"required": True, "content": {JSON: {"schema": schema}}},
        )
    }


def _service() -> dict[str, dict[str, Operation]]:
    html = {"text/html": {"schema": string()}}
    text = {"text/plain": {"schema": string()}}
    return {
        "/healthz": {
            "get": operation(
                "healthz",
                "service",
                "Liveness",
                "The process answers.",
                [],
                {"200": json_body("Health", "Up.")},
            )
        },
        "/metrics": {
            "get": operation(
                "metrics",
                "service",
                "Prometheus metrics",
                "Prometheus text format, names prefixed `embrasure_`: deliveries by state, "
                "items by outcome, projection backlog and lag, free disk (read from the "
                "database at scrape time), and this process's request latency histograms "
                "by method, route and status.",
                [],
                {"200": {"description": "Text exposition format 0.0.4.", "content": text}},
            )
        },
        "/readyz": {
            "get": operation(
                "readyz",
                "service",
                "Readiness",
                "The store is reachable.",
                [],
                {
                    "200": json_body("Ready", "Ready."),
                    "503": problem(
                        "The store is not reachable, ingest is refused for overload (the"
                        " problem's `ingest` member holds the load measured), or under"
                        " `serve` a read process has not started serving (its `starting`"
                        " member names them).",
                        retry_after=True,
                    ),
                },
            )
        },
        "/openapi.json": {
            "get": operation(
                "openapi",
                "service",
                "This document",
                "OpenAPI 3.1.",
                [],
                {
                    "200": {
                        "description": "The document.",
                        "content": {JSON: {"schema": {"type": "object"}}},
                    }
                },
            )
        },
        "/docs": {
            "get": operation(
                "docs",
                "service",
                "This document as a page",
                "Renders /openapi.json.",
                [],
                {"200": {"description": "An HTML page.", "content": html}},
            )
        },
        **_sign_in(),
        "/": {
            "get": operation(
                "webUi",
                "service",
                "The web UI",
                "A lineage explorer over this API (docs/ui.md); its scripts, styles and "
                "vendored graph libraries are under /ui/static/.",
                [],
                {"200": {"description": "An HTML page.", "content": html}},
            )
        },
    }


def _sign_in() -> dict[str, dict[str, Operation]]:
    """docs/security.md#signing-in-to-the-web-ui; each answers 404 without
    --oidc-client-id."""
    off = problem("Sign-in is not configured (no --oidc-client-id).")
    down = problem("The identity provider cannot be reached.", retry_after=True)
    redirect = {"description": "To the identity provider, or back to the UI."}
    refused = problem("The sign-in was refused: the provider said no, or the flow is stale.")
    then = query("then", string(), "Where to go after signing in: a path of this server.")
    code = query("code", string(), "The provider's authorization code (RFC 6749 §4.1.2).")
    state = query("state", string(), "The flow's state, as sent.")
    error = query("error", string(), "The provider's refusal (RFC 6749 §4.1.2.1).")
    described = query("error_description", string(), "Its description.")
    session = obj(
        "Whether someone is signed in (200 either way); if so who, and the CSRF token"
        " their writes send in X-CSRF-Token.",
        {
            "signed_in": boolean(),
            "sign_in": nullable(string("Where to sign in; null: sign-in is off.")),
        },
        {
            "subject": string(),
            "name": string(),
            "issuer": string(),
            "groups": array(string()),
            "expires": integer("Seconds since the epoch.", minimum=0),
            "csrf_token": string(),
            "csrf_header": string(),
        },
    )
    return {
        "/auth/login": {
            "get": operation(
                "signIn",
                "service",
                "Sign in to the web UI",
                "Redirects to the identity provider (authorization code flow with PKCE).",
                [then],
                {"303": redirect, "404": off, "503": down},
            )
        },
        "/auth/callback": {
            "get": operation(
                "signInCallback",
                "service",
                "Where the identity provider sends the browser back",
                "Sets the session cookie (HttpOnly, SameSite=Lax) and redirects to the UI.",
                [code, state, error, described],
                {"303": redirect, "401": refused, "404": off, "503": down},
            )
        },
        "/auth/session": {
            "get": operation(
                "signedIn",
                "service",
                "Who is signed in",
                "The session of the cookie, with its CSRF token; `signed_in: false` when"
                " there is none (or sign-in is off).",
                [],
                {"200": {"description": "The answer.", "content": {JSON: {"schema": session}}}},
            )
        },
        "/auth/logout": {
            "post": operation(
                "signOut",
                "service",
                "Sign out of the web UI",
                "Ends the session cookie (needs the session's X-CSRF-Token).",
                [],
                {
                    "200": {
                        "description": "Signed out.",
                        "content": {JSON: {"schema": obj("Done.", {"signed_out": boolean()})}},
                    },
                    "403": problem("The X-CSRF-Token header is missing or wrong."),
                    "404": off,
                },
            )
        },
    }


class Needs(NamedTuple):
    """What a route declared (auth.requires/public): any one of ``scopes`` suffices
    (none: open to all), on every namespace when ``everywhere``, else within the
    namespaces granted (docs/security.md#grants)."""

    scopes: tuple[str, ...]
    everywhere: bool = False


Scopes = Mapping[tuple[str, str], Needs]


def route_scopes(routes: Iterable[BaseRoute]) -> dict[tuple[str, str], Needs]:
    """(METHOD, path) → what each served route declared."""
    found: dict[tuple[str, str], Needs] = {}
    for route in routes:
        if isinstance(route, Route):
            for method in route.methods or ():
                if method != "HEAD":
                    found[method, route.path] = Needs(
                        required_scopes(route.endpoint),
                        getattr(route.endpoint, "everywhere", False),
                    )
    return found


def _secure(paths: dict[str, dict[str, Operation]], scopes: Scopes) -> None:
    """Each operation's bearer-token scope (OpenAPI 3.1 lets a non-OAuth scheme list
    roles), and its 401/403 answers (RFC 6750)."""
    for path, item in paths.items():
        for method, op in item.items():
            needed, everywhere = scopes.get((method.upper(), path), Needs(()))
            if not needed:
                op["security"] = []
                continue
            # OpenAPI: the requirements listed are alternatives, any one suffices.
            op["security"] = [{"bearer": [scope]} for scope in needed]
            # Where the scope must hold: on every namespace ("all": admin actions, the
            # delivery log), or on some, the answer then kept within them ("granted").
            everywhere = everywhere or needed == ("admin",)
            op["x-namespaces"] = "all" if everywhere else "granted"
            op["responses"]["401"] = problem("No valid bearer token (once auth is on).")
            which = " or ".join(f"`{scope}`" for scope in needed)
            on = " on every namespace (`*`)" if everywhere else " on any namespace"
            op["responses"]["403"] = problem(f"The token lacks scope {which}{on}.")


def document(limits: Limits | None = None, scopes: Scopes | None = None) -> dict[str, Any]:
    """The OpenAPI document, stating the receiver bounds of ``limits`` and, with
    ``scopes`` (route_scopes of the app), what token each operation needs."""
    limits = limits or Limits()
    paths: dict[str, dict[str, Operation]] = {}
    for compat in (False, True):
        prefix = "/api/v1/openlineage" if compat else "/api/v1"
        paths[f"{prefix}/lineage"] = _ingest(limits, batch=False, compat=compat)
        paths[f"{prefix}/lineage/batch"] = _ingest(limits, batch=True, compat=compat)
    for path, item in (read_paths() | subscription_paths() | _service()).items():
        # POST /api/v1/lineage ingests, GET reads: one path item with both methods.
        paths.setdefault(path, {}).update(item)
    if scopes is not None:
        _secure(paths, scopes)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Embrasure",
            "version": __version__,
            "summary": "A lineage server for OpenLineage.",
            "description": (
                "Producers POST OpenLineage events; a 202 means the delivery is durable. "
                "Events are validated and projected asynchronously into a lineage graph, "
                "read through the routes below. Entities are named by query parameters "
                "(`namespace`, `name`, `field`), since namespaces hold colons and slashes. "
                "Every error is `application/problem+json` (RFC 9457)."
            ),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "ingest", "description": "Receive OpenLineage events."},
            {"name": "deliveries", "description": "Receipts, outcomes and quarantine."},
            {"name": "graph", "description": "Lineage, column lineage, impact, export."},
            {"name": "entities", "description": "Runs, datasets, jobs, search, raw events."},
            {"name": "admin", "description": "Hide and unhide datasets, jobs, namespaces."},
            {"name": "notifications", "description": "Subscriptions to notifications."},
            {"name": "service", "description": "Health and this documentation."},
        ],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": component_schemas() | subscription_schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token from `embrasure tokens create` (docs/security.md):"
                    " needed once any token exists. Scopes: ingest, read, subscriptions, admin"
                    " (all).",
                }
            },
        },
    }


def routes(limits: Limits | None, served: list[BaseRoute]) -> list[Route]:
    """GET /openapi.json and GET /docs, documenting ``served`` and themselves. The
    document is serialised once per app."""
    own = {("GET", "/openapi.json"): Needs(()), ("GET", "/docs"): Needs(())}
    body = orjson.dumps(document(limits, route_scopes(served) | own))
    page = resources.files(__package__).joinpath("docs.html").read_bytes()

    async def openapi_json(request: Request) -> Response:
        return Response(body, media_type=JSON)

    async def docs(request: Request) -> Response:
        return HTMLResponse(page)

    return [
        Route("/openapi.json", public(openapi_json), methods=["GET"]),
        Route("/docs", public(docs), methods=["GET"]),
    ]
