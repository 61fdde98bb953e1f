"""The Store interface: one abstract persistence API, one module per backend.

The delivery log is the source of truth (docs/architecture.md#data-flow). ``append`` is the
only way into it: one call is one transaction, and it returns only after the commit is on
stable storage, so the receiver may acknowledge what it returns. Backends translate their
driver's exceptions into ``errors.StoreError`` and its children.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from embrasure.errors import BodyArchived, IdempotencyConflict
from embrasure.model import (
    Decided,
    DeliveryDraft,
    Grant,
    Notification,
    Receipt,
    Rejection,
    Subscription,
    Token,
    UiSession,
)
from embrasure.store import outbox_sql, sessions_sql
from embrasure.store.pacing import TARGET_HOLD_S
from embrasure.store.read_rows import (
    Backlog,
    DeliveryRow,
    EventPlace,
    JobRecency,
    NamespaceRow,
    NamespaceSpan,
    OutcomeTotal,
    QuarantinedItem,
    RunUse,
    SearchHit,
    SentFacet,
    TypeCount,
)
from embrasure.store.rows import DatasetRow, ItemRow, LinkRow, R, RunRow
from embrasure.store.schema import GRAPH_VERSION

T = TypeVar("T")

AppendResult = Receipt | IdempotencyConflict
Key = tuple[Any, ...]  # the values of some columns, in the order the caller named them
Record = type[tuple[Any, ...]]  # a graph table's record class (rows.GRAPH_ROWS)


@dataclasses.dataclass(frozen=True, slots=True)
class LogEntry:
    """A delivery as the projector reads it from the log. ``body`` is None once
    retention moved it to the archive (docs/operations.md#retention-and-the-archive)."""

    seq: int
    delivery_id: str
    route: str
    body: bytes | None
    item_count: int
    rejections: tuple[Rejection, ...]

    def stored_body(self) -> bytes:
        """The body, which the projector needs: BodyArchived when it is not here."""
        if self.body is None:
            raise BodyArchived(
                f"the body of delivery {self.delivery_id} (seq {self.seq}) was moved to the"
                " archive by retention: give the archive (--archive) to read it"
            )
        return self.body


class ProjectionTx(abc.ABC):
    """One projection transaction on one graph generation. A table is named by its
    record class (store/rows.py), whose fields are its key columns then its value
    columns (schema.COLUMNS). Rows read come back as records of it. Rows written are
    values in the record's field order: a record, or for the projector's bulk writes a
    plain tuple, which CPython builds about 6 times faster and whose GC stops tracking
    it (a NamedTuple is tracked until freed): measured 10% of projection CPU over 20,000
    events (bench/README.md, typed rows). Nothing is visible to readers until the
    transaction commits, together with the position written by ``set_position``."""

    prefix: str  # the generation's table prefix (schema.prefix)

    @abc.abstractmethod
    def insert_new(self, table: Record, rows: Sequence[Key]) -> list[bool]:
        """Insert rows whose key is not there yet; True for each row inserted."""

    @abc.abstractmethod
    def insert_missing(self, table: Record, rows: Sequence[Key]) -> None:
        """Insert rows whose key is not there yet, when nobody needs to know which."""

    @abc.abstractmethod
    def load(self, table: type[R], keys: Iterable[Key]) -> dict[Key, R]:
        """The stored rows for ``keys``: key tuple → whole row."""

    @abc.abstractmethod
    def save(self, table: Record, rows: Sequence[Key]) -> None:
        """Insert or replace whole rows."""

    @abc.abstractmethod
    def merge(self, table: Record, rows: Sequence[Key]) -> None:
        """Insert rows, or join each into the stored row with its key by the table's
        merge rule (schema.MERGES). Keys must be distinct within one call."""

    @abc.abstractmethod
    def delete(self, table: Record, keys: Iterable[Key]) -> None:
        """Delete rows by key."""

    @abc.abstractmethod
    def sync_run_keys(self, run_ids: Sequence[str]) -> None:
        """Set the ``run_key`` of these runs' run_io rows to their runs row's
        ``latest_key`` (merged already in this transaction): a dataset's runs are listed
        in that order from an index, and an event of a run moves its latest eventTime
        whether it names the dataset or not."""

    @abc.abstractmethod
    def stored_keys(self, table: Record, keys: Iterable[Key]) -> set[Key]:
        """Those of ``keys`` the table holds, read from its key alone (``load`` reads
        whole rows, which may be large)."""

    @abc.abstractmethod
    def select_by(self, table: type[R], columns: Sequence[str], values: Iterable[Key]) -> list[R]:
        """Whole rows whose ``columns`` equal one of ``values``."""

    @abc.abstractmethod
    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[LinkRow]:
        """Every links row with either end in ``identities``, in key order."""

    @abc.abstractmethod
    def any_subscription(self) -> bool:
        """Whether any notification subscription exists: a projection without one
        decides no notification and reads nothing for them."""

    @abc.abstractmethod
    def subscriptions(self) -> list[Subscription]:
        """The notification subscriptions, as this transaction sees them."""

    @abc.abstractmethod
    def cause_decided(self, prefix: str) -> bool:
        """Whether the outbox holds a notification, for any subscription, whose cause
        starts with ``prefix`` (projector/causes.py: a change decided before)."""

    @abc.abstractmethod
    def add_notifications(self, rows: Sequence[Notification]) -> None:
        """Outbox rows decided by this projection; a (subscription, cause) already there
        is left as it is (docs/notifications.md#the-outbox)."""

    @abc.abstractmethod
    def position(self) -> int:
        """This generation's position: every delivery up to it is projected."""

    @abc.abstractmethod
    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        """The deliveries after ``after_seq`` that this transaction is to project, in log
        order, within the limits of Store.read_log. SQLite: the log after the position
        (the write lock keeps every other projector out). PostgreSQL: deliveries not yet
        projected in this generation and not being projected by another transaction,
        each locked until this one ends (``FOR UPDATE SKIP LOCKED``), so projectors in
        several processes share the log."""

    @abc.abstractmethod
    def set_position(self, seq: int) -> None:
        """Record that the deliveries read in this transaction, up to ``seq``, are
        projected (their ``deliveries`` rows are written by then). SQLite: the position
        becomes ``seq``. PostgreSQL, where projectors commit out of log order: the
        position moves up to the last delivery below which every one is projected."""

    @abc.abstractmethod
    def hold_log(self) -> None:
        """Until this transaction ends, keep new deliveries out of the log, and make
        ``read_log`` wait for deliveries another projector holds instead of skipping
        them: reproject's swap must see the whole log. (SQLite's write lock does both
        already.)"""

    @abc.abstractmethod
    def trimmable_runs(
        self, horizon_key: str, limit: int, after: tuple[str, str, str] | None = None
    ) -> tuple[list[str], tuple[str, str, str] | None]:
        """Up to ``limit`` runs --retain-runs removes: latest eventTime key before
        ``horizon_key``, and a later run of the same job (each job's latest run stays);
        from the cursor ``after`` on, and the cursor the next call starts from (None
        once none is left)."""

    @abc.abstractmethod
    def run_facet_values(self, run_ids: Sequence[str]) -> frozenset[bytes]:
        """The hashes of the facet values the runs' facets name, for
        ``delete_unnamed_values`` once the runs are gone."""

    @abc.abstractmethod
    def count_events(self, run_ids: Sequence[str]) -> int:
        """How many events rows the runs have (a run's only grow until it is trimmed)."""

    @abc.abstractmethod
    def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete runs with their per-run rows (run_io, events, the run's facets and
        what it sent about its inputs and outputs)."""

    @abc.abstractmethod
    def delete_unnamed_shapes(self, keys: Sequence[bytes]) -> set[bytes]:
        """Delete those of ``keys`` (at most run_retention.UNNAMED_PER_STATEMENT) that no
        event names any more, with the facet sets no shape names then; return the
        hashes of the facet values those facet sets named."""

    @abc.abstractmethod
    def delete_unnamed_values(self, hashes: Sequence[bytes]) -> None:
        """Delete those of ``hashes`` (at most run_retention.UNNAMED_PER_STATEMENT) that
        no facet or facet set names any more."""

    @abc.abstractmethod
    def record_run_horizon(self, horizon_key: str, now: str) -> str:
        """Move the run horizon (kept beside the log, for every generation) up to
        ``horizon_key``, never down; return it."""

    @abc.abstractmethod
    def serve_this_generation(self) -> int:
        """Make this transaction's generation the served one (at commit); return the
        generation served until now."""


class GraphReader(abc.ABC):
    """Reads of the log and the served graph, all in one snapshot (one read transaction).
    A graph table is named by its record class (store/rows.py), and its rows come back
    as records of it."""

    @abc.abstractmethod
    def rows(
        self, table: type[R], columns: Sequence[str] = (), values: Iterable[Key] = ()
    ) -> list[R]:
        """Rows of a graph table whose ``columns`` equal one of ``values`` (all rows,
        in key order, when no columns are given)."""

    @abc.abstractmethod
    def pick(
        self,
        table: Record,
        picked: Sequence[str],
        columns: Sequence[str],
        values: Iterable[Key],
    ) -> list[Key]:
        """Only the ``picked`` columns (in that order) of the rows ``rows`` would return:
        cheaper when an index on ``columns`` covers them, or the table's rows are wide."""

    @abc.abstractmethod
    def distinct(self, table: Record, picked: Sequence[str]) -> list[Key]:
        """The distinct values of the ``picked`` columns over the whole table, sorted."""

    @abc.abstractmethod
    def facet_values(self, hashes: Iterable[bytes]) -> dict[bytes, str]:
        """Facet values by hash (``facets.value_hash``, ``facet_sets.value_hash``): each
        one's canonical JSON, decoded from how it is stored (store/facet_values.py)."""

    @abc.abstractmethod
    def page(
        self,
        table: type[R],
        after: Key | None,
        limit: int,
        namespace: str | None = None,
        contains: str | None = None,
    ) -> list[R]:
        """Rows of a (ns, name)-keyed graph table in key order after the key ``after``,
        in ``namespace`` when given, whose name contains ``contains`` (any case)."""

    @abc.abstractmethod
    def delivery(self, delivery_id: str) -> DeliveryRow | None:
        """The delivery's log columns, its state, and its projection counts."""

    @abc.abstractmethod
    def deliveries(
        self,
        provider_key: str | None,
        state: str | None,
        before_seq: int | None,
        limit: int,
        writer: str | None = None,
    ) -> list[DeliveryRow]:
        """Deliveries newest first, as ``delivery`` shapes them; ``writer``: those whose
        authenticated writer has that subject."""

    @abc.abstractmethod
    def items(self, seq: int) -> list[ItemRow]:
        """Projected item outcomes of one delivery, by index."""

    @abc.abstractmethod
    def quarantined(self, before: tuple[int, int] | None, limit: int) -> list[QuarantinedItem]:
        """Quarantined items, newest delivery first."""

    @abc.abstractmethod
    def body(self, seq: int) -> bytes | None:
        """A delivery's body as received; None when the delivery is not stored or
        retention moved its body to the archive."""

    @abc.abstractmethod
    def outcome_totals(self) -> list[OutcomeTotal]:
        """The totals per state of the projected deliveries (projected,
        partially_projected, quarantined), from the projection's own table: no delivery
        body is read."""

    @abc.abstractmethod
    def backlog(self) -> Backlog:
        """Of the log past the graph's position: deliveries with items to project, those
        items, the oldest such delivery's received_at, deliveries whose every item was
        rejected on receipt (quarantined already, nothing to project)."""

    @abc.abstractmethod
    def recent_run_ids(self, limit: int) -> list[str]:
        """The runs named by the ``limit`` events with the latest eventTimes, newest
        first, each once (so fewer than ``limit`` when a run has several)."""

    @abc.abstractmethod
    def jobs_by_recency(
        self,
        namespace: str | None,
        skip_namespaces: Collection[str],
        skip_jobs: Collection[tuple[str, str]],
        states: Collection[str | None] | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[JobRecency]]:
        """The jobs of ``namespace`` (of all when None, less ``skip_namespaces``), the
        most recently run first (their runs' latest eventTime key; jobs without runs
        last), then by namespace and name, less ``skip_jobs`` (hidden ones): how many
        there are, and the page from ``offset``. With ``states``, only jobs whose latest
        run is in one of them (None: a run without a state). Ordered and paged in the
        database: a seek per job along the runs' job index, no rows to the caller but
        the page."""

    @abc.abstractmethod
    def sent_datasets(self, identities: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of ``identities`` a producer sent as a dataset (an edge names it, or it
        has facets of its own), not only another's symlinks facet."""

    @abc.abstractmethod
    def datasets_in(
        self, namespace: str, skip: Collection[tuple[str, str]], offset: int, limit: int
    ) -> tuple[int, list[DatasetRow]]:
        """Every dataset identity in ``namespace`` — sent as a dataset, or a table a
        symlinks facet names (a symlinked path and its table each in its own) — less
        ``skip``, by name: how many there are, and the page from ``offset``; paged in
        the database."""

    @abc.abstractmethod
    def namespace_spans(self) -> list[NamespaceSpan]:
        """Every namespace that edges name, with the first and last eventTime of those
        edges: one pass over the edges table."""

    @abc.abstractmethod
    def namespaces(self, after: str | None, limit: int) -> list[NamespaceRow]:
        """Namespaces and what is in them, in namespace order after ``after``."""

    @abc.abstractmethod
    def search(self, q: str, limit: int) -> list[SearchHit]:
        """Datasets (as sent), jobs and fields whose name contains ``q`` (ASCII letters in
        any case): best rank first, then shorter, then by identity."""

    @abc.abstractmethod
    def events(
        self,
        after_key: str | None,
        before_key: str | None,
        cursor: Key | None,
        limit: int,
        descending: bool = False,
        offset: int = 0,
    ) -> list[EventPlace]:
        """Events with ``after_key <= time_key < before_key``, in (time_key, event_id)
        order (``descending``: the reverse) after ``cursor``, ``offset`` of them skipped."""

    @abc.abstractmethod
    def event_type_counts(self, after_key: str, before_key: str) -> list[TypeCount]:
        """Events with ``after_key <= time_key < before_key``, counted by eventType."""

    @abc.abstractmethod
    def first_seen_keys(self, kind: str) -> list[str]:
        """The first eventTime key of every job (``kind`` "job") or every dataset
        identity ("dataset", as ``datasets_in`` lists them), ``''`` when none is known: a
        job's from its edges, runs and JobEvents; a dataset's from its edges, its facets'
        winning values (a DatasetEvent's dataset has no edge) and the links naming it (a
        table only a symlinks facet names)."""

    @abc.abstractmethod
    def count_events(self, after_key: str | None, before_key: str | None) -> int:
        """How many events have ``after_key <= time_key < before_key``."""

    @abc.abstractmethod
    def run_horizon(self) -> str | None:
        """The eventTime key before which --retain-runs removed runs (None: none removed)."""

    @abc.abstractmethod
    def runs_of_job(
        self, job: tuple[str, str], before: tuple[str, str] | None, limit: int
    ) -> list[RunRow]:
        """A job's runs, newest (latest eventTime) first."""

    @abc.abstractmethod
    def sent_facets(self, owners: Sequence[tuple[str, str]]) -> list[SentFacet]:
        """For each (run id, entity) of ``owners`` (entity: projector/shapes.py
        ``sent_entity``), every value the run's events' shapes hold under it, each with
        the latest eventTime key among the events that sent it: the facet rule ranks by
        (eventTime, value hash), so that event stands for all of them."""

    @abc.abstractmethod
    def runs_of_dataset(
        self,
        dataset: tuple[str, str],
        direction: str,
        before: tuple[str, str, str] | None,
        limit: int,
    ) -> list[RunUse]:
        """The runs that used one dataset identity (as sent) in ``direction``, newest
        first by (run_key, run_id), strictly after ``before`` in the order (run_key,
        run_id, direction) descending, with the version each named; read from the
        run_io_ds index, so a page costs its own rows whatever the dataset's run count.
        A run whose events named two jobs has a row under each (adjacent)."""


class Store(abc.ABC):
    """Persistence: the delivery log, the graph generations projected from it, and tokens."""

    dialect: str
    url: str  # what open_store opens it by, in another process too (turns.py)
    # False (SQLite): one projection transaction at a time holds the write lock, so the
    # projector reads and validates a batch before taking it. True (PostgreSQL): several
    # projectors run at once, each claiming its deliveries inside its transaction
    # (ProjectionTx.read_log), then validating them.
    concurrent_projectors: bool = False
    # A run trim's step (lifecycle/run_retention.py): how long its transaction should
    # take and at most how many runs it removes (store/pacing.py). SQLite: short, since
    # every writer, the receiver's group commit first, waits for it (in the soak's load,
    # 1,000 runs held the write lock 0.3 to 1 s, 100 for 20 to 110 ms).
    step_hold_s: float = TARGET_HOLD_S
    step_runs: int = 100
    # The schema versions opening the store applied (1 first: it created the schema).
    migrations_applied: Sequence[int] = ()

    @abc.abstractmethod
    def append(self, drafts: Sequence[DeliveryDraft]) -> list[AppendResult]:
        """Append deliveries in ONE durable transaction; one result per draft, in order.

        A draft whose identity (provider_key + Idempotency-Key, else + body SHA-256) is
        already stored, earlier or earlier in ``drafts``, gets the original receipt with
        ``duplicate=True``; the same Idempotency-Key with another body gets an
        IdempotencyConflict. Raises StoreUnavailable, having committed nothing, when the
        transaction cannot commit.
        """

    @abc.abstractmethod
    def position(self, generation: int | None = None) -> int:
        """The projector position of the served graph (or of ``generation``): every
        delivery up to it is projected (0 before any projection)."""

    @abc.abstractmethod
    def read_log(
        self, after_seq: int, limit: int, max_bytes: int, max_items: int | None = None
    ) -> list[LogEntry]:
        """Deliveries with seq > after_seq in log order: at most ``limit`` of them, and
        stopping after the one that brings the bodies past ``max_bytes`` or the items
        past ``max_items``."""

    @abc.abstractmethod
    def free_disk_bytes(self) -> int | None:
        """Bytes free on the filesystem holding the log, or None when that is not on
        this machine (a database server's)."""

    def free_pages(self) -> int | None:
        """Pages free inside the database's file, which its writers reuse before the
        file grows (SQLite's free list), or None where the backend does not keep such a
        count (PostgreSQL) or it cannot be read now (the pass that follows says why)."""
        return None

    def engine_memory_bytes(self) -> int | None:
        """Memory the database engine holds in this process (SQLite: its page caches
        above all), or None when the engine is another process (PostgreSQL)."""
        return None

    @abc.abstractmethod
    def projection(
        self, generation: int | None = None
    ) -> contextlib.AbstractContextManager[ProjectionTx]:
        """A write transaction on the served graph generation (or on ``generation``, one
        being built by reproject); commits on a clean exit."""

    @abc.abstractmethod
    def projection_snapshot(
        self, generation: int | None = None
    ) -> contextlib.AbstractContextManager[ProjectionTx]:
        """A read-only transaction on the served graph generation (or on
        ``generation``): one snapshot for all its reads, holding no lock a writer waits
        for (SQLite: a WAL read on a query_only connection; PostgreSQL: REPEATABLE READ
        READ ONLY), so its writes raise. A retention step reads there what it removes
        before it takes the write lock (lifecycle/run_retention.py)."""

    @abc.abstractmethod
    def graph_version(self) -> int:
        """schema.GRAPH_VERSION of the code that built the served graph."""

    _serves_current: bool = False

    def serves_current_graph(self) -> bool:
        """Whether the served graph was built by this code's GRAPH_VERSION, so this code's
        reads fit its tables. False while the projector rebuilds a graph an older
        Embrasure built (worker.py); once True it stays, as a swap only ever serves the
        newest build, so only the first reads after a start ask the database."""
        if not self._serves_current:
            self._serves_current = self.graph_version() == GRAPH_VERSION
        return self._serves_current

    @abc.abstractmethod
    def create_generation(self) -> int:
        """Create empty graph tables for a new generation beside the served one, without
        the indexes only reads use (schema.DEFERRED_INDEXES): ``index_generation`` builds
        them once the rebuild has folded the log, before anyone reads it."""

    @abc.abstractmethod
    def index_generation(self, generation: int) -> None:
        """Build a new generation's DEFERRED_INDEXES, each in a transaction of its own."""

    @abc.abstractmethod
    def drop_generation(self, generation: int) -> None:
        """Drop a generation's graph tables (never the served one)."""

    @abc.abstractmethod
    def reader(
        self, timeout: float | None = None
    ) -> contextlib.AbstractContextManager[GraphReader]:
        """A read snapshot of the log and the served graph. With ``timeout`` (seconds),
        the database stops any query of it running past that long after the snapshot
        began, and ReadTooLong is raised (docs/operations.md#reads-under-load)."""

    @abc.abstractmethod
    def tokens(self) -> list[Token]:
        """Every bearer token ever created, revoked ones included (web/auth.py)."""

    @abc.abstractmethod
    def add_token(self, token: Token) -> None:
        """Store a new token (its digest, never its text)."""

    @abc.abstractmethod
    def revoke_token(self, token_id: str, at: str) -> bool:
        """Mark a token revoked at ``at``; False when no live token has that id."""

    @abc.abstractmethod
    def grants(self) -> list[Grant]:
        """Every grant rule (docs/security.md#grants), oldest first."""

    @abc.abstractmethod
    def add_grant(self, grant: Grant) -> None:
        """Store a new grant rule."""

    @abc.abstractmethod
    def remove_grant(self, grant_id: str) -> bool:
        """Delete a grant rule; False when none has that id."""

    # -- subscriptions and the outbox (docs/notifications.md) ----------------------------

    @abc.abstractmethod
    def _side_table(
        self, what: str, work: Callable[[Any], T], write: bool = True, *, log: bool = False
    ) -> T:
        """``work`` over a connection in a short transaction of its own (SQL:
        store/outbox_sql.py, store/sessions_sql.py); ``log``: on a table kept with the
        log (subscriptions, sessions), not with the graph (the outbox): SQLite has them
        in two files."""

    def add_session(self, session: UiSession) -> None:
        """A new web UI session (access/sign_in.py), under its id's digest."""
        self._side_table("starting a session", lambda c: sessions_sql.add(c, session), log=True)

    def ui_session(self, digest: str) -> UiSession | None:
        """The session whose id has this digest, ended or not; None when none has."""
        return self._side_table(
            "reading a session", lambda c: sessions_sql.get(c, digest), write=False, log=True
        )

    def touch_session(self, digest: str, seen_at: int) -> None:
        """The session was used at ``seen_at`` (its idle time starts again)."""
        self._side_table(
            "touching a session", lambda c: sessions_sql.touch(c, digest, seen_at), log=True
        )

    def end_sessions(
        self, at: int, by: str, digest: str | None = None, subject: str | None = None
    ) -> int:
        """End the live sessions: the one whose id has ``digest``, or every one of
        ``subject``, or (neither given) every one; how many were live."""
        return self._side_table(
            "ending sessions",
            lambda c: sessions_sql.end(c, at, by, digest, subject),
            log=True,
        )

    def subscriptions(self) -> list[Subscription]:
        return self._side_table(
            "reading subscriptions", outbox_sql.subscriptions, write=False, log=True
        )

    def add_subscription(self, s: Subscription) -> None:
        self._side_table(
            "storing a subscription", lambda c: outbox_sql.add_subscription(c, s), log=True
        )

    def remove_subscription(self, subscription_id: str) -> bool:
        return self._side_table(
            "removing a subscription",
            lambda c: outbox_sql.remove_subscription(c, subscription_id),
            log=True,
        )

    def add_stale_notifications(self, rows: Sequence[Notification]) -> None:
        """Outbox rows the sender decided (a dataset not written for too long: no event
        causes those); a cause already there is left as it is."""
        self._side_table("storing notifications", lambda c: outbox_sql.add_notifications(c, rows))

    def any_notification_due(self, now: str) -> bool:
        """A read, so that a sender with nothing to do takes no write lock (SQLite's is
        the projector's too)."""
        return self._side_table(
            "reading the outbox", lambda c: outbox_sql.any_due(c, now), write=False
        )

    def claim_notifications(self, now: str, until: str, limit: int) -> list[Notification]:
        """Due notifications, claimed until ``until`` (store/outbox_sql.py ``claim``)."""
        return self._side_table(
            "claiming notifications", lambda c: outbox_sql.claim(c, now, until, limit)
        )

    def update_notification(self, n: Notification) -> None:
        self._side_table("updating the outbox", lambda c: outbox_sql.update(c, n))

    def notification_states(self, subscription_id: str, causes: Iterable[str]) -> dict[str, str]:
        return self._side_table(
            "reading the outbox",
            lambda c: outbox_sql.states(c, subscription_id, causes),
            write=False,
        )

    def decided(self, subscription_id: str, prefix: str) -> list[Decided]:
        """The subscription's notifications whose cause starts with ``prefix`` (those of
        one check, or one dataset's schema), oldest decided first."""
        return self._side_table(
            "reading the outbox",
            lambda c: outbox_sql.decided(c, subscription_id, prefix),
            write=False,
        )

    def outbox_summary(self) -> tuple[dict[str, int], str | None]:
        """Notifications by state, and when the oldest pending one was decided."""
        return self._side_table("reading the outbox", outbox_sql.summary, write=False)

    def forget_notifications(self, before: str) -> int:
        """Delete outbox rows done before ``before`` (store/outbox_sql.py ``forget``)."""
        return self._side_table("trimming the outbox", lambda c: outbox_sql.forget(c, before))

    def failing_subscriptions(self, attempts: int) -> list[str]:
        """Subscriptions whose receiver refused a notification ``attempts`` times or more
        and has not taken it since."""
        return self._side_table(
            "reading the outbox", lambda c: outbox_sql.failing(c, attempts), write=False
        )

    def notifications(self, subscription_id: str | None = None) -> list[Notification]:
        return self._side_table(
            "reading the outbox", lambda c: outbox_sql.notifications(c, subscription_id), False
        )

    @abc.abstractmethod
    def server_secret(self, name: str) -> bytes:
        """A random secret of the server's (256 bits), made on first use and the same in
        every process and after restarts (access/sign_in.py)."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers a trivial query."""

    @abc.abstractmethod
    def backup(self, path: str) -> None:
        """Write a consistent copy of the whole database, as of one moment, to the new
        file ``path``, while the store goes on serving (readers and writers alike). The
        file appears only once complete: a failed backup leaves nothing at ``path``."""

    @abc.abstractmethod
    def log_trimmer(self) -> contextlib.AbstractContextManager[LogTrimmer | None]:
        """The retention pass's hold on the log (lifecycle/retention.py): a LogTrimmer
        while this process holds the database's one retention lock, None when another
        pass holds it. A kill -9 releases the lock with the process."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""


# -- retention (docs/operations.md#retention-and-the-archive) ----------------------------


class LogBody(NamedTuple):
    """A stored delivery body with what its archived copy carries: the exact bytes."""

    seq: int
    delivery_id: str
    provider_key: str
    received_at: str
    body: bytes


class SegmentRecord(NamedTuple):
    """A log_segments row: an archive segment whose deliveries left the database.
    Every body with seq up to the greatest ``last_seq`` recorded is in one of them."""

    name: str
    first_seq: int
    last_seq: int
    delivery_count: int
    sha256: str
    archived_at: str


class LogTrimmer(abc.ABC):
    """What a retention pass reads and writes in the database. Bodies leave in seq
    order: every body up to ``archived_through()`` is in a recorded segment, every body
    after it still in the database (so a rerun knows where it stopped, and no delivery
    is ever put in a second segment)."""

    @abc.abstractmethod
    def archived_through(self) -> int:
        """The greatest seq whose body is archived (0 before the first segment)."""

    @abc.abstractmethod
    def trimmable_through(self, horizon: str) -> int:
        """The greatest seq whose body may leave: it and every delivery before it were
        received before ``horizon`` (received_at text) and are projected in the served
        graph. Also fixes which PostgreSQL day partitions this pass empties whole."""

    @abc.abstractmethod
    def untrimmed(
        self, after_seq: int, through_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[LogBody]:
        """The bodies still stored with ``after_seq < seq <= through_seq``, in seq
        order, at most ``limit``, and no more once they hold ``max_bytes`` (as received:
        at least one)."""

    @abc.abstractmethod
    def delivery_ids(self, seqs: Iterable[int]) -> dict[int, str]:
        """seq → delivery_id, to check that an archive segment is this log's."""

    @abc.abstractmethod
    def trim(self, segment: SegmentRecord, seqs: Sequence[int]) -> int:
        """In one short transaction: record ``segment`` (durable and verified already)
        and delete the bodies after ``archived_through()`` up to its last seq, which
        must all be among its ``seqs`` (else StoreError, nothing changed). Bodies in a
        day partition emptied whole stay until ``give_back`` drops it. Returns the
        stored (compressed) bytes deleted."""

    @abc.abstractmethod
    def trimmed(self, after_seq: int, limit: int) -> list[tuple[int, str]]:
        """(seq, body_sha256) of the deliveries whose bodies left the database, after
        ``after_seq`` in seq order, at most ``limit``: what `archive verify --db` looks
        for in the archive."""

    @abc.abstractmethod
    def give_back(self, horizon: str, free_at_start: int | None = None) -> int:
        """Return the space of trimmed bodies. SQLite: an incremental vacuum in short
        steps, of at most the pages free when it begins, and with ``free_at_start``
        (``Store.free_pages()`` when the pass began) of no more than that: the pages
        the pass freed stay for the next interval's writes. PostgreSQL: drop each day
        partition before ``horizon`` whose bodies are all archived, and delete archived
        bodies left elsewhere (after a crash). Returns the bytes given back (file
        pages, or dropped partitions' size)."""
