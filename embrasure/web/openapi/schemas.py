"""The OpenAPI document's component schemas: every JSON body the server sends
(docs/receiver.md, docs/queries.md).

Each schema is written from the code that shapes the body (the receiver's receipt, web/api.py's
handlers, the query/ package) rather than from the docs, so the document says what a
client really gets; tests/web/test_openapi.py validates real responses against them with
every object closed (no undocumented key passes). The small builders they are made of are
in builders.py.

Enumerations and bounds are taken from the code's own constants where it has them, so the
document cannot drift from them.
"""

from __future__ import annotations

import re

from embrasure.errors import PROBLEM_BASE
from embrasure.model import DELIVERY_STATES, EVENT_KINDS, RUN_STATES
from embrasure.projector.admin import MAX_REASON
from embrasure.projector.admin import ROUTE as ADMIN_ROUTE
from embrasure.projector.column_lineage import CLASSES
from embrasure.query.dataset_runs import USE_ROLES
from embrasure.web import params
from embrasure.web.openapi.builders import (
    TIME,
    Schema,
    array,
    boolean,
    enum,
    free_object,
    integer,
    nullable,
    obj,
    page,
    ref,
    string,
    time,
)

ITEM_OUTCOMES = ("pending", "projected", "quarantined")
# An item's kind: its event kind, or the admin route's for a hide or unhide (web/admin.py
# stores those in the delivery log like deliveries).
ITEM_KINDS = (*EVENT_KINDS, ADMIN_ROUTE)
NODE_TYPES = ("dataset", "job", "service", "field", "hidden")
SEARCH_MATCHES = ("exact", "prefix", "substring")  # search.MATCHES, best rank first


def _walk(description: str, root: str, edge: str) -> Schema:
    """A walk's answer: the nodes and ``edge`` edges around the root, maybe truncated."""
    return obj(
        description,
        {
            "root": string(root),
            "nodes": array(ref("Node")),
            "edges": array(ref(edge)),
            "truncated": boolean("True when `limit` cut nodes off."),
        },
    )


def closed(schema: Schema) -> Schema:
    """An object with no keys but its own."""
    return {**schema, "additionalProperties": False}


def _admin_request() -> Schema:
    """What web/admin.py reads: a dataset or job by namespace and non-empty name, or a
    namespace by namespace alone (``name`` absent, null or empty); other keys ignored."""
    namespace = string(minLength=1)
    reason = nullable(string("Why, for whoever reads the hidden list.", maxLength=MAX_REASON))
    return {
        "description": "What to hide or show again.",
        "oneOf": [
            obj(
                "A dataset or a job.",
                {
                    "type": enum(("dataset", "job")),
                    "namespace": namespace,
                    "name": string(minLength=1),
                },
                {"reason": reason},
            ),
            obj(
                "A namespace, named by `namespace` alone.",
                {"type": enum(("namespace",)), "namespace": namespace},
                {
                    "name": {"enum": [None, ""], "description": "Left out (or null, or empty)."},
                    "reason": reason,
                },
            ),
        ],
    }


def _nodes() -> dict[str, Schema]:
    namespaced = {"namespace": string(), "name": string()}
    return {
        "Node": obj(
            "A graph node. `id` is `{type}:{namespace}:{name}` (`…:{field}` for a field), with "
            "`%` and `:` in the name and field parts percent-encoded, so it splits from the "
            "right.",
            {"id": string(), "type": enum(NODE_TYPES), **namespaced},
            {
                "field": string("Only on field nodes."),
                "count": integer(
                    "Only on the `hidden` node (id `hidden:`), the one placeholder for what "
                    "the walk stopped at in namespaces the reader may not read "
                    "(docs/security.md#what-a-reader-sees): how many nodes.",
                    minimum=1,
                ),
                "next_to": array(
                    string(), "Only on the `hidden` node: the shown nodes next to them."
                ),
                "quality": enum(
                    ("failed",),
                    "On a dataset node (lineage and impact, not with `asOf`) one of whose "
                    "data-quality checks (an assertion of a dataQualityAssertions facet) "
                    "said `success: false` the last time it ran.",
                ),
            },
        ),
        "DatasetRef": obj("A dataset identity.", namespaced),
        "JobRef": obj("A job identity.", namespaced),
    }


