"""docs/queries.md: the OpenAPI document at /openapi.json (and its page at /docs) matches the app.

- Every route the app serves is in the document with the same methods, and every
  documented path is served: a new route without documentation fails here.
- The document is valid OpenAPI 3.1 (openapi-spec-validator).
- Real responses validate against the documented schemas, with every documented object
  closed, so an undocumented key fails too; and every operation's success response is
  exercised at least once.
- The documented parameter bounds and enums are the ones the handlers enforce.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import jsonschema_rs
import orjson
import pytest
from openapi_spec_validator import validate as validate_spec
from starlette.routing import BaseRoute, Mount, Route
from starlette.testclient import TestClient

from embrasure.receiver.bounds import Limits
from embrasure.web.openapi.document import Needs, document, route_scopes

from conftest import make_client
from graph_api import (
    AIRFLOW,
    DBT,
    Api,
    at,
    column_lineage,
    dataset_event,
    ds,
    facet,
    input_field,
    job_event,
    run_event,
    run_id,
    schema,
    symlinks,
)

METHODS = {"get", "put", "post", "delete", "patch", "options", "head", "trace"}
ORDERS = ("postgres://db:5432", "public.orders")
REPORT = ("postgres://db:5432", "analytics.report")
DASHBOARD = ("postgres://db:5432", "analytics.dashboard")
LAKE, TABLE = ("s3://lake", "raw/orders"), ("hive://metastore", "sales.orders")
MASKED, IDENTITY, JOIN = (
    ("DIRECT", "TRANSFORMATION", True),
    ("DIRECT", "IDENTITY", False),
    ("INDIRECT", "JOIN", False),
)


# -- the routes ---------------------------------------------------------------------------------


def served_routes(routes: Iterable[BaseRoute], prefix: str = "") -> dict[str, set[str]]:
    """{path: methods} of every HTTP route, mounted sub-routes included; path converters
    (``{index:int}``) written as OpenAPI writes them (``{index}``)."""
    served: dict[str, set[str]] = {}
    for route in routes:
        if isinstance(route, Mount):
            for path, methods in served_routes(route.routes, prefix + route.path).items():
                served.setdefault(path, set()).update(methods)
        elif isinstance(route, Route):
            path = re.sub(r"\{(\w+):\w+\}", r"{\1}", prefix + route.path)
            # Starlette answers HEAD for every GET route by itself.
            served.setdefault(path, set()).update((route.methods or set()) - {"HEAD"})
        else:
            raise AssertionError(f"a route the document cannot describe: {route!r}")
    return served


def documented_routes(doc: dict[str, Any]) -> dict[str, set[str]]:
    return {path: {m.upper() for m in item if m in METHODS} for path, item in doc["paths"].items()}


def test_every_route_is_documented_and_every_documented_route_is_served(
    client: TestClient,
) -> None:
    served = served_routes(client.app.routes)  # type: ignore[attr-defined]
    documented = documented_routes(document())
    assert served == documented
    assert {"/openapi.json", "/docs", "/healthz", "/readyz"} <= set(served)


def test_each_operation_states_the_scope_its_route_asks_for(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    scopes = route_scopes(client.app.routes)  # type: ignore[attr-defined]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, item in doc["paths"].items():
        for method, op in item.items():
            needed, everywhere = scopes.get((method.upper(), path), Needs(()))
            if not needed:
                assert op["security"] == [], (method, path)
                continue
            assert op["security"] == [{"bearer": [scope]} for scope in needed], (method, path)
            assert {"401", "403"} <= set(op["responses"]), (method, path)
            # docs/security.md#grants: admin actions and the log's views need their scope
            # on every namespace; the rest answer within the namespaces granted.
            reach = "all" if everywhere or needed == ("admin",) else "granted"
            assert op["x-namespaces"] == reach, (method, path)
    log_views = {"/api/v1/deliveries", "/api/v1/quarantine", "/api/v1/events", "/metrics"}
    assert all(doc["paths"][p]["get"]["x-namespaces"] == "all" for p in log_views)
    assert doc["paths"]["/api/v1/lineage"]["get"]["x-namespaces"] == "granted"


# -- the document -------------------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = document()
    validate_spec(doc)  # raises on the first error
    assert doc["openapi"].startswith("3.1.")
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_openapi_json_serves_the_document_with_the_apps_limits(
    client: TestClient, tmp_path: Any
) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    scopes = route_scopes(client.app.routes)  # type: ignore[attr-defined]
    assert r.json() == orjson.loads(orjson.dumps(document(scopes=scopes)))
    # The receiver bounds it states are the app's own (a deployment's or a test's).
    small = Limits(batch_events=10, provider_key_chars=20)
    with make_client(tmp_path / "small.db", small) as other:
        doc = other.get("/openapi.json").json()
    other.app.state.store.close()  # type: ignore[attr-defined]
    batch = doc["paths"]["/api/v1/lineage/batch"]["post"]
    items = batch["requestBody"]["content"]["application/json"]["schema"]["oneOf"][0]
    assert items["maxItems"] == 10
    (provider,) = [p for p in batch["parameters"] if p["name"] == "provider_key"]
    assert provider["schema"]["maxLength"] == 20


def test_docs_page_renders_the_document_without_network(client: TestClient) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "openapi.json" in page and "fetch(" in page
    # Nothing loaded from elsewhere: no script, style or image from another origin.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.IGNORECASE)
    assert "@import" not in page and len(page) < 20_000


# -- checking responses against the document ---------------------------------------------------


def closed(schema: Any) -> Any:
    """``schema`` with every object that lists properties closed to other keys, unless it
    says otherwise (facets, raw events, RFC 9457 extensions)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


