"""Every receiver bound (docs/receiver.md), checked where the bytes are read.

A request is checked in this order, each check refusing before any later work:
headers (encoding, type, key lengths) → Content-Length → the body as it streams in →
strict JSON (jsonguard) → shape (single object; batch array or envelope, 1-1,000) →
per-event bounds (transport-boundary rejection of the item, not the request).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from embrasure.access.grants import NamespaceGrants
from embrasure.errors import Problem
from embrasure.model import DeliveryDraft, Principal, Rejection, Writer, event_kind, utc_now
from embrasure.receiver import jsonguard

MiB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Limits:
    """The receiver's bounds (docs/receiver.md#bounds). Each is a promise to producers and a
    cap on what one request can cost us; tests construct smaller ones."""

    # Largest request body. Checked from Content-Length before reading, then while a
    # chunked body streams in, so a body never costs more memory than this.
    body_bytes: int = 8 * MiB
    # Events in one batch. Larger batches should be split by the producer's client.
    batch_events: int = 1000
    # Inputs + outputs of one event; beyond it an event is a bulk load, not lineage.
    datasets_per_event: int = 2000
    # Nesting, the request's top-level value being depth 1. Real events nest ~12 deep.
    json_depth: int = 64
    # Values (objects, arrays, strings, numbers, literals) in one event.
    values_per_event: int = 100_000
    # Bytes of all facets/inputFacets/outputFacets objects of one event, as sent
    # without insignificant whitespace.
    facet_bytes_per_event: int = 1 * MiB
    idempotency_key_chars: int = 600
    provider_key_chars: int = 500


DEFAULT_PROVIDER_KEY = "default"
JSON_MEDIA_TYPES = ("application/json",)
# The Content-Encoding values accepted: identity, in any case (content-codings are
# case-insensitive, RFC 9110 §8.4.1), or empty, between optional spaces and tabs (OWS,
# RFC 9110 §5.5); absent is identity. The OpenAPI document states this pattern.
IDENTITY_ENCODING = r"^[ \t]*([iI][dD][eE][nN][tT][iI][tT][yY])?[ \t]*$"
_IDENTITY_ENCODING = re.compile(IDENTITY_ENCODING)
SPARK_HINT = (
    "If a Spark job sent it, its spark.logicalPlan facet is the usual cause: disable it "
    "with spark.openlineage.facets.spark.logicalPlan.disabled=true."
)


def _bad_request(slug: str, title: str, detail: str, **extra: Any) -> Problem:
    return Problem(400, slug, title, detail, **extra)


def check_headers(request: Request, limits: Limits) -> tuple[str, str | None]:
    """Refuse what the headers alone decide; return (provider_key, idempotency_key)."""
    encoding = request.headers.get("content-encoding")
    # Producers send none: the pattern is matched only when there is one (on every request,
    # the common one included, a regex lookup would sit on the hot ingest path).
    if encoding is not None and _IDENTITY_ENCODING.fullmatch(encoding) is None:
        encoding = encoding.strip().lower()
        raise Problem(
            415,
            "unsupported-content-encoding",
            "Compressed bodies are not accepted",
            f"Content-Encoding {encoding!r} is not accepted: send uncompressed JSON. "
            "Turn compression off in the producer's transport (for openlineage-python, "
            "remove `compression: gzip` from the http transport; for the Java client, "
            "Spark and Flink, unset `compression`, e.g. "
            "spark.openlineage.transport.compression).",
        )
    media_type, _, params = request.headers.get("content-type", "").partition(";")
    media_type = media_type.strip().lower()
    if media_type not in JSON_MEDIA_TYPES and not media_type.endswith("+json"):
        raise Problem(
            415,
            "unsupported-media-type",
            "Body must be JSON",
            f"Content-Type {media_type or '(none)'!r} is not JSON: send "
            "Content-Type: application/json.",
        )
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            raise Problem(
                415,
                "unsupported-charset",
                "Body must be UTF-8",
                f"charset {value.strip()!r} is not accepted: JSON is UTF-8 (RFC 8259 §8.1).",
            )

    key = request.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= limits.idempotency_key_chars:
        raise _bad_request(
            "idempotency-key-length",
            "Idempotency-Key has the wrong length",
            f"Idempotency-Key must be 1 to {limits.idempotency_key_chars} characters; "
            f"this one has {len(key)}.",
            limit=limits.idempotency_key_chars,
            actual=len(key),
        )
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is not None and principal.provider_key is not None:
        # docs/security.md: a bound token's key, whatever the query says
        provider = principal.provider_key
    else:
        provider = request.query_params.get("provider_key", DEFAULT_PROVIDER_KEY)
    if not 1 <= len(provider) <= limits.provider_key_chars:
        raise _bad_request(
            "provider-key-length",
            "provider_key has the wrong length",
            f"provider_key must be 1 to {limits.provider_key_chars} characters; "
            f"this one has {len(provider)}.",
            limit=limits.provider_key_chars,
            actual=len(provider),
        )
    return provider, key


def _too_large(limit: int, actual: int | None) -> Problem:
    size = "" if actual is None else f" ({actual:,} bytes{' so far' if actual else ''})"
    return Problem(
        413,
        "body-too-large",
        "Request body too large",
        f"The request body{size} is over the {limit:,}-byte limit. Send fewer events "
        f"per batch. {SPARK_HINT}",
        limit=limit,
        actual=actual,
    )


def declared_size(request: Request, limit: int) -> int:
    """What a body will hold in memory: its Content-Length, or the cap when chunked (or
    when the header is unreadable: read_body refuses that one)."""
    try:
        return min(int(request.headers["content-length"]), limit)
    except (KeyError, ValueError):
        return limit


async def read_body(request: Request, limit: int, seconds: float) -> bytes:
    """The body, refused as soon as it is known to be over ``limit`` bytes, or when it has
    not all arrived within ``seconds`` (a slow client — slowloris — holds its reservation
    of BodyBudget no longer than that)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            length = int(declared)
        except ValueError:
            raise _bad_request(
                "bad-content-length", "Bad Content-Length", "Content-Length is not a number."
            ) from None
        if length > limit:
            raise _too_large(limit, length)
    chunks = []
    received = 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise _too_large(limit, received)
                chunks.append(chunk)
    except TimeoutError:
        raise Problem(
            408,
            "body-timeout",
            "The request body came too slowly",
            f"The body did not arrive within {seconds:g} s ({received:,} bytes came). "
            "Nothing was stored; send it again over a faster link.",
            headers={"Connection": "close"},
        ) from None
    return b"".join(chunks)