# -- receiver and deliveries (docs/receiver.md, docs/queries.md) -----------------------------------


def _ingest() -> dict[str, Schema]:
    loose = "loosely: the server validates it after acknowledging it"
    return {
        "OpenLineageEvent": {
            "type": "object",
            "description": (
                "One OpenLineage event: a RunEvent (has `run`), a JobEvent (has `job`, no "
                "`run`) or a DatasetEvent (neither; has `dataset`), as defined by the "
                f"OpenLineage spec. Described {loose}; an event that breaks a rule is "
                "quarantined with its reason, not refused."
            ),
            "properties": {
                "eventType": string(
                    "RunEvent only.",
                    examples=[*RUN_STATES],
                ),
                "eventTime": string("RFC 3339; a time without offset is read as UTC."),
                "producer": string(format="uri"),
                "schemaURL": string(format="uri"),
                "run": free_object("RunEvent: `runId` (a UUID) and run facets."),
                "job": free_object("`namespace`, `name` and job facets."),
                "inputs": array(free_object("An input dataset with its facets.")),
                "outputs": array(free_object("An output dataset with its facets.")),
                "dataset": free_object("DatasetEvent: the dataset and its facets."),
            },
            "additionalProperties": True,
            "externalDocs": {
                "description": "OpenLineage 2-0-2 event schema",
                "url": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
            },
        },
        "Receipt": obj(
            "The delivery receipt, sent only once the delivery is durable (fsync'd).",
            {
                "delivery_id": string("Opaque, unique, sortable by arrival."),
                "state": enum(
                    ("accepted", "quarantined"),
                    "`quarantined` when every item was rejected at the transport boundary.",
                ),
                "duplicate": boolean(
                    "True when this delivery was already stored; the receipt is the original."
                ),
                "item_count": integer("Events in the delivery (1 on the single route).", minimum=1),
                "invalid_item_count": integer(
                    "Items rejected at the transport boundary.", minimum=0
                ),
            },
        ),
        "DeliveryItem": obj(
            "What became of one item of a delivery.",
            {
                "index": integer(minimum=0),
                "kind": nullable(enum(ITEM_KINDS, "Null while pending or when not an object.")),
                "outcome": enum(ITEM_OUTCOMES),
                "reason": nullable(string("Why it was quarantined.")),
                "retriable": boolean("True only for a projector error, not a broken rule."),
                "warnings": array(string(), "What was accepted with a caveat."),
            },
        ),
        "Delivery": _delivery(with_items=True),
        "DeliverySummary": _delivery(with_items=False),
        "DeliveryList": page(
            "deliveries",
            ref("DeliverySummary"),
            "Deliveries, newest first (no `items`).",
            params.WHOLE_CURSOR,
        ),
        "QuarantineItem": obj(
            "A quarantined item.",
            {
                "delivery_id": string(),
                "index": integer(minimum=0),
                "kind": nullable(enum(ITEM_KINDS, "Null when the item is not an object.")),
                "reason": nullable(string()),
                "received_at": time(),
            },
        ),
        "QuarantineList": page(
            "items",
            ref("QuarantineItem"),
            "Quarantined items, newest delivery first.",
            params.WHOLE_PAIR_CURSOR,
        ),
        "ReplayResult": obj(
            "The item's outcome under the current rules.",
            {
                "delivery_id": string(),
                "index": integer(minimum=0),
                "outcome": enum(("projected", "quarantined")),
                "reason": nullable(string("Why it is still quarantined.")),
            },
        ),
    }


