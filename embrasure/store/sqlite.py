"""The embedded SQLite backend: one file, WAL mode, ``synchronous=FULL``.

One writer connection, used only by the group-commit thread (``log_writer.LogWriter``)
and by migrations; readers get a connection per thread. In WAL mode with
``synchronous=FULL`` SQLite syncs the WAL before COMMIT returns, so a returned ``append``
is durable (https://www.sqlite.org/pragma.html#pragma_synchronous).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence

from ..errors import IdempotencyConflict, SchemaError, StoreError, StoreUnavailable
from ..model import Delivery, DeliveryDraft, DeliveryIds, Receipt, Rejection, utc_now
from . import migrations
from .base import AppendResult, Store

BUSY_TIMEOUT_MS = 10_000


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def _decode_rejections(text: str) -> tuple[Rejection, ...]:
    return tuple(Rejection(index, kind, reason) for index, kind, reason in json.loads(text))


class SQLiteStore(Store):
    dialect = "sqlite"

    def __init__(self, path: str, *, upgrade: bool = False) -> None:
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreError(f"cannot open {path}: directory {parent} does not exist")
        try:
            self._writer = _connect(path)
            self._migrate(upgrade)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from exc
        self._ids = DeliveryIds()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    # -- schema ---------------------------------------------------------------------

    def _migrate(self, upgrade: bool) -> None:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")  # the migration lock: one process at a time
        try:
            conn.execute(migrations.SCHEMA_TABLE)
            current = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM embrasure_schema"
            ).fetchone()[0]
            if current > migrations.LATEST:
                raise SchemaError(
                    f"{self.path} has schema version {current}, newer than this "
                    f"Embrasure's {migrations.LATEST}: upgrade Embrasure"
                )
            if 0 < current < migrations.LATEST and not upgrade:
                raise SchemaError(
                    f"{self.path} has schema version {current}, this Embrasure needs "
                    f"{migrations.LATEST}: run `embrasure db upgrade --db sqlite:///{self.path}`"
                )
            migrations.apply(
                lambda sql, args: conn.execute(sql, args), "sqlite", current, utc_now()
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        row = self._read().execute("SELECT MAX(version) FROM embrasure_schema").fetchone()
        return int(row[0])

    # -- the log ----------------------------------------------------------------------

    def append(self, drafts: Sequence[DeliveryDraft]) -> list[AppendResult]:
        conn = self._writer
        results: list[AppendResult] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for draft in drafts:
                results.append(self._append_one(conn, draft))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have rolled back
                    conn.execute("ROLLBACK")
            raise StoreUnavailable(f"the delivery log could not commit: {exc}") from exc
        return results

    def _append_one(self, conn: sqlite3.Connection, draft: DeliveryDraft) -> AppendResult:
        row = conn.execute(
            "SELECT delivery_id, body_sha256, state, item_count, invalid_item_count"
            " FROM deliveries WHERE provider_key = ? AND dedupe_key = ?",
            (draft.provider_key, draft.dedupe_key),
        ).fetchone()
        if row is not None:
            delivery_id, sha, state, item_count, invalid = row
            if sha != draft.body_sha256:
                return IdempotencyConflict(delivery_id)
            return Receipt(delivery_id, state, True, item_count, invalid)
        delivery_id = self._ids.new()
        conn.execute(
            "INSERT INTO deliveries (delivery_id, provider_key, idempotency_key, dedupe_key,"
            " body_sha256, received_at, route, body, item_count, invalid_item_count,"
            " rejections, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                delivery_id,
                draft.provider_key,
                draft.idempotency_key,
                draft.dedupe_key,
                draft.body_sha256,
                draft.received_at,
                draft.route,
                draft.body,
                draft.item_count,
                len(draft.rejections),
                json.dumps([[r.index, r.kind, r.reason] for r in draft.rejections]),
                draft.state,
            ),
        )
        return Receipt(delivery_id, draft.state, False, draft.item_count, len(draft.rejections))

    # -- reads ------------------------------------------------------------------------

    def _read(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        row = (
            self._read()
            .execute(
                "SELECT seq, delivery_id, provider_key, idempotency_key, body_sha256,"
                " received_at, route, item_count, rejections, state"
                " FROM deliveries WHERE delivery_id = ?",
                (delivery_id,),
            )
            .fetchone()
        )
        if row is None:
            return None
        seq, did, provider, key, sha, received_at, route, items, rejections, state = row
        return Delivery(
            seq,
            did,
            provider,
            key,
            sha,
            received_at,
            route,
            items,
            _decode_rejections(rejections),
            state,
        )

    def get_body(self, delivery_id: str) -> bytes | None:
        row = (
            self._read()
            .execute("SELECT body FROM deliveries WHERE delivery_id = ?", (delivery_id,))
            .fetchone()
        )
        return None if row is None else bytes(row[0])

    def ping(self) -> None:
        try:
            self._read().execute("SELECT 1 FROM deliveries LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite at {self.path} does not answer: {exc}") from exc

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._writer.close()
