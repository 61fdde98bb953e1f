"""The OpenAPI description of the subscriptions routes (web/subscriptions.py,
docs/notifications.md#subscribing): their paths and their schemas."""

from __future__ import annotations

from embrasure.notify.webhooks import FORMATS, URL
from embrasure.projector.causes import KINDS
from embrasure.projector.causes import STALE_AFTER as STALE_BOUNDS
from embrasure.projector.outbox import MAX_DEPTH
from embrasure.web.openapi.builders import (
    Schema,
    array,
    enum,
    integer,
    nullable,
    obj,
    ref,
    string,
    time,
)
from embrasure.web.openapi.paths import JSON, Operation, json_body, operation, path_param, problem

TARGET = enum(("dataset", "job", "namespace"), "What it watches.")
DEPTH = integer(
    f"A dataset's: also what lies this many datasets downstream of it (0 to {MAX_DEPTH}).",
    minimum=0,
    maximum=MAX_DEPTH,
)
STALE_AFTER = integer(
    "A dataset's: tell when it was not written for this many seconds (0 in answers: never).",
    minimum=STALE_BOUNDS[0],
    maximum=STALE_BOUNDS[1],
)
EVENTS = array(enum(KINDS), "What it hears of.", minItems=1)
FORMAT = enum(FORMATS, "standard: the JSON body, signed; slack: a Slack incoming webhook's.")


def subscription_paths() -> dict[str, dict[str, Operation]]:
    tag = "notifications"
    return {
        "/api/v1/subscriptions": {
            "get": operation(
                "listSubscriptions",
                tag,
                "List subscriptions",
                "The subscriptions on namespaces the token reads or manages subscriptions"
                " of, oldest first. A webhook URL is shown in full only with scope"
                " `subscriptions` on its namespace, else as its scheme and host; the"
                " signing secret never.",
                [],
                {"200": json_body("SubscriptionList", "The subscriptions.")},
            ),
            "post": operation(
                "addSubscription",
                tag,
                "Subscribe a webhook",
                "Needs scope `subscriptions` on the namespace. The answer holds the signing"
                " secret (Standard Webhooks, `whsec_…`), shown this once.",
                [],
                {
                    "201": json_body("NewSubscription", "Stored; sent from now on."),
                    "400": problem("The body is not a SubscriptionRequest."),
                    "422": problem(
                        "webhook-target-refused: the URL is not one the server may call"
                        " (a private, loopback or link-local address, a port outside"
                        " --webhook-ports, credentials in it)."
                    ),
                },
                request_body={
                    "required": True,
                    "content": {JSON: {"schema": ref("SubscriptionRequest")}},
                },
            ),
        },
        "/api/v1/subscriptions/{subscription_id}": {
            "delete": operation(
                "removeSubscription",
                tag,
                "Remove a subscription",
                "Needs scope `subscriptions` on its namespace; nothing more is sent to it.",
                [path_param("subscription_id", string(), "From the listing.")],
                {
                    "204": {"description": "Removed."},
                    "404": problem("No such subscription the token can see."),
                },
            )
        },
    }


def _subscription() -> Schema:
    return obj(
        "A subscription (docs/notifications.md#subscribing).",
        {
            "subscription_id": string(),
            "target": TARGET,
            "namespace": string(),
            "name": nullable(string("The dataset's or job's name; null for a namespace.")),
            "depth": DEPTH,
            "stale_after": integer("Seconds without a write that make the dataset stale; 0: off."),
            "events": EVENTS,
            "url": string("The receiver's webhook; scheme and host alone without the scope."),
            "format": FORMAT,
            "created_at": time(),
            "created_by": nullable(string("Who added it; null with auth off or by the CLI.")),
        },
    )


def subscription_schemas() -> dict[str, Schema]:
    new = _subscription()
    new = {
        **new,
        "required": [*new["required"], "secret"],
        "properties": {
            **new["properties"],
            "secret": string("The signing secret (whsec_…), shown this once."),
        },
    }
    return {
        "Subscription": _subscription(),
        "NewSubscription": new,
        "SubscriptionList": obj(
            "The subscriptions.", {"subscriptions": array(ref("Subscription"))}
        ),
        "SubscriptionRequest": _request(),
    }


def _request() -> Schema:
    """What web/subscriptions.py takes, exactly (schemathesis checks both ways)."""
    namespace = string(minLength=1)
    optional = {"events": EVENTS, "format": FORMAT}
    url = string("An http or https URL with a host.", pattern="^" + URL.pattern)

    def variant(
        description: str, kinds: tuple[str, ...], named: Schema, more: dict[str, Schema]
    ) -> Schema:
        schema = obj(
            description,
            {"target": enum(kinds), "namespace": namespace, "url": url},
            {"name": named, **more, **optional},
        )
        return {**schema, "additionalProperties": False}

    dataset = variant(
        "A dataset, and what lies downstream of it.",
        ("dataset",),
        string(minLength=1),
        {"depth": DEPTH, "stale_after": STALE_AFTER},
    )
    dataset["required"].append("name")
    job = variant("A job.", ("job",), string(minLength=1), {})
    job["required"].append("name")
    everything = variant(
        "A namespace, named by `namespace` alone.",
        ("namespace",),
        {"enum": [None, ""], "description": "Left out (or null, or empty)."},
        {},
    )
    return {"description": "A new subscription.", "oneOf": [dataset, job, everything]}