def _delivery(with_items: bool) -> Schema:
    summary = obj(
        "Item counts by outcome.",
        {k: integer(minimum=0) for k in ("received", "projected", "quarantined", "pending")},
    )
    fields: dict[str, Schema] = {
        "delivery_id": string(),
        "provider_key": string(),
        "received_at": time(),
        "state": enum(
            DELIVERY_STATES,
            "`accepted` while items are pending; `partially_projected` when some items "
            "were projected and some quarantined (transport-rejected ones included).",
        ),
        "item_count": integer(minimum=1),
        "invalid_item_count": integer("Items rejected at the transport boundary.", minimum=0),
        "summary": summary,
        "edges_created": integer("Graph edges this delivery created.", minimum=0),
        "writer": nullable(
            obj(
                "Who appended it (docs/security.md#audit); null while auth was off, and for"
                " Kafka's deliveries.",
                {
                    "kind": enum(("token", "jwt", "session")),
                    "subject": string("A static token's id, or the JWT's sub."),
                    "issuer": string("embrasure for a static token, else the JWT's iss."),
                    "token_id": string("A static token's id, or the JWT's jti."),
                },
            )
        ),
    }
    kafka = obj(
        "Where a message consumed from Kafka came from (docs/producers/kafka.md).",
        {
            "topic": string(),
            "partition": integer(minimum=0),
            "offset": integer(minimum=0),
            "key": nullable(string("The message key as text (OpenLineage: the root job).")),
        },
    )
    optional = {"kafka": kafka}
    if with_items:
        fields["items"] = array(ref("DeliveryItem"))
        return obj("A delivery and what became of each item.", fields, optional)
    return obj("A delivery (its items are at /api/v1/deliveries/{delivery_id}).", fields, optional)


# -- graph (docs/queries.md) ------------------------------------------------------------------


def _graph() -> dict[str, Schema]:
    seen = {
        "first_seen": nullable(time(f"Earliest eventTime naming it ({TIME}).")),
        "last_seen": nullable(time(f"Latest eventTime naming it ({TIME}).")),
    }
    return {
        "Edge": obj(
            "A dataset → job (read) or job → dataset (write) edge.",
            {
                "source": string("Node id."),
                "target": string("Node id."),
                "static": boolean("Declared without a run (a JobEvent)."),
                **seen,
                "run_count": integer(minimum=0),
                "last_state": nullable(enum(RUN_STATES, "State of the latest run using it.")),
            },
        ),
        "ColumnEdge": obj(
            "A field → field edge.",
            {
                "source": string("Field node id."),
                "target": string("Field node id."),
                "kind": enum(("mapping", "indirect")),
                "class": nullable(enum(CLASSES, "For mappings; null for indirect edges.")),
                "masked": boolean(),
                "indirect": array(string(), "The INDIRECT subtypes (JOIN, FILTER, …)."),
                "job": nullable(string("Id of the job node that made it.")),
                **seen,
            },
            {"derived": enum(("sql",), "Present when only derived from the job's SQL.")},
        ),
        "LineageGraph": _walk(
            "The nodes and edges around the root.", "Id of the root node.", "Edge"
        ),
        "ColumnLineageGraph": _walk(
            "The field nodes and column edges around the root field.",
            "Id of the root field node.",
            "ColumnEdge",
        ),
        "ImpactItem": obj(
            "One node downstream of the root.",
            {
                "node": ref("Node"),
                "distance": integer("Edges walked from the root.", minimum=1),
                "path": array(string(), "One shortest path of node ids, root first."),
                "masked": boolean("A masked mapping lies on the path."),
            },
        ),
        "Impact": obj(
            "Everything downstream of a dataset or a field, nearest first.",
            {
                "root": string(),
                "items": array(ref("ImpactItem")),
                "truncated": boolean("True when `limit` cut items off."),
                "hidden": {
                    **nullable(ref("Node")),
                    "description": "The placeholder for what the walks stopped at in "
                    "namespaces the reader may not read (a `hidden` node), or null.",
                },
            },
        ),
    }


