"""Marquez's own OpenAPI document, with the corrections its known faults need
(tests/marquez_openapi.py, each with its reason), run with schemathesis against the Marquez
port (docs/marquez.md#clients): every GET operation it describes, called with inputs
generated from it, valid and invalid, and with the requests of every namespace, dataset,
job and run the demo platform holds, answers without a 5xx, with a status the document
lists, a body its schema accepts and a content type it names.

bench/peers/marquez_spec.py runs the same against Marquez 0.50.0 itself, over the same
events: what fails there too is the document's (a correction), not the port's. Its write
routes (deprecated before 0.50, docs/marquez.md) are not served by the port.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.settings import Settings

from conftest import demo_graph
from marquez_openapi import corrected, known_requests

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.content_type_conformance,
]

# A graph to answer about (the demo platform), made at import: schemathesis parametrizes
# over the document's operations when the module is collected.
_DB, _STORE = demo_graph("embrasure-marquez-spec-")
PORT = build_app(Settings(db=_DB), _STORE).state.marquez

schema = schemathesis.openapi.from_dict(corrected()).include(method="GET")
schema.app = PORT
# schemathesis 4.32.5's coverage phase fails on this document before any call (a
# TypeError in its request deduplication); the examples and fuzzing phases run.
schema.config.phases.coverage.enabled = False


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_operation_of_marquez_s_spec_fails_the_port(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate(checks=CHECKS)


def _known() -> list[tuple[str, dict[str, str], dict[str, str]]]:
    with TestClient(PORT, base_url="http://testserver/api/v1") as client:
        return known_requests(client)


@pytest.mark.parametrize(("path", "path_parameters", "query"), _known())
def test_what_the_demo_holds_answers_as_marquez_s_spec_says(
    path: str, path_parameters: dict[str, str], query: dict[str, str]
) -> None:
    operation = schema[path]["GET"]
    case = operation.Case(path_parameters=path_parameters, query=query)
    response = case.call_and_validate(checks=CHECKS)
    if response.status_code == 404 and path == "/column-lineage":
        # A dataset without fields (the demo's raw orders): Marquez's ColumnLineageService
        # answers this 404 too.
        assert response.json() == {"code": 404, "message": "Could not find node"}
    else:
        assert response.status_code == 200, response.text
