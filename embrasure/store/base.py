"""The Store interface: one abstract persistence API, one module per backend.

The delivery log is the source of truth (DESIGN §1). ``append`` is the only way into it:
one call is one transaction, and it returns only after the commit is on stable storage,
so the receiver may acknowledge what it returns. Backends translate their driver's
exceptions into ``errors.StoreError`` and its children.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from embrasure.errors import IdempotencyConflict
from embrasure.model import Delivery, DeliveryDraft, Receipt, Rejection, Token

AppendResult = Receipt | IdempotencyConflict
Row = tuple[Any, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class LogEntry:
    """A delivery as the projector reads it from the log."""

    seq: int
    delivery_id: str
    route: str
    body: bytes
    item_count: int
    rejections: tuple[Rejection, ...]


class ProjectionTx(abc.ABC):
    """One projection transaction on one graph generation (graph_schema.COLUMNS names
    the tables and their key and value columns). Rows are tuples: key columns first,
    then value columns. Nothing is visible to readers until the transaction commits,
    together with the position written by ``set_position``."""

    @abc.abstractmethod
    def insert_new(self, table: str, rows: Sequence[Row]) -> list[bool]:
        """Insert rows whose key is not there yet; True for each row inserted."""

    @abc.abstractmethod
    def insert_missing(self, table: str, rows: Sequence[Row]) -> None:
        """Insert rows whose key is not there yet, when nobody needs to know which."""

    @abc.abstractmethod
    def load(self, table: str, keys: Iterable[Row]) -> dict[Row, Row]:
        """The stored rows for ``keys``: key tuple → value tuple."""

    @abc.abstractmethod
    def save(self, table: str, rows: Sequence[Row]) -> None:
        """Insert or replace whole rows."""

    @abc.abstractmethod
    def merge(self, table: str, rows: Sequence[Row]) -> None:
        """Insert rows, or join each into the stored row with its key by the table's
        merge rule (graph_schema.MERGES). Keys must be distinct within one call."""

    @abc.abstractmethod
    def delete(self, table: str, keys: Iterable[Row]) -> None:
        """Delete rows by key."""

    @abc.abstractmethod
    def select_by(self, table: str, columns: Sequence[str], values: Iterable[Row]) -> list[Row]:
        """Whole rows (key then value columns) whose ``columns`` equal one of ``values``."""

    @abc.abstractmethod
    def links_touching(self, identities: Iterable[tuple[str, str]]) -> list[Row]:
        """Every links row (a_ns, a_name, b_ns, b_name, kind, type) with either end in
        ``identities``."""

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
    def serve_this_generation(self) -> int:
        """Make this transaction's generation the served one (at commit); return the
        generation served until now."""


class GraphReader(abc.ABC):
    """Reads of the log and the served graph, all in one snapshot (one read transaction).
    Rows are tuples in graph_schema.COLUMNS order (key columns, then value columns)."""

    @abc.abstractmethod
    def rows(
        self, table: str, columns: Sequence[str] = (), values: Iterable[Row] = ()
    ) -> list[Row]:
        """Rows of a graph table whose ``columns`` equal one of ``values`` (all rows,
        in key order, when no columns are given)."""

    @abc.abstractmethod
    def pick(
        self, table: str, picked: Sequence[str], columns: Sequence[str], values: Iterable[Row]
    ) -> list[Row]:
        """Only the ``picked`` columns of the rows ``rows`` would return: cheaper when an
        index on ``columns`` covers them, or the table's rows are wide."""

    @abc.abstractmethod
    def distinct(self, table: str, picked: Sequence[str]) -> list[Row]:
        """The distinct values of the ``picked`` columns over the whole table, sorted."""

    @abc.abstractmethod
    def page(
        self,
        table: str,
        after: Row | None,
        limit: int,
        namespace: str | None = None,
        contains: str | None = None,
    ) -> list[Row]:
        """Rows of a (ns, name)-keyed graph table in key order after the key ``after``,
        in ``namespace`` when given, whose name contains ``contains`` (any case)."""

    @abc.abstractmethod
    def delivery(self, delivery_id: str) -> Row | None:
        """The delivery's log columns, its state, and its projection counts."""

    @abc.abstractmethod
    def deliveries(
        self, provider_key: str | None, state: str | None, before_seq: int | None, limit: int
    ) -> list[Row]:
        """Deliveries newest first, as ``delivery`` shapes them."""

    @abc.abstractmethod
    def items(self, seq: int) -> list[Row]:
        """Projected item outcomes of one delivery."""

    @abc.abstractmethod
    def quarantined(self, before: tuple[int, int] | None, limit: int) -> list[Row]:
        """Quarantined items, newest delivery first."""

    @abc.abstractmethod
    def body(self, seq: int) -> bytes | None:
        """A delivery's stored body."""

    @abc.abstractmethod
    def outcome_totals(self) -> list[Row]:
        """(state, deliveries, projected items, quarantined items) per state of the
        projected deliveries (projected, partially_projected, quarantined), from the
        projection's own table: no delivery body is read."""

    @abc.abstractmethod
    def backlog(self) -> tuple[int, int, str | None, int]:
        """Of the log past the graph's position: (deliveries with items to project, those
        items, the oldest such delivery's received_at, deliveries whose every item was
        rejected on receipt — quarantined already, nothing to project)."""

    @abc.abstractmethod
    def recent_run_ids(self, limit: int) -> list[str]:
        """The runs named by the ``limit`` events with the latest eventTimes, newest
        first, each once (so fewer than ``limit`` when a run has several)."""

    @abc.abstractmethod
    def namespaces(self, after: str | None, limit: int) -> list[Row]:
        """(namespace, dataset identities, jobs) in namespace order after ``after``."""

    @abc.abstractmethod
    def search(self, q: str, limit: int) -> list[Row]:
        """(kind, ns, name, field, rank) of datasets (as sent), jobs and fields whose name
        contains ``q`` (ASCII letters in any case): rank 0 exact, 1 prefix, 2 substring;
        best first, then shorter, then by identity."""

    @abc.abstractmethod
    def events(
        self, after_key: str | None, before_key: str | None, cursor: Row | None, limit: int
    ) -> list[Row]:
        """(event_id, time_key, time_text, seq, idx, route) of events with ``after_key
        <= time_key < before_key``, in (time_key, event_id) order after ``cursor``; seq,
        idx and route say where the event's bytes are in the log (where first seen)."""

    @abc.abstractmethod
    def runs_of_job(
        self, job: tuple[str, str], before: tuple[str, str] | None, limit: int
    ) -> list[Row]:
        """A job's runs, newest (latest eventTime) first."""


