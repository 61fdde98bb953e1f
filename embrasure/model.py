"""Plain data passed between the receiver, the log and the read side. No I/O."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any, NamedTuple

# Crockford's base32, the ULID alphabet: ids sort as strings in creation order.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class DeliveryIds:
    """ULIDs (https://github.com/ulid/spec) that are strictly increasing in one process.

    48 bits of milliseconds, then 80 bits that start random each millisecond and count
    up within it (the spec's monotonic mode), so ids sort by arrival even when many
    deliveries commit in the same millisecond.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def new(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_rand + 1
            else:
                rand = int.from_bytes(os.urandom(10), "big") >> 1  # room to count up
            self._last_ms, self._last_rand = ms, rand
        value = (ms << 80) | rand
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def utc_now() -> str:
    """Now as an RFC 3339 UTC string with microseconds (sorts as text). isoformat, not
    strftime: a third of the time, on every delivery's path (2026-12-05, this machine)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    """An item rejected at the transport boundary (docs/receiver.md#bounds): kept, never
    projected."""

    index: int
    kind: str | None  # RunEvent / JobEvent / DatasetEvent, None when not an object
    reason: str


# A delivery's state, as the read API, the CLI and the OpenAPI document name it: accepted
# (items still pending), projected (all), partially_projected (some), quarantined (none).
# store/reads.py spells the same four in SQL, a CASE over the item counts.
DELIVERY_STATES = ("accepted", "projected", "partially_projected", "quarantined")


# Routes whose body is one item (an event, an admin entry), not a batch.
ONE_ITEM_ROUTES = frozenset({"single", "kafka", "admin"})


@dataclasses.dataclass(frozen=True, slots=True)
class KafkaCoordinates:
    """Where a Kafka message came from (receiver/kafka.py): kept beside its delivery."""

    topic: str
    partition: int
    offset: int
    key: bytes | None  # as the producer set it (OpenLineage: the root job's identity)


@dataclasses.dataclass(frozen=True, slots=True)
class Writer:
    """Who appended a delivery (docs/security.md#audit): the authenticated principal."""

    kind: str  # "token", "jwt" or "session" (Principal.kind)
    subject: str
    issuer: str
    token_id: str

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class DeliveryDraft:
    """A checked request (or Kafka message), ready to be appended to the delivery log."""

    provider_key: str
    idempotency_key: str | None
    body_sha256: str
    body: bytes
    route: str  # "single" or "batch" (HTTP), "kafka", "admin"
    item_count: int
    rejections: tuple[Rejection, ...]
    received_at: str
    kafka: KafkaCoordinates | None = None  # route "kafka" only
    writer: Writer | None = None  # None while auth is off, and from Kafka

    @property
    def dedupe_key(self) -> str:
        """Delivery identity within a provider_key (docs/receiver.md#idempotency)."""
        if self.idempotency_key is not None:
            return "key:" + self.idempotency_key
        return "sha256:" + self.body_sha256

    @property
    def state(self) -> str:
        return "quarantined" if len(self.rejections) == self.item_count else "accepted"


@dataclasses.dataclass(frozen=True, slots=True)
class Token:
    """A bearer token as stored (web/auth.py): its digest, never its text."""

    token_id: str
    digest: str  # hex SHA-256 of the whole token text
    scopes: frozenset[str]
    provider_key: str | None
    name: str
    created_at: str
    revoked_at: str | None

    def allows(self, scope: str) -> bool:
        return self.revoked_at is None and (scope in self.scopes or "admin" in self.scopes)


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """Who wants to hear of what (docs/notifications.md): ``events`` about the ``target``
    (``dataset``, ``job`` or ``namespace``; ``name`` is '' for a namespace), sent to
    ``url`` signed with ``secret`` (Standard Webhooks, ``whsec_…``) in ``format``."""

    subscription_id: str
    target: str
    namespace: str
    name: str
    events: tuple[str, ...]
    url: str
    secret: str
    created_at: str
    created_by: str | None
    format: str = "standard"  # or "slack": a Slack incoming webhook's body (webhooks.py)
    depth: int = 0  # a dataset's: also what lies this many datasets downstream of it
    stale_after: int = 0  # a dataset's: seconds without a write that make it stale (0: off)


@dataclasses.dataclass(frozen=True, slots=True)
class Notification:
    """An outbox row (docs/notifications.md#the-outbox)."""

    subscription_id: str
    cause: str
    notification_id: str
    kind: str
    body: str
    decided_at: str
    state: str
    attempts: int
    next_at: str
    last_error: str | None
    done_at: str | None


@dataclasses.dataclass(frozen=True)
class UiSession:
    """A person signed in to the web UI (access/sign_in.py), as stored: under the digest
    of the id its cookie holds, never the id. Times in seconds since the epoch."""

    digest: str  # hex SHA-256 of the session id
    subject: str
    issuer: str
    name: str
    groups: tuple[str, ...]
    csrf: str  # the token the UI's writes send back (X-CSRF-Token)
    created_at: int
    seen_at: int  # its last use: the idle timeout counts from it
    expires_at: int  # the absolute end (--oidc-session-hours)
    ended_at: int | None = None  # signed out, or ended by an admin
    ended_by: str | None = None


class Decided(NamedTuple):
    """An outbox row as the sender compares it with others of the same thing."""

    cause: str
    decided_at: str
    state: str


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """A rule of the grants table (docs/security.md#grants): ``who`` may use ``scope`` on
    the namespaces matching ``namespaces``, a glob (``airflow-prod/*``, ``finance.*``)."""

    grant_id: str
    who: str  # group:NAME, subject:SUB, client:ID or token:ID
    scope: str  # ingest, read, subscriptions or admin
    namespaces: str
    created_at: str
    created_by: str | None  # who added it, as Principal.who


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request (web/auth.py): a static token of this server, or a JWT its
    identity provider signed; and the (scope, namespace glob) pairs it may use."""

    kind: str  # "token", "jwt", or "session" (signed in to the web UI)
    subject: str  # the token's id, or the JWT's (or the ID token's) sub
    issuer: str  # "embrasure" for a static token, else the JWT's iss
    token_id: str  # the static token's id, or the JWT's jti ("" when it has none)
    name: str  # the token's name, or the JWT's client (azp or client_id)
    groups: frozenset[str]
    provider_key: str | None  # a static token bound to one (web/auth.py)
    scopes: tuple[tuple[str, str], ...]

    def allows(self, scope: str) -> bool:
        """Whether ``scope`` (or admin) is granted on some namespace."""
        return any(s in (scope, "admin") for s, _ in self.scopes)

    @property
    def writer(self) -> Writer:
        return Writer(self.kind, self.subject, self.issuer, self.token_id)

    @property
    def who(self) -> str:
        """How logs and the admin journal name it: a token as "name (id)", a JWT as
        "subject (issuer)"."""
        if self.kind == "token":
            return f"{self.name} ({self.token_id})" if self.name else self.token_id
        return f"{self.subject} ({self.issuer})"


@dataclasses.dataclass(frozen=True, slots=True)
class Receipt:
    """The 202 body (docs/receiver.md#the-receipt)."""

    delivery_id: str
    state: str
    duplicate: bool
    item_count: int
    invalid_item_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "state": self.state,
            "duplicate": self.duplicate,
            "item_count": self.item_count,
            "invalid_item_count": self.invalid_item_count,
        }


# -- projection: what the projector's pure stages produce from one event ---------------------
#
# An event's facts are a function of its bytes alone; the store merges facts from many
# events with order-independent rules (docs/architecture.md#order-independence,
# docs/projection.md#rules). Times travel as ``EventTime``: ``key`` sorts (fixed width, UTC,
# nanoseconds), ``text`` is shown (RFC 3339 UTC keeping the source's sub-second digits). An
# event without eventTime has ``time = None``, which sorts before every known time.

RUN_STATES = ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER")
TERMINAL_STATES = frozenset({"COMPLETE", "FAIL", "ABORT"})


# EventTime and DatasetId are named tuples, not dataclasses: the projector hashes and
# compares millions of them, and tuples do both in C. JobId stays a distinct class so a
# job never equals a dataset of the same namespace and name in a mixed set of nodes.


class EventTime(NamedTuple):
    key: str  # e.g. "2026-11-30T09:00:00.123456789Z": 30 characters, sorts as text
    text: str  # e.g. "2026-11-30T09:00:00.123Z"


class DatasetId(NamedTuple):
    namespace: str
    name: str


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class JobId:
    namespace: str
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class ParentRef:
    """ParentRunFacet (1-2-0): the parent run and job, and the root when given."""

    run_id: str | None
    job: JobId | None
    root_run_id: str | None = None
    root_job: JobId | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Symlink:
    """SymlinksDatasetFacet identifier: TABLE ones are the same dataset; others are
    locations kept on the node."""

    target: DatasetId
    type: str


@dataclasses.dataclass(frozen=True, slots=True)
class Lifecycle:
    """LifecycleStateChangeDatasetFacet: DROP, RENAME (with previousIdentifier), …"""

    state: str
    previous: DatasetId | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DatasetFacts:
    id: DatasetId
    role: str  # "input", "output" (RunEvent/JobEvent) or "dataset" (DatasetEvent)
    facets: dict[str, Any]  # dataset facets, each already checked against its schema
    role_facets: dict[str, Any]  # inputFacets / outputFacets: about this run's use
    symlinks: tuple[Symlink, ...] = ()
    version: str | None = None
    lifecycle: Lifecycle | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ColumnFact:
    """One input field → output field dependency from a columnLineage facet (1-2-0)."""

    target: DatasetId
    target_field: str
    source: DatasetId  # as named in the event's inputs; aliases resolve in the store
    source_field: str
    kind: str  # "mapping" or "indirect"
    klass: str | None  # "direct" / "expression" / "aggregate" for mappings, else None
    masked: bool
    subtypes: tuple[str, ...]  # transformation subtypes seen (INDIRECT ones included)
    derived: str | None = None  # "sql" when parsed from the job's SQL, not declared


@dataclasses.dataclass(frozen=True, slots=True)
class EventFacts:
    """A valid event, normalised: everything the graph needs from it."""

    event_id: str  # SHA-256 hex of the event's canonical JSON
    kind: str  # RunEvent / JobEvent / DatasetEvent
    event_type: str | None  # one of RUN_STATES (unknown strings become OTHER)
    event_type_raw: str | None  # as sent
    time: EventTime | None
    job: JobId | None
    run_id: str | None
    run_facets: dict[str, Any]
    job_facets: dict[str, Any]
    parent: ParentRef | None
    datasets: tuple[DatasetFacts, ...]
    columns: tuple[ColumnFact, ...]
    warnings: tuple[str, ...]
    # Digest of the job and dataset content the facts above were read from: equal shapes
    # give equal job facets, datasets and columns (a memo key for derived rows, not a
    # fact: an event read from its members and one parsed whole may name one content
    # by two digests).
    shape: bytes = dataclasses.field(default=b"", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Quarantined:
    """An event that breaks a rule: never projected; the reason names the rule."""

    kind: str | None
    reason: str
    retriable: bool = False


RUN_EVENT, JOB_EVENT, DATASET_EVENT = "RunEvent", "JobEvent", "DatasetEvent"
EVENT_KINDS = (RUN_EVENT, JOB_EVENT, DATASET_EVENT)


def event_kind(event: Any) -> str | None:
    """An event's kind (docs/projection.md): ``run`` present → RunEvent; else ``job``
    present → JobEvent; else DatasetEvent. A key whose value is null counts as absent
    (``{"run": null, "job": {…}}`` is a JobEvent), as OpenLineage's optional fields read;
    None for an item that is not an object. The receiver and the projector both use this."""
    if type(event) is not dict:
        return None
    if event.get("run") is not None:
        return RUN_EVENT
    return JOB_EVENT if event.get("job") is not None else DATASET_EVENT