def _event_bound_reason(event: Any, raw: bytes | None, limits: Limits) -> str | None:
    """Why this item is rejected at the transport boundary, or None.

    ``raw`` is the item's bytes; None when the whole body is too small for the size
    bounds to matter (a value takes at least one byte, facets are part of the event).
    """
    if type(event) is not dict:
        return f"item is a JSON {type(event).__name__}, not an object: not an event"
    datasets = sum(len(event[k]) for k in ("inputs", "outputs") if type(event.get(k)) is list)
    if datasets > limits.datasets_per_event:
        return (
            f"event lists {datasets:,} inputs and outputs; at most "
            f"{limits.datasets_per_event:,} are accepted per event"
        )
    if raw is None:
        return None
    if len(raw) > limits.values_per_event:
        values = jsonguard.count_values(event, limits.values_per_event)
        if values > limits.values_per_event:
            return (
                f"event holds more than {limits.values_per_event:,} JSON values; "
                "split it or drop large facets"
            )
    if len(raw) > limits.facet_bytes_per_event:
        facet_bytes = jsonguard.facet_bytes(raw)
        if facet_bytes > limits.facet_bytes_per_event:
            return (
                f"event carries {facet_bytes:,} bytes of facets; at most "
                f"{limits.facet_bytes_per_event:,} are accepted. {SPARK_HINT}"
            )
    return None


def check_items(
    events: list[Any],
    body: bytes,
    single: bool,
    limits: Limits,
    grants: NamespaceGrants | None = None,
) -> tuple[Rejection, ...]:
    """Per-event bounds: the items to reject at the transport boundary."""
    small = len(body) <= min(limits.values_per_event, limits.facet_bytes_per_event)
    raws: list[bytes] | list[None]
    if small:
        raws = [None] * len(events)
    else:
        raws = [body] if single else jsonguard.split_items(body)
    return _rejections(zip(events, raws, strict=True), limits, grants)[1]