# The web UI's sign-in needs an identity provider: tests/ui/test_sign_in.py drives it
# through one, checking its answers against this document. (/auth/session answers
# without one: nobody is signed in.)
SIGN_IN = ("/auth/login", "/auth/callback", "/auth/logout")


class Contract:
    """Calls the app and checks each answer (and each JSON request body) against the
    document; remembers which (path, method, status) it checked."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.doc = document(scopes=route_scopes(client.app.routes))  # type: ignore[attr-defined]
        self.components = closed(self.doc["components"])
        self.checked: set[tuple[str, str, str]] = set()
        # Literal paths before templates, so /api/v1/deliveries is not {delivery_id}.
        self.templates: list[str] = sorted(self.doc["paths"], key=lambda p: ("{" in p, p))

    def template(self, path: str) -> str:
        for template in self.templates:
            if re.fullmatch(re.sub(r"\{\w+\}", "[^/]+", template), path):
                return template
        raise AssertionError(f"{path} is not a documented path")

    def errors(self, schema: dict[str, Any], instance: Any) -> list[str]:
        wrapper = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.components,  # where "#/components/schemas/…" resolve
            **closed(schema),
        }
        validator = jsonschema_rs.validator_for(wrapper, validate_formats=True)
        return [f"{e.instance_path}: {e.message}" for e in validator.iter_errors(instance)]

    def call(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: Any = None,
        valid_body: bool = True,
        **params: Any,
    ) -> Any:
        """``valid_body`` False: a body outside the request schema, sent on purpose."""
        template = self.template(path)
        op = self.doc["paths"][template][method.lower()]
        kwargs: dict[str, Any] = {"params": params}
        if body is not None:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            assert (not self.errors(schema, body)) == valid_body, self.errors(schema, body)
            kwargs |= {
                "content": orjson.dumps(body),
                "headers": {"Content-Type": "application/json"},
            }
        r = self.client.request(method, path, **kwargs)
        assert r.status_code == status, r.text
        code = str(status)
        assert code in op["responses"], f"{method} {template}: {status} is not documented"
        if "content" not in op["responses"][code]:  # documented without a body (a 204)
            assert r.content == b""
            self.checked.add((template, method.lower(), code))
            return None
        media = r.headers["content-type"].split(";")[0].strip()
        content = op["responses"][code]["content"]
        assert media in content, f"{method} {template} {status}: {media} is not documented"
        self.checked.add((template, method.lower(), code))
        if media in ("text/html", "text/plain"):
            return r.text
        doc = r.json()
        errors = self.errors(content[media]["schema"], doc)
        assert not errors, f"{method} {path} {status}: {errors}"
        return doc


@pytest.fixture
def contract(client: TestClient) -> Contract:
    return Contract(client)


def platform_events() -> list[Any]:
    """A small platform touching every response field: aliases, versions, parent runs,
    services, masked and indirect column lineage, a failed run with its error."""
    parent = facet(
        "ParentRunFacet",
        "1-1-0",
        AIRFLOW,
        run={"runId": run_id(1)},
        job={"namespace": "airflow", "name": "etl"},
        root={"run": {"runId": run_id(1)}, "job": {"namespace": "airflow", "name": "etl"}},
    )
    error = facet(
        "ErrorMessageRunFacet", "1-0-1", message="division by zero", programmingLanguage="python"
    )
    lineage = column_lineage(
        {
            "total": [input_field(ORDERS, "amount", IDENTITY), input_field(ORDERS, "id", JOIN)],
            "email": [input_field(ORDERS, "email", MASKED)],
        }
    )
    return [
        run_event("START", "etl", run_id(1), at(8), namespace="airflow", producer=AIRFLOW),
        run_event(
            "COMPLETE",
            "etl.report",
            run_id(2),
            at(9),
            inputs=[{**ds(*ORDERS, schema=schema("id", "amount", "email")), "version": "v7"}],
            outputs=[ds(*REPORT, columnLineage=lineage, schema=schema("total"))],
            run_facets={"parent": parent},
            namespace="airflow",
            producer=AIRFLOW,
        ),
        run_event(
            "FAIL",
            "etl.report",
            run_id(3),
            at(10),
            run_facets={"errorMessage": error, "parent": parent},
            namespace="airflow",
            producer=AIRFLOW,
        ),
        job_event("dashboard", at(11), inputs=[ds(*REPORT)], outputs=[ds(*DASHBOARD)]),
        job_event("superset", at(12), inputs=[ds(*DASHBOARD)], namespace="bi", producer=DBT),
        run_event(
            "COMPLETE",
            "load",
            run_id(4),
            at(7),
            outputs=[
                ds(
                    *LAKE,
                    symlinks=symlinks((*TABLE, "TABLE"), ("s3://archive", "orders", "LOCATION")),
                )
            ],
        ),
        dataset_event(ds(*TABLE, schema=schema("order_id")), at(13)),
        # What each run did: statistics and a schema change on a write, a failed check.
        run_event(
            "COMPLETE",
            "etl.report",
            run_id(5),
            at(9, 30),
            outputs=[
                {
                    **ds(*REPORT, schema=schema("total", "email")),
                    "outputFacets": {
                        "outputStatistics": facet(
                            "OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=12, size=4096
                        )
                    },
                }
            ],
            namespace="airflow",
            producer=AIRFLOW,
        ),
        run_event(
            "COMPLETE",
            "report_checks",
            run_id(6),
            at(9, 45),
            inputs=[
                {
                    **ds(*REPORT),
                    "inputFacets": {
                        "dataQualityAssertions": facet(
                            "DataQualityAssertionsDatasetFacet",
                            "1-1-0",
                            assertions=[
                                {"assertion": "not_null", "success": False, "column": "email"},
                                {"assertion": "row_count", "success": True},
                            ],
                        )
                    },
                }
            ],
            producer=DBT,
        ),
    ]


def test_real_responses_match_the_documented_schemas(contract: Contract) -> None:
    api, call = Api(contract.client), contract.call
    bad_run = run_event("COMPLETE", "etl", "not-a-uuid", at(9), namespace="airflow")
    # 7 is not an event, and the document says so: any JSON value is a batch item, kept
    # and quarantined when it is not an event (docs/receiver.md).
    body = [*platform_events(), bad_run, 7]
    receipt = call("POST", "/api/v1/lineage/batch", 202, body)
    assert receipt["invalid_item_count"] == 1
    single = call("POST", "/api/v1/lineage", 202, platform_events()[0])
    assert single["duplicate"] is False
    call("POST", "/api/v1/openlineage/lineage", 202, platform_events()[1])
    call("POST", "/api/v1/openlineage/lineage/batch", 202, {"events": platform_events()[2:4]})
    pending = call("GET", f"/api/v1/deliveries/{receipt['delivery_id']}")
    assert pending["state"] == "accepted"
    api.project()

    delivery = call("GET", f"/api/v1/deliveries/{receipt['delivery_id']}")
    assert delivery["state"] == "partially_projected"
    call("GET", "/api/v1/deliveries", provider_key="default", limit=2)
    quarantine = call("GET", "/api/v1/quarantine", limit=1)
    assert quarantine["items"] and quarantine["next_cursor"]
    call("GET", "/api/v1/quarantine", cursor=quarantine["next_cursor"])
    index = next(
        i["index"]
        for i in delivery["items"]
        if i["kind"] == "RunEvent" and i["outcome"] == "quarantined"
    )
    replayed = call("POST", f"/api/v1/quarantine/{receipt['delivery_id']}/{index}/replay")
    assert replayed["outcome"] == "quarantined"

    graph = call("GET", "/api/v1/lineage", namespace=REPORT[0], name=REPORT[1], states="COMPLETE")
    assert graph["edges"]
    call("GET", "/api/v1/lineage", namespace=REPORT[0], name=REPORT[1], asOf=at(9, 30))
    call("GET", "/api/v1/lineage", type="service", namespace="bi", name="superset")
    call("GET", "/api/v1/lineage", namespace=TABLE[0], name=TABLE[1], limit=1)
    columns = call(
        "GET", "/api/v1/column-lineage", namespace=REPORT[0], name=REPORT[1], field="total"
    )
    assert {e["kind"] for e in columns["edges"]} == {"mapping", "indirect"}
    impact = call("GET", "/api/v1/impact", namespace=ORDERS[0], name=ORDERS[1])
    assert any(item["masked"] for item in impact["items"])
    call("GET", "/api/v1/impact", namespace=ORDERS[0], name=ORDERS[1], field="email", limit=1)

    run = call("GET", f"/api/v1/runs/{run_id(2)}")
    assert run["parent"]["root"] and run["inputs"][0]["version"] == "v7"
    siblings = call("GET", f"/api/v1/runs/{run['parent']['runId']}/children", limit=1)
    assert siblings["runs"][0]["parent"]["runId"] == run["parent"]["runId"]
    assert call("GET", f"/api/v1/runs/{run_id(3)}")["error_message"] == "division by zero"
    call("GET", "/api/v1/runs", namespace="airflow", name="etl.report", limit=1)
    writers = call("GET", "/api/v1/runs", type="dataset", namespace=REPORT[0], name=REPORT[1])
    assert writers["runs"]
    used = call("GET", "/api/v1/datasets/runs", namespace=REPORT[0], name=REPORT[1])["runs"]
    assert used[0]["assertions"]["failures"] == [{"assertion": "not_null", "column": "email"}]
    assert used[1]["statistics"] == {"rowCount": 12, "size": 4096} and used[1]["schema_change"]
    page = call("GET", "/api/v1/datasets/runs", namespace=REPORT[0], name=REPORT[1], limit=1)
    call(
        "GET",
        "/api/v1/datasets/runs",
        namespace=REPORT[0],
        name=REPORT[1],
        role="output",
        cursor=page["next_cursor"],
    )
    downstream = call("GET", "/api/v1/lineage", namespace=ORDERS[0], name=ORDERS[1])
    assert {n.get("quality") for n in downstream["nodes"]} == {None, "failed"}
    overview = call("GET", "/api/v1/overview", runs=3)
    assert overview["items"]["quarantined"] and len(overview["recent_runs"]) == 3
    dataset = call("GET", "/api/v1/datasets", namespace=LAKE[0], name=LAKE[1])["datasets"][0]
    assert dataset["aliases"] and dataset["locations"] and dataset["fields"] == ["order_id"]
    call("GET", "/api/v1/datasets", q="orders", limit=1)
    jobs = call("GET", "/api/v1/jobs", namespace="airflow")["jobs"]
    assert any(j["parent_job"] for j in jobs) and all(j["latest_run"] for j in jobs)
    assert call("GET", "/api/v1/jobs", namespace="bi", name="superset")["jobs"][0]["type"] == (
        "service"
    )
    call("GET", "/api/v1/namespaces", limit=2)
    assert any("alias" in r for r in call("GET", "/api/v1/search", q="orders")["results"])
    assert call("GET", "/api/v1/search", q="amount")["results"][0]["match"] == "exact"
    events = call("GET", "/api/v1/events", after=at(8), before=at(12), limit=2)
    assert events["next_cursor"]
    export = call("GET", "/api/v1/export")
    assert all(export[k] for k in export)
    hide = {"type": "dataset", "namespace": ORDERS[0], "name": ORDERS[1], "reason": "test"}
    assert call("POST", "/api/v1/admin/hide", 202, hide)["entries"]
    api.project()
    assert call("GET", "/api/v1/admin/hidden")["hidden"][0]["reason"] == "test"
    call("POST", "/api/v1/admin/unhide", 202, {"type": "namespace", "namespace": "bi"})
    assert call("POST", "/api/v1/admin/sign-out", 200, {"everyone": True}) == {"ended": 0}
    wanted = {"target": "dataset", "namespace": ORDERS[0], "name": ORDERS[1], "depth": 2}
    added = call("POST", "/api/v1/subscriptions", 201, wanted | {"url": "https://93.184.215.14/x"})
    assert added["secret"].startswith("whsec_") and added["events"]
    listed = call("GET", "/api/v1/subscriptions")["subscriptions"]
    assert [s["subscription_id"] for s in listed] == [added["subscription_id"]]
    assert "secret" not in listed[0]
    call("DELETE", f"/api/v1/subscriptions/{added['subscription_id']}", 204)
    call("GET", "/healthz")
    call("GET", "/readyz")
    call("GET", "/openapi.json")
    call("GET", "/docs")
    call("GET", "/metrics")
    call("GET", "/")
    assert call("GET", "/auth/session") == {"signed_in": False, "sign_in": None}

    success = {
        (path, method, status)
        for path, item in contract.doc["paths"].items()
        for method, op in item.items()
        for status in op["responses"]
        if status.startswith("2") and path not in SIGN_IN
    }
    assert success - contract.checked == set(), "success responses never exercised"


def test_problems_match_the_problem_schema(contract: Contract) -> None:
    call = contract.call
    call("POST", "/api/v1/lineage/batch", 202, platform_events())
    Api(contract.client).project()
    call("GET", "/api/v1/lineage", 400, namespace=ORDERS[0])
    call("GET", "/api/v1/lineage", 400, namespace=ORDERS[0], name=ORDERS[1], asOf="noon")
    call("GET", "/api/v1/lineage", 404, namespace="nowhere", name="nothing")
    call("GET", "/api/v1/column-lineage", 404, namespace="nowhere", name="x", field="y")
    call("GET", "/api/v1/impact", 404, namespace="nowhere", name="nothing")
    call("GET", "/api/v1/deliveries/nope", 404)
    call("GET", f"/api/v1/runs/{run_id(99)}", 404)
    call("GET", "/api/v1/datasets", 404, namespace="nowhere", name="nothing")
    call("GET", "/api/v1/datasets/runs", 404, namespace="nowhere", name="nothing")
    call("GET", "/api/v1/jobs", 404, namespace="nowhere", name="nothing")
    call("GET", "/api/v1/search", 400)
    call("GET", "/api/v1/events", 400, after="yesterday")
    call("POST", "/api/v1/quarantine/nope/x/replay", 400)
    call("POST", "/api/v1/quarantine/nope/0/replay", 404)
    call("POST", "/api/v1/lineage", 400, [{}], valid_body=False)  # the single route takes an object
    r = contract.client.post("/api/v1/lineage", content=b"{}", headers={"Content-Encoding": "gzip"})
    assert r.status_code == 415
    problem = r.json()
    assert not contract.errors({"$ref": "#/components/schemas/Problem"}, problem)
    # A method a path does not serve is a problem too (the `default` response).
    r = contract.client.delete("/api/v1/lineage")
    assert r.status_code == 405
    assert r.headers["content-type"] == "application/problem+json"
    assert not contract.errors({"$ref": "#/components/schemas/Problem"}, r.json())


# -- parameters ---------------------------------------------------------------------------------

# Values for the required parameters, naming entities the platform has.
REQUIRED = {
    "/api/v1/runs": {"namespace": "airflow", "name": "etl.report"},
    "/api/v1/column-lineage": {"namespace": REPORT[0], "name": REPORT[1], "field": "total"},
    "/api/v1/search": {"q": "orders"},
}
DEFAULT_REQUIRED = {"namespace": REPORT[0], "name": REPORT[1]}


def test_documented_parameter_bounds_are_the_enforced_ones(contract: Contract) -> None:
    client = contract.client
    client.post("/api/v1/lineage/batch", json=platform_events())
    Api(client).project()
    checked = 0
    for path, item in contract.doc["paths"].items():
        if "get" in item and "{" not in path and path not in SIGN_IN:
            checked += check_parameters(client, path, item["get"])
    assert checked > 30


def check_parameters(client: TestClient, path: str, op: dict[str, Any]) -> int:
    """Call ``path`` at and past each documented bound and enum; the number of checks."""
    params = [p for p in op.get("parameters", []) if p["in"] == "query"]
    required = REQUIRED.get(path, DEFAULT_REQUIRED)
    base = {p["name"]: required[p["name"]] for p in params if p.get("required")}

    def status(**extra: Any) -> int:
        code = client.get(path, params={**base, **extra}).status_code
        assert code in (200, 400, 404), (path, extra, code)
        return code

    assert status() == 200, path
    checks = 0
    for p in params:
        name, schema = p["name"], p["schema"]
        if p.get("required"):
            missing = {k: v for k, v in base.items() if k != name}
            assert client.get(path, params=missing).status_code == 400, (path, name)
            checks += 1
        if schema.get("type") == "integer":
            low, high = schema["minimum"], schema["maximum"]
            assert status(**{name: low}) != 400 and status(**{name: high}) != 400, (path, name)
            assert status(**{name: low - 1}) == 400, (path, name, low - 1)
            assert status(**{name: high + 1}) == 400, (path, name, high + 1)
            assert status(**{name: "ten"}) == 400, (path, name)
            checks += 1
        for value in schema.get("enum", []):
            assert status(**{name: value}) != 400, (path, name, value)
            checks += 1
        if "enum" in schema or "pattern" in schema or schema.get("format") == "date-time":
            assert status(**{name: "bogus"}) == 400, (path, name)
            checks += 1
        if "default" in schema:
            assert status(**{name: schema["default"]}) == status(), (path, name)
            checks += 1
    return checks


def test_documented_ingest_bounds_are_the_enforced_ones(contract: Contract) -> None:
    op = contract.doc["paths"]["/api/v1/lineage/batch"]["post"]
    by_name = {p["name"]: p["schema"] for p in op["parameters"]}
    items = op["requestBody"]["content"]["application/json"]["schema"]["oneOf"][0]
    event = platform_events()[0]

    def post(events: list[Any], key: str | None = None, **params: Any) -> int:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        body = orjson.dumps(events)
        return contract.client.post(
            "/api/v1/lineage/batch", content=body, headers=headers, params=params
        ).status_code

    assert post([event] * items["maxItems"]) == 202
    assert post([event] * (items["maxItems"] + 1)) == 400
    assert post([]) == 400 and items["minItems"] == 1
    provider = by_name["provider_key"]
    assert post([event], provider_key="p" * provider["maxLength"]) == 202
    assert post([event], provider_key="p" * (provider["maxLength"] + 1)) == 400
    assert post([event], provider_key="") == 400 and provider["minLength"] == 1
    key = by_name["Idempotency-Key"]
    assert post([event], key="k" * key["maxLength"]) == 202
    assert post([event], key="k" * (key["maxLength"] + 1)) == 400