# -- entities (docs/queries.md) --------------------------------------------------------------------


def _dataset_run(summary: dict[str, Schema], sent: Schema) -> Schema:
    """An entry of GET /api/v1/datasets/runs (query/dataset_runs.py)."""
    field = obj(
        "A schema field.", {"name": string("Nested fields by dotted path.")}, {"type": string()}
    )
    count = integer(minimum=0)
    return obj(
        "A run that read or wrote the dataset, and what it sent about it.",
        {
            **{k: v for k, v in summary.items() if k != "duration_s"},
            "role": enum(USE_ROLES),
            "facets": sent,
            "statistics": obj(
                "From outputStatistics (a write) or inputStatistics (a read; else "
                "dataQualityMetrics, whose `bytes` is the size); empty when none was sent.",
                {},
                {"rowCount": count, "size": count, "fileCount": count},
            ),
            "assertions": obj(
                "From dataQualityAssertions (the input's or output's own facet, else the "
                "dataset facet older producers send).",
                {
                    "passed": count,
                    "failed": count,
                    "failures": array(
                        obj(
                            "A failed assertion.",
                            {"assertion": nullable(string())},
                            {"column": string()},
                        )
                    ),
                },
            ),
        },
        {
            "inputFacets": free_object("A read's input facets (latest per name)."),
            "outputFacets": free_object("A write's output facets (latest per name)."),
            "version": string("From the dataset's version facet."),
            "schema_change": obj(
                "A write's schema against the previous write that carried one; absent "
                "when there is none or nothing changed.",
                {
                    "added": array(field),
                    "removed": array(field),
                    "changed": array(
                        obj(
                            "A field whose type changed.",
                            {
                                "name": string(),
                                "from": nullable(string()),
                                "to": nullable(string()),
                            },
                        )
                    ),
                },
            ),
        },
    )


