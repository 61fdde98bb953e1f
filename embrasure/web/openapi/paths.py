"""The operations of the OpenAPI document (document.py), with the helpers that keep each
one short: the read API's here (docs/queries.md); the ingest and service ones in document.py.

Defaults and bounds that are constants in api.py are imported; the ones written inline in
a handler (lineage's and impact's ``limit``, search's page size) are repeated here, and
tests/web/test_openapi.py checks each against the handler by calling it at and past the bound.
"""

from __future__ import annotations

from typing import Any

from embrasure.model import DELIVERY_STATES, RUN_STATES
from embrasure.query.dataset_runs import USE_ROLES
from embrasure.web import params
from embrasure.web.openapi.builders import Schema, enum, integer, ref, string
from embrasure.web.params import MAX_DEPTH, MAX_LIMIT, Cursor

Operation = dict[str, Any]
JSON = "application/json"
PROBLEM_JSON = "application/problem+json"


# -- helpers ----------------------------------------------------------------------------------


def query(name: str, schema: Schema, description: str, required: bool = False) -> Schema:
    param: Schema = {"name": name, "in": "query", "description": description, "schema": schema}
    if required:
        param["required"] = True
    return param


def path_param(name: str, schema: Schema, description: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


def bounded(default: int, low: int, high: int) -> Schema:
    return integer(default=default, minimum=low, maximum=high)


def limit(default: int, high: int = MAX_LIMIT, what: str = "Items per page.") -> Schema:
    return query("limit", bounded(default, 1, high), what)


def cursor(shape: Cursor) -> Schema:
    """The ``cursor`` parameter of a listing, of exactly the shape its handler answers."""
    return query(
        "cursor",
        string(pattern=shape.pattern),
        f"{shape.description[:-1]}; absent or empty: the first page.",
    )


NAMESPACE = query(
    "namespace",
    string(),
    "Namespace of the entity; may be empty (`namespace=`): a dataset or job sent with"
    ' namespace "".',
    required=True,
)
NAME = query("name", string(minLength=1), "Name of the entity.", required=True)
DEPTH = query(
    "depth",
    bounded(5, 0, MAX_DEPTH),
    "Edges to walk from the root (a dataset's writer job is at depth 1).",
)
DIRECTION = query(
    "direction",
    enum(("upstream", "downstream", "both"), "") | {"default": "both"},
    "`both` is the union of the upstream and the downstream walk.",
)


def json_body(schema_name: str, description: str) -> Schema:
    return {"description": description, "content": {JSON: {"schema": ref(schema_name)}}}


def problem(description: str, retry_after: bool = False) -> Schema:
    """An error response: RFC 9457 problem+json, with Retry-After on 429/503."""
    response: Schema = {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": ref("Problem")}},
    }
    if retry_after:
        response["headers"] = {
            "Retry-After": {"description": "Seconds to wait.", "schema": integer(minimum=0)}
        }
    return response


# Every route can also fail with 500 (logged); a wrong method answers 405. Both problem+json.
OTHER_ERRORS = problem("Any other error: 405 for a method the path does not serve, 500.")
BAD_PARAMETER = problem("A query parameter is missing, malformed or out of bounds.")
FIELD_NOT_FOUND = (
    "No such dataset (`not-found`), or a field the dataset never had: no schema facet or "
    "column lineage named it (`field-not-found`; `closest` lists its known fields nearest "
    "the one asked for)."
)


def operation(
    operation_id: str,
    tag: str,
    summary: str,
    description: str,
    parameters: list[Schema],
    responses: dict[str, Schema],
    request_body: Schema | None = None,
) -> Operation:
    op: Operation = {
        "operationId": operation_id,
        "tags": [tag],
        "summary": summary,
        "description": description,
    }
    if parameters:
        op["parameters"] = parameters
    if request_body is not None:
        op["requestBody"] = request_body
    op["responses"] = {**responses, "default": OTHER_ERRORS}
    return op


def read(
    operation_id: str,
    tag: str,
    summary: str,
    description: str,
    parameters: list[Schema],
    schema_name: str,
    not_found: str | None = None,
    unprocessable: str | None = None,
    heavy: bool = False,
) -> dict[str, Operation]:
    """A GET of the read API: 200 JSON, 400 for parameters, 404 where it looks up, 422
    where a well-formed question cannot be answered, 503 past its time bound; a heavy one
    (web/read_bounds.py) 429 past --heavy-reads."""
    responses = {"200": json_body(schema_name, summary), "400": BAD_PARAMETER}
    if not_found:
        responses["404"] = problem(not_found)
    if unprocessable:
        responses["422"] = problem(unprocessable)
    if heavy:
        responses["429"] = TOO_MANY_HEAVY
    responses["503"] = READ_UNAVAILABLE
    return {"get": operation(operation_id, tag, summary, description, parameters, responses)}


READ_UNAVAILABLE = problem(
    "The store cannot be read now (`store-unavailable`, with Retry-After), or the read ran"
    " past --read-timeout-seconds and the database stopped it (`read-too-long`: ask for less).",
)
TOO_MANY_HEAVY = problem(
    "--heavy-reads walks of the graph or exports are running already"
    " (`too-many-heavy-reads`): retry after Retry-After.",
    retry_after=True,
)


# -- the read API (docs/queries.md) ----------------------------------------------------------------


def _deliveries() -> dict[str, dict[str, Operation]]:
    delivery_id = path_param("delivery_id", string(), "From the receipt.")
    return {
        "/api/v1/deliveries": read(
            "listDeliveries",
            "deliveries",
            "List deliveries",
            "Newest first.",
            [
                query("provider_key", string(), "Only this producer's deliveries."),
                query(
                    "writer",
                    string(),
                    "Only the deliveries this subject appended (a token's id, a JWT's sub).",
                ),
                query(
                    "state",
                    enum(DELIVERY_STATES),
                    "Only deliveries in this state.",
                ),
                limit(100),
                cursor(params.WHOLE_CURSOR),
            ],
            "DeliveryList",
        ),
        "/api/v1/deliveries/{delivery_id}": read(
            "getDelivery",
            "deliveries",
            "A delivery and its items",
            "What became of each item: pending, projected or quarantined, with the reason.",
            [delivery_id],
            "Delivery",
            not_found="No such delivery.",
        ),
        "/api/v1/quarantine": read(
            "listQuarantine",
            "deliveries",
            "List quarantined items",
            "Newest delivery first, then by index.",
            [limit(100), cursor(params.WHOLE_PAIR_CURSOR)],
            "QuarantineList",
        ),
        "/api/v1/quarantine/{delivery_id}/{index}/replay": {
            "post": operation(
                "replayItem",
                "deliveries",
                "Replay a quarantined item",
                "Re-validates the item's stored bytes under the current rules and projects it "
                "if it now passes; the delivery's state is recomputed.",
                [
                    delivery_id,
                    path_param("index", integer(), "The item's 0-based index in the delivery."),
                ],
                {
                    "200": json_body("ReplayResult", "The item was re-validated."),
                    "400": problem("The index is not a whole number."),
                    "404": problem("No such delivery, or no such item in it."),
                    "409": problem(
                        "The item is not quarantined, or was rejected at the transport "
                        "boundary (never replayable)."
                    ),
                    "503": problem("The store cannot commit now.", retry_after=True),
                },
            )
        },
    }


def _graph() -> dict[str, dict[str, Operation]]:
    return {
        "/api/v1/lineage": read(
            "getLineage",
            "graph",
            "Dataset-level lineage around a dataset, job or service",
            "Edges follow the data: dataset → job for a read, job → dataset for a write. A "
            "dataset looked up by an alias answers with its canonical node.",
            [
                query(
                    "type",
                    enum(("dataset", "job", "service")) | {"default": "dataset"},
                    "What the root is.",
                ),
                NAMESPACE,
                NAME,
                DIRECTION,
                DEPTH,
                limit(500, 10_000, "Most nodes to return; past it `truncated` is true."),
                query(
                    "states",
                    string(pattern=f"^({'|'.join(RUN_STATES)})(,({'|'.join(RUN_STATES)}))*$"),
                    "Comma-separated run states: keep the edges whose `last_state` is one.",
                ),
                query(
                    "asOf",
                    string(format="date-time"),
                    "Answer as if only the events with eventTime ≤ this (RFC 3339) had been "
                    "received: edges, aliases, states and counts alike. Slower: for looking "
                    "back.",
                ),
            ],
            "LineageGraph",
            not_found="No such dataset or job.",
            unprocessable="`asOf` before the run horizon (`as-of-before-horizon`): the runs"
            " before it were removed by --retain-runs.",
            heavy=True,
        ),
        "/api/v1/column-lineage": read(
            "getColumnLineage",
            "graph",
            "Column lineage around a field",
            "A field of the dataset (named by its schema facet or column lineage) with no "
            "lineage answers its root node alone; a field it never had is a 404.",
            [
                NAMESPACE,
                NAME,
                query("field", string(minLength=1), "The field.", required=True),
                DIRECTION,
                DEPTH,
                query(
                    "kinds",
                    string(pattern="^(mapping|indirect)(,(mapping|indirect))*$")
                    | {"default": "mapping,indirect"},
                    "Comma-separated edge kinds to follow.",
                ),
                limit(500, 10_000, "Most field nodes to return; past it `truncated` is true."),
            ],
            "ColumnLineageGraph",
            not_found=FIELD_NOT_FOUND,
            heavy=True,
        ),
        "/api/v1/impact": read(
            "getImpact",
            "graph",
            "Everything downstream of a dataset or a field",
            "Datasets, fields, jobs and services downstream, each with one shortest path from "
            "the root and whether a masked mapping lies on it.",
            [
                NAMESPACE,
                NAME,
                query("field", string(), "Start from this field instead of the dataset."),
                DEPTH,
                limit(1_000, 10_000, "Most items to return; past it `truncated` is true."),
            ],
            "Impact",
            not_found=FIELD_NOT_FOUND,
            heavy=True,
        ),
        "/api/v1/export": {
            "get": operation(
                "exportGraph",
                "graph",
                "The whole graph as canonical JSON",
                "Sorted by identity, keys sorted, free of arrival details: two graphs built "
                "from the same events in any order export byte for byte the same.",
                [],
                {"200": json_body("Export", "The graph."), "429": TOO_MANY_HEAVY},
            )
        },
    }


def _entities() -> dict[str, dict[str, Operation]]:
    filters = [
        query("namespace", string(), "Only this namespace."),
        query(
            "name",
            string(),
            "With `namespace`: that one entity (404 if unknown); ignored without it.",
        ),
        query("q", string(), "Only names holding this text (ASCII case ignored)."),
        limit(100),
        cursor(params.TEXT_PAIR_CURSOR),
    ]
    return {
        "/api/v1/runs": read(
            "listRuns",
            "entities",
            "A job's runs, or the runs that wrote a dataset",
            "Newest first (latest eventTime). With `type=dataset`, the runs that wrote the "
            "dataset under any of its aliases.",
            [
                query(
                    "type",
                    enum(("job", "dataset")) | {"default": "job"},
                    "Whose runs: the job's, or the dataset's writers.",
                ),
                NAMESPACE,
                NAME,
                limit(100),
                cursor(params.TEXT_PAIR_CURSOR),
            ],
            "RunList",
            not_found="No such job (or dataset).",
        ),
        "/api/v1/runs/{run_id}": read(
            "getRun",
            "entities",
            "A run",
            "States, times, inputs and outputs, current facets, parent and children.",
            [path_param("run_id", string(), "The runId (a UUID; case ignored).")],
            "Run",
            not_found="No such run.",
        ),
        "/api/v1/runs/{run_id}/children": read(
            "listChildRuns",
            "entities",
            "A run's children, a page at a time",
            "The runs whose parent run facet names this run (an Airflow DAG run's tasks, a "
            "Spark application's queries, a dbt invocation's models), in the order they "
            "started. A run's own view lists every child's id; this pages through the "
            "children themselves (a dbt invocation can have tens of thousands).",
            [
                path_param("run_id", string(), "The parent's runId (a UUID; case ignored)."),
                limit(100),
                cursor(params.TEXT_PAIR_CURSOR),
            ],
            "RunList",
            not_found="No such run, and no run names it as parent.",
        ),
        "/api/v1/datasets": read(
            "listDatasets",
            "entities",
            "Datasets",
            "Canonical datasets by namespace and name; an alias finds its canonical node.",
            filters,
            "DatasetList",
            not_found="No such dataset (`namespace` and `name` given).",
        ),
        "/api/v1/datasets/runs": read(
            "listDatasetRuns",
            "entities",
            "What each run did to a dataset",
            "The runs that read or wrote the dataset (under any of its aliases), newest "
            "first, each with the facets it sent about it, its statistics (rows, bytes, "
            "files), its data-quality assertions and, for a write, the schema change since "
            "the previous write.",
            [
                NAMESPACE,
                NAME,
                query(
                    "role", enum(USE_ROLES), "Only the runs that read (input) or wrote (output) it."
                ),
                limit(100),
                cursor(params.TEXT_TRIPLE_CURSOR),
            ],
            "DatasetRunList",
            not_found="No such dataset.",
        ),
        "/api/v1/jobs": read(
            "listJobs",
            "entities",
            "Jobs and services",
            "By namespace and name.",
            filters,
            "JobList",
            not_found="No such job (`namespace` and `name` given).",
        ),
        "/api/v1/overview": read(
            "overview",
            "entities",
            "Ingest counters, backlog and recent runs",
            "What the web UI's home page shows: deliveries by state and items by outcome "
            "over the whole log (one pass over it), the deliveries the projector has not "
            "reached yet, and the runs with the latest events.",
            [query("runs", bounded(10, 0, 100), "How many recent runs.")],
            "Overview",
        ),
        "/api/v1/namespaces": read(
            "listNamespaces",
            "entities",
            "Namespaces",
            "By name, with their dataset and job counts.",
            [limit(100), cursor(params.TEXT_CURSOR)],
            "NamespaceList",
        ),
        "/api/v1/search": read(
            "search",
            "entities",
            "Search datasets, jobs, services and fields",
            "Ranked exact, then prefix, then substring (ASCII case ignored); within a rank "
            "shorter names first. Aliases match too.",
            [
                query("q", string(minLength=1), "Text to find.", required=True),
                limit(20),
                cursor(params.WHOLE_CURSOR),
            ],
            "SearchResults",
        ),
        "/api/v1/events": read(
            "listEvents",
            "entities",
            "Raw events by eventTime",
            "The projected events, as received, by eventTime then event_id.",
            [
                query("after", string(format="date-time"), "eventTime ≥ this (RFC 3339)."),
                query("before", string(format="date-time"), "eventTime < this (RFC 3339)."),
                limit(100),
                cursor(params.TEXT_PAIR_CURSOR),
            ],
            "EventList",
        ),
    }


def _admin() -> dict[str, dict[str, Operation]]:
    def decide(action: str, summary: str, description: str, not_found: str) -> Operation:
        responses = {
            "202": json_body("AdminReceipt", "Stored in the log; applied once projected."),
            "400": problem("The body is not an AdminRequest."),
            "503": problem("The log cannot commit now; nothing was stored.", retry_after=True),
        }
        if not_found:
            responses["404"] = problem(not_found)
        return operation(
            action,
            "admin",
            summary,
            description,
            [],
            responses,
            request_body={"required": True, "content": {JSON: {"schema": ref("AdminRequest")}}},
        )

    return {
        "/api/v1/admin/hide": {
            "post": decide(
                "hide",
                "Hide a dataset, job or namespace",
                "Recorded in the delivery log as an administrative entry, so reprojection "
                "keeps it. A hidden node is left out of listings, search, lineage, impact "
                "and the export, and walks do not pass through it; its events are still "
                "projected.",
                "Nothing of that name is known.",
            )
        },
        "/api/v1/admin/unhide": {
            "post": decide(
                "unhide",
                "Show a hidden dataset, job or namespace again",
                "A dataset hidden under any identity of its node is shown again.",
                "",
            )
        },
        "/api/v1/admin/sign-out": {
            "post": operation(
                "endSessions",
                "admin",
                "End web UI sessions",
                "Ends the sessions of one person (their subject) or of everyone, on every"
                " server of the database at once: their next request asks them to sign in.",
                [],
                {
                    "200": json_body("SignOutReceipt", "Ended."),
                    "400": problem("The body is not a SignOutRequest."),
                },
                request_body={
                    "required": True,
                    "content": {JSON: {"schema": ref("SignOutRequest")}},
                },
            )
        },
        "/api/v1/admin/hidden": read(
            "listHidden",
            "admin",
            "What is hidden",
            "Who hid what, when and why; by type, namespace and name.",
            [limit(100), cursor(params.TEXT_TRIPLE_CURSOR)],
            "HiddenList",
        ),
    }


def read_paths() -> dict[str, dict[str, Operation]]:
    return _deliveries() | _graph() | _entities() | _admin()
