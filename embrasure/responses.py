"""JSON and RFC 9457 problem+json responses, serialised with orjson."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from .errors import Problem

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