def _entities() -> dict[str, Schema]:
    facets = free_object("Current value of each facet, by facet name, as sent.")
    run_ref = obj(
        "A run and its job.",
        {"runId": nullable(string()), "job": nullable(ref("JobRef"))},
    )
    sent = free_object(
        "The dataset facets this run sent about it, the latest value per facet name over "
        "the run's events (by eventTime; `_deleted: true` removes one): its schema as the "
        "run saw it, …"
    )

    def used(role_key: str, what: str) -> Schema:
        return obj(
            f"A dataset the run {what}, under its canonical identity.",
            {
                "namespace": string(),
                "name": string(),
                "facets": sent,
                role_key: free_object(
                    f"The run's {role_key} for it (OpenLineage's {role_key}), the latest "
                    "value per facet name over the run's events."
                ),
            },
            {"version": string("From the dataset's version facet.")},
        )

    summary: dict[str, Schema] = {
        "runId": string(format="uuid"),
        "job": ref("JobRef"),
        "state": nullable(enum(RUN_STATES)),
        "started_at": nullable(time()),
        "ended_at": nullable(time()),
        "duration_s": nullable({"type": "number", "description": "Seconds, when both known."}),
    }
    identity = {"id": string(), "namespace": string(), "name": string()}
    return {
        "RunSummary": obj("A run's state and times.", summary),
        "Run": obj(
            "A run.",
            {
                **summary,
                "inputs": array(used("inputFacets", "read")),
                "outputs": array(used("outputFacets", "wrote")),
                "facets": facets,
                "error_message": nullable(string("From the errorMessage run facet.")),
                "parent": nullable(
                    obj(
                        "The parent run (ParentRunFacet), with the root run when named.",
                        run_ref["properties"],
                        {"root": run_ref},
                    )
                ),
                "children": array(
                    string(),
                    "runIds of the runs naming this one as parent, sorted; in listings "
                    "(GET /api/v1/runs, …/children) the first 100 only: see child_count, "
                    "and page through them with /api/v1/runs/{run_id}/children.",
                ),
                "child_count": integer("How many runs name this one as parent.", minimum=0),
            },
        ),
        "RunList": page("runs", ref("Run"), "A job's runs, newest first.", params.TEXT_PAIR_CURSOR),
        "DatasetRun": _dataset_run(summary, sent),
        "DatasetRunList": page(
            "runs",
            ref("DatasetRun"),
            "The runs that read or wrote a dataset, newest first (the run's latest "
            "eventTime, then runId, then role).",
            params.TEXT_TRIPLE_CURSOR,
        ),
        "Overview": obj(
            "Counters over the whole log, the projection backlog, recent runs.",
            {
                "deliveries": obj(
                    "Deliveries by state.", {s: integer(minimum=0) for s in DELIVERY_STATES}
                ),
                "items": obj(
                    "Items (events) by outcome; `received` counts them all.",
                    {k: integer(minimum=0) for k in ("received", *ITEM_OUTCOMES)},
                ),
                "backlog": obj(
                    "What the projector has not reached yet.",
                    {"deliveries": integer(minimum=0), "items": integer(minimum=0)},
                ),
                "recent_runs": array(ref("RunSummary"), "Runs with the latest events first."),
            },
        ),
        "Dataset": obj(
            "A dataset (its canonical node).",
            {
                **identity,
                "type": enum(("dataset",)),
                "aliases": array(
                    obj(
                        "Another identity of the same dataset (symlink or rename).",
                        {"namespace": string(), "name": string(), "renamed": boolean()},
                    )
                ),
                "locations": array(
                    obj(
                        "A location from the symlinks facet.",
                        {"namespace": string(), "name": string(), "type": string()},
                    )
                ),
                "facets": facets,
                "fields": array(string(), "Field names from the schema facet."),
                "dropped": boolean("Its lifecycleStateChange is DROP."),
            },
        ),
        "DatasetList": page(
            "datasets", ref("Dataset"), "Datasets by namespace and name.", params.TEXT_PAIR_CURSOR
        ),
        "Job": obj(
            "A job or a service.",
            {
                **identity,
                "type": enum(("job", "service")),
                "facets": facets,
                "parent_job": nullable(ref("JobRef")),
            },
            {"latest_run": nullable(ref("RunSummary"))},
        ),
        "JobList": page(
            "jobs",
            ref("Job"),
            "Jobs by namespace and name (each with `latest_run`).",
            params.TEXT_PAIR_CURSOR,
        ),
        "Namespace": obj(
            "A namespace and how many datasets and jobs it holds.",
            {"name": string(), "datasets": integer(minimum=0), "jobs": integer(minimum=0)},
        ),
        "NamespaceList": page(
            "namespaces", ref("Namespace"), "Namespaces by name.", params.TEXT_CURSOR
        ),
        "SearchResult": obj(
            "A node whose name (or field name, or an alias) matches.",
            {"node": ref("Node"), "match": enum(SEARCH_MATCHES)},
            {"alias": ref("DatasetRef")},
        ),
        "SearchResults": page(
            "results",
            ref("SearchResult"),
            "Ranked exact, prefix, substring; then by name.",
            params.WHOLE_CURSOR,
        ),
        "StoredEvent": obj(
            "A projected event as it was received.",
            {
                "event_id": string(
                    "SHA-256 of the event's canonical JSON.", pattern="^[0-9a-f]{64}$"
                ),
                "eventTime": nullable(string("As sent.")),
                "event": free_object("The event."),
            },
        ),
        "EventList": page(
            "events",
            ref("StoredEvent"),
            "Events by eventTime, then event_id.",
            params.TEXT_PAIR_CURSOR,
        ),
        "Export": obj(
            "The whole graph, canonical: sorted by identity, free of arrival details.",
            {
                "datasets": array(ref("Dataset")),
                "jobs": array(ref("Job"), "Without `latest_run`."),
                "runs": array(ref("Run")),
                "edges": array(ref("Edge")),
                "column_edges": array(ref("ColumnEdge")),
            },
        ),
    }


