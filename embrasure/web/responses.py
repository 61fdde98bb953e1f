"""JSON and RFC 9457 problem+json responses, serialised with orjson."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from embrasure.errors import Problem

PROBLEM_MEDIA_TYPE = "application/problem+json"


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


def problem_response(problem: Problem) -> Response:
    headers = dict(problem.headers)
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    return Response(
        orjson.dumps(problem.body()),
        problem.status,
        headers=headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


def store_unavailable(exc: Exception, retry_after: int) -> Response:
    """503: the store is down, or locked past its timeout; the request may succeed later."""
    return problem_response(
        Problem(503, "store-unavailable", "Store unavailable", str(exc), retry_after=retry_after)
    )


def log_unavailable(detail: str, retry_after: int) -> Response:
    """503: the delivery log could not commit; nothing was stored (DESIGN §2)."""
    return problem_response(
        Problem(503, "log-unavailable", "Delivery log unavailable", detail, retry_after=retry_after)
    )
