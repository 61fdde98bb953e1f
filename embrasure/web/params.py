"""Query parameters of the read API, parsed or refused with a 400 problem (RFC 9457).

Cursors are opaque to clients: the JSON text of a key the handler chose (the last row's sort
key, or an offset), so a listing pages in a stable order (docs/queries.md#conventions). Each
listing's key has one shape (``Cursor``), a regular expression over that JSON text which the
OpenAPI document states as the parameter's ``pattern`` and the handler checks: any cursor
that matches names a position in the listing's order, so the server answers every cursor the
document allows, and refuses (400) every other.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any, NamedTuple

import orjson
from starlette.requests import Request

from embrasure.errors import Problem
from embrasure.model import RUN_STATES
from embrasure.projector.times import parse_event_time


def bad(detail: str) -> Problem:
    return Problem(400, "bad-parameter", "Bad query parameter", detail)


def bad_body(detail: str) -> Problem:
    """A request body (not a query parameter) that is not what the route takes."""
    return Problem(400, "bad-body", "Bad request body", detail)


@functools.cache
def _declared() -> dict[tuple[str, str], frozenset[str]]:
    """(path template, method) → the query parameters the OpenAPI document declares: the
    one place that says what each read route takes."""
    from embrasure.web.openapi.document import document  # it imports this module

    declared = {}
    for path, item in document()["paths"].items():
        for method, operation in item.items():
            names = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "query"}
            declared[(path, method.upper())] = frozenset(names)
    return declared


def refuse_unknown(request: Request) -> None:
    """For a read (GET): a 400 naming every query parameter the route does not take, with
    the closest one it does: a mistyped ``asof`` silently ignored would answer with the
    current graph (docs/queries.md#conventions). Ingest is not refused for a parameter:
    a producer's event is kept whatever its client appends to the URL."""
    if request.method != "GET" or getattr(request.app.state, "foreign_api", False):
        return  # an API of another server's (marquez/http.py) takes what that server took
    route = request.scope.get("route")
    known = _declared().get((getattr(route, "path", ""), request.method))
    if known is None:
        return
    unknown = sorted(set(request.query_params) - known)
    if not unknown:
        return
    lowered = {k.lower(): k for k in known}
    hints = []
    for name in unknown:
        near = lowered.get(name.lower()) or next(
            iter(difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)), None
        )
        hints.append(f"{name} (did you mean {near}?)" if near else name)
    takes = ", ".join(sorted(known)) or "none"
    raise bad(f"unknown query parameter(s): {', '.join(hints)}; this route takes: {takes}")


def not_found(detail: str) -> Problem:
    return Problem(404, "not-found", "Not found", detail)


def integer(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad(f"{name}={raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise bad(f"{name} must be between {low} and {high}; got {value}")
    return value


def choice(request: Request, name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = request.query_params.get(name, default)
    if value not in allowed:
        raise bad(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


# Present but possibly empty: the projector stores a dataset or job whose namespace is ""
# (projector/validate.py: only the name must be non-empty), as openlineage-flink names a
# table of the default catalog (docs/producers/flink.md), so its lineage can be asked for.
MAY_BE_EMPTY = frozenset({"namespace"})


def required(request: Request, *names: str) -> list[str]:
    params = request.query_params
    missing = [n for n in names if n not in params or (not params[n] and n not in MAY_BE_EMPTY)]
    if missing:
        raise bad(f"missing query parameter(s): {', '.join(missing)}")
    return [params[n] for n in names]


# The read API's caps: items a page may ask for, edges a walk may go.
MAX_LIMIT = 1000
MAX_DEPTH = 20

# The parts of a cursor's JSON text. A whole number fits the 64-bit columns it is compared
# with. A string is JSON as orjson writes it: characters below U+0020, '"' and '\\'
# escaped, nothing else; its \\u escapes name neither a lone surrogate half nor U+0000,
# which no stored name holds (PostgreSQL text cannot) and no store could compare.
_WHOLE = r"(0|[1-9][0-9]{0,17})"
_HEX4 = (
    r"(000[1-9a-fA-F]|00[1-9a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}"
    r"|[1-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})"
)
_TEXT = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u' + _HEX4 + r')*"'


class Cursor(NamedTuple):
    """The shape of one listing's cursor: ``pattern`` matches exactly the cursors the
    listing can answer (an ECMA 262 and Python regular expression, anchored)."""

    pattern: str
    description: str


def _array(*parts: str) -> str:
    return r"\[" + ",".join(parts) + r"\]"


def _cursor(key: str, what: str) -> Cursor:
    return Cursor(f"^({key})?$", f"The `next_cursor` of the previous page ({what}).")


WHOLE_CURSOR = _cursor(_WHOLE, "a whole number")
WHOLE_PAIR_CURSOR = _cursor(_array(_WHOLE, _WHOLE), "a JSON array of two whole numbers")
TEXT_CURSOR = _cursor(_TEXT, "a JSON string")
TEXT_PAIR_CURSOR = _cursor(_array(_TEXT, _TEXT), "a JSON array of two strings")
TEXT_TRIPLE_CURSOR = _cursor(_array(_TEXT, _TEXT, _TEXT), "a JSON array of three strings")


def encode_cursor(key: Any) -> str:
    return orjson.dumps(key).decode()


def decode_cursor(request: Request, shape: Cursor) -> Any:
    """The key of ``cursor``; None when absent or empty (the first page)."""
    raw = request.query_params.get("cursor")
    if not raw:
        return None
    if re.fullmatch(shape.pattern, raw) is None:
        raise bad("cursor is not one this server handed out")
    return orjson.loads(raw)


def time_param(request: Request, name: str) -> str | None:
    """An RFC 3339 time parameter as the stored sort key (eventTime's own rules)."""
    value = request.query_params.get(name)
    if value is None:
        return None
    try:
        time, _warning = parse_event_time(value)
    except ValueError as exc:
        raise bad(f"{name}: {exc}".replace("eventTime", name, 1)) from None
    assert time is not None
    return time.key


def run_states(request: Request) -> set[str] | None:
    raw = request.query_params.get("states")
    if not raw:
        return None
    states = set(raw.split(","))
    if not states <= set(RUN_STATES):
        raise bad(f"states is a comma-separated list of {', '.join(RUN_STATES)}")
    return states


def json_object(body: bytes, shape: str) -> dict[str, Any]:
    """A request body that must be a JSON object (``shape`` shows one); 400 otherwise."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_body(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise bad_body(f"the body is a JSON object: {shape}")
    return doc


def entity_named(doc: dict[str, Any], key: str, kinds: tuple[str, ...]) -> tuple[str, str, str]:
    """(kind, namespace, name) of a body naming a dataset, a job or a namespace: its kind
    under ``key``, ``namespace``, and ``name`` ('' for a namespace); 400 otherwise."""
    kind, namespace, name = doc.get(key), doc.get("namespace"), doc.get("name")
    if kind not in kinds:
        raise bad_body(f"{key} must be one of {', '.join(kinds)}; got {kind!r}")
    if not isinstance(namespace, str) or not namespace:
        raise bad_body("namespace must be a non-empty string")
    if kind == "namespace":
        if name not in (None, ""):
            raise bad_body("a namespace is named by namespace alone; leave name out")
        return kind, namespace, ""
    if not isinstance(name, str) or not name:
        raise bad_body(f"name must be a non-empty string for a {kind}")
    return kind, namespace, name