def _problem() -> Schema:
    schema = obj(
        "An RFC 9457 problem detail. Bound violations add `limit` and `actual`.",
        {
            "type": string(
                "Identifies the kind of problem.",
                format="uri",
                pattern="^" + re.escape(PROBLEM_BASE) + "[a-z0-9-]+$",
            ),
            "title": string(),
            "status": integer(minimum=400, maximum=599),
            "detail": string("What went wrong and what to do about it."),
        },
        {
            "limit": integer("The bound that was broken."),
            "actual": integer("The value that broke it."),
            "delivery_id": string("409: the delivery that holds the Idempotency-Key."),
            "closest": array(
                string(),
                "404 `field-not-found`: the dataset's known fields nearest the one asked for.",
            ),
        },
    )
    schema["additionalProperties"] = True  # RFC 9457 §3.2: extension members
    return schema


def _admin() -> dict[str, Schema]:
    kind = enum(("dataset", "job", "namespace"))
    name = nullable(string("The dataset's or job's name; null for a namespace."))
    return {
        "AdminRequest": _admin_request(),
        "SignOutRequest": {
            "description": "Whose web UI sessions to end.",
            "oneOf": [
                closed(obj("One person's.", {"subject": string(minLength=1)})),
                closed(obj("Everyone's.", {"everyone": {"const": True}})),
            ],
        },
        "SignOutReceipt": obj(
            "The sessions ended.", {"ended": integer("How many were live.", minimum=0)}
        ),
        "AdminReceipt": obj(
            "The administrative entries stored in the log (more than one when a dataset's "
            "node was hidden under several identities).",
            {
                "action": enum(("hide", "unhide")),
                "state": enum(("accepted",)),
                "entries": array(
                    obj(
                        "One entry.",
                        {
                            "type": kind,
                            "namespace": string(),
                            "name": name,
                            "delivery_id": string("Its delivery: poll it to see it projected."),
                        },
                    )
                ),
            },
        ),
        "HiddenList": page(
            "hidden",
            obj(
                "A hidden entity.",
                {
                    "type": kind,
                    "namespace": string(),
                    "name": name,
                    "hidden_at": time(),
                    "by": nullable(string("The admin's token, name (id); null with auth off.")),
                    "reason": nullable(string()),
                },
            ),
            "What is hidden.",
            params.TEXT_TRIPLE_CURSOR,
        ),
    }


def component_schemas() -> dict[str, Schema]:
    return {
        "Problem": _problem(),
        **_nodes(),
        **_ingest(),
        **_graph(),
        **_entities(),
        **_admin(),
        "Health": obj("The process is up.", {"status": enum(("ok",))}),
        "Ready": obj(
            "The store is reachable and ingest is not refused for overload.",
            {
                "status": enum(("ready",)),
                "ingest": obj(
                    "The load the receiver's overload bounds are checked against.",
                    {
                        "backlog_deliveries": integer("Deliveries not yet projected."),
                        "backlog_items": integer("Their items (those not rejected on receipt)."),
                        "oldest_pending": nullable(
                            time("When the oldest delivery not yet projected was received.")
                        ),
                        "free_disk_bytes": nullable(
                            integer("Free bytes beside the SQLite log; null on PostgreSQL.")
                        ),
                        "refusing": nullable(string("Why ingest answers 429 now, or null.")),
                    },
                ),
            },
            {
                "notifications": obj(
                    "Present when a subscription's receiver refused a notification 4 times"
                    " or more and has not taken it since (docs/notifications.md#delivery);"
                    " the server stays ready.",
                    {
                        "status": enum(("failing",)),
                        "subscriptions": array(string(), "Their ids."),
                    },
                )
            },
        ),
    }