def _check_batch(
    body: bytes, limits: Limits, grants: NamespaceGrants | None
) -> tuple[int, tuple[Rejection, ...]]:
    """A batch's items (a bare array's, or an envelope's ``events``) and their per-event
    bounds, in one pass: each item is parsed, checked and let go before the next
    (jsonguard.iter_array, iter_envelope), so a 500-event batch never holds its 500
    parsed events at once, and a large item's bytes are at hand for its size bounds."""
    small = len(body) <= min(limits.values_per_event, limits.facet_bytes_per_event)
    first = body.lstrip()[:1]
    if first == b"[":
        items = jsonguard.iter_array(body, limits.json_depth)
    elif first == b"{":
        items = jsonguard.iter_envelope(body, limits.json_depth)
    else:  # not JSON (parse_strict says what is wrong), or a JSON scalar: no batch
        jsonguard.parse_strict(body, limits.json_depth)
        raise _not_a_batch()
    try:
        count, rejections = _rejections(
            ((event, None if small else bytes(raw)) for event, raw in items), limits, grants
        )
    except jsonguard.NotAnEnvelope:
        raise _not_a_batch() from None
    _check_batch_size(count, limits)
    return count, rejections


def _rejections(
    items: Iterable[tuple[Any, bytes | None]], limits: Limits, grants: NamespaceGrants | None
) -> tuple[int, tuple[Rejection, ...]]:
    """How many items there are, and those to reject (``_event_bound_reason``, then
    ``_outside_grants``)."""
    rejections = []
    count = 0
    for index, (event, raw) in enumerate(items):
        reason = _event_bound_reason(event, raw, limits)
        if reason is None and grants is not None:
            reason = _outside_grants(event, grants)
        if reason is not None:
            rejections.append(Rejection(index, event_kind(event), reason))
        count += 1
    return count, tuple(rejections)


def _outside_grants(event: dict[str, Any], grants: NamespaceGrants) -> str | None:
    """docs/security.md#grants: an event writes its job's namespace and its datasets'
    (inputs, outputs, a DatasetEvent's dataset); each must be within the writer's."""
    named = [event.get("job"), event.get("dataset")]
    for side in ("inputs", "outputs"):
        if type(event.get(side)) is list:
            named += event[side]
    namespaces = {n.get("namespace") for n in named if type(n) is dict}
    outside = sorted(ns for ns in namespaces if type(ns) is str and not grants.allows(ns))
    if not outside:
        return None
    listed = ", ".join(repr(ns) for ns in outside)
    return (
        f"namespace {listed} is outside the {grants.scope} grants of"
        f" {grants.principal.who}: the event was stored, not projected"
    )


def _check_batch_size(count: int, limits: Limits) -> None:
    if not 1 <= count <= limits.batch_events:
        raise _bad_request(
            "batch-size",
            "Batch has the wrong number of events",
            f"A batch holds 1 to {limits.batch_events:,} events; this one has {count:,}.",
            limit=limits.batch_events,
            actual=count,
        )


def _events_of(doc: Any, single: bool, limits: Limits) -> list[Any]:
    if single:
        if type(doc) is not dict:
            raise _bad_request(
                "not-an-event",
                "Body is not an event",
                f"This route takes one event, a JSON object; got a JSON "
                f"{type(doc).__name__}. Send arrays to /api/v1/lineage/batch.",
            )
        return [doc]
    events = doc.get("events") if type(doc) is dict else doc
    if type(events) is not list:
        raise _not_a_batch()
    _check_batch_size(len(events), limits)
    return events


def _not_a_batch() -> Problem:
    return _bad_request(
        "not-a-batch",
        "Body is not a batch",
        'A batch is a JSON array of events or an object {"events": [...]}.',
    )


def check_body(
    body: bytes,
    single: bool,
    provider: str,
    key: str | None,
    limits: Limits,
    grants: NamespaceGrants | None = None,
    writer: Writer | None = None,
) -> DeliveryDraft:
    """Every check of the body, and the draft to append. A function of its own so that
    the parsed document is garbage before the handler waits for its commit: alive across
    that wait, thousands of objects per request get promoted and walked by the cyclic
    collector (bench/README.md measured +43-74% on batches from dropping them)."""
    received_at = utc_now()
    if single:
        events = _events_of(jsonguard.parse_strict(body, limits.json_depth), single, limits)
        count, rejections = len(events), check_items(events, body, single, limits, grants)
    else:  # item by item, in one pass
        count, rejections = _check_batch(body, limits, grants)
    return DeliveryDraft(
        provider_key=provider,
        idempotency_key=key,
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        route="single" if single else "batch",
        item_count=count,
        rejections=rejections,
        received_at=received_at,
        writer=writer,
    )
