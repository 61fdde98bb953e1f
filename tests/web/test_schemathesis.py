"""schemathesis against /openapi.json (issue 7): every operation called with inputs
generated from its own description, with auth on and every check schemathesis has — no
5xx; every answer (status, content type, headers, body) is one the document declares;
every request the document allows is answered (no 400), every one it does not is refused;
and, walking the document's links from one answer to the next request, what one call
created the next can read.

The same as a live server would get from the CLI (the lead's check):
``embrasure tokens create --scope admin``, ``embrasure serve``, then
``schemathesis run http://HOST:PORT/openapi.json --checks all -H "Authorization: Bearer T"``.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

from embrasure.app import build_app
from embrasure.model import Token
from embrasure.settings import Settings
from embrasure.web import auth

from conftest import demo_graph

# The app is built at import: schemathesis parametrizes over the operations of the
# document the app serves. A graph to answer about: the demo platform.
_DB, _STORE = demo_graph("embrasure-schemathesis-")
# Auth on, as a deployment runs: schemathesis checks that calls without the token, or
# with a wrong one, are refused (401) where the document says a scope is needed.
_ID, TOKEN = auth.new_token()
_STORE.add_token(Token(_ID, auth.digest(TOKEN), frozenset(["admin"]), None, "st", "t", None))
# Where webhooks may go depends on the deployment (notify/targets.py: what a name resolves
# to, --webhook-allow), which no schema can state: here every network is allowed, as
# `--webhook-allow 0.0.0.0/0 --webhook-allow ::/0` would, so a schema-valid URL is taken.
APP = build_app(Settings(db=_DB, webhook_allow="0.0.0.0/0\n::/0"), _STORE)

schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.auth()
class Bearer:
    """The token, as the CLI's -H gives it: schemathesis knows the header is auth, so
    its auth checks send the request without it, or with a wrong one, and expect 401."""

    def get(self, case: schemathesis.Case[Any], context: Any) -> str:
        return TOKEN

    def set(self, case: schemathesis.Case[Any], data: str, context: Any) -> None:
        case.headers["Authorization"] = f"Bearer {data}"


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_operation_answers_as_documented(case: schemathesis.Case[Any]) -> None:
    # Every check, none excluded: schema-valid and schema-violating inputs both (the
    # default generation modes), so the document says exactly what the server accepts.
    case.call_and_validate()


class Links(schema.as_state_machine()):  # type: ignore[misc]
    """Sequences of calls along the links schemathesis infers from the document (a
    receipt's delivery_id to GET the delivery, say), every check after each call."""


test_linked_calls_answer_as_documented = Links.TestCase
test_linked_calls_answer_as_documented.settings = settings(
    max_examples=30,
    stateful_step_count=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
