"""Query parameters of the read API, parsed or refused with a 400 problem (RFC 9457).

Cursors are opaque to clients: base64url of a JSON key the handler chose (the last
row's sort key, or an offset), so a listing pages in a stable order (DESIGN §5).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from starlette.requests import Request

from embrasure.errors import Problem
from embrasure.model import RUN_STATES
from embrasure.projector.times import parse_event_time


def bad(detail: str) -> Problem:
    return Problem(400, "bad-parameter", "Bad query parameter", detail)


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


def required(request: Request, *names: str) -> list[str]:
    missing = [n for n in names if not request.query_params.get(n)]
    if missing:
        raise bad(f"missing query parameter(s): {', '.join(missing)}")
    return [request.query_params[n] for n in names]


def encode_cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(key)).decode().rstrip("=")


def decode_cursor(request: Request) -> Any:
    raw = request.query_params.get("cursor")
    if not raw:
        return None
    try:
        return orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        raise bad("cursor is not one this server handed out") from None


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