class Store(abc.ABC):
    """Persistence for the delivery log (and, later, the graph projected from it)."""

    dialect: str
    # False (SQLite): one projection transaction at a time holds the write lock, so the
    # projector reads and validates a batch before taking it. True (PostgreSQL): several
    # projectors run at once, each claiming its deliveries inside its transaction
    # (ProjectionTx.read_log), then validating them.
    concurrent_projectors: bool = False

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
    def get_delivery(self, delivery_id: str) -> Delivery | None:
        """A stored delivery, without its body."""

    @abc.abstractmethod
    def get_body(self, delivery_id: str) -> bytes | None:
        """The stored request body, byte for byte."""

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

    @abc.abstractmethod
    def projection(
        self, generation: int | None = None
    ) -> contextlib.AbstractContextManager[ProjectionTx]:
        """A write transaction on the served graph generation (or on ``generation``, one
        being built by reproject); commits on a clean exit."""

    @abc.abstractmethod
    def graph_version(self) -> int:
        """graph_schema.GRAPH_VERSION of the code that built the served graph."""

    @abc.abstractmethod
    def create_generation(self) -> int:
        """Create empty graph tables for a new generation beside the served one."""

    @abc.abstractmethod
    def drop_generation(self, generation: int) -> None:
        """Drop a generation's graph tables (never the served one)."""

    @abc.abstractmethod
    def reader(self) -> contextlib.AbstractContextManager[GraphReader]:
        """A read snapshot of the log and the served graph."""

    @abc.abstractmethod
    def tokens(self) -> list[Token]:
        """Every bearer token ever created, revoked ones included (auth.py)."""

    @abc.abstractmethod
    def add_token(self, token: Token) -> None:
        """Store a new token (its digest, never its text)."""

    @abc.abstractmethod
    def revoke_token(self, token_id: str, at: str) -> bool:
        """Mark a token revoked at ``at``; False when no live token has that id."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers a trivial query."""

    @abc.abstractmethod
    def backup(self, path: str) -> None:
        """Write a consistent copy of the whole database, as of one moment, to the new
        file ``path``, while the store goes on serving (readers and writers alike). The
        file appears only once complete: a failed backup leaves nothing at ``path``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
