"""The delivery log's SQL both backends share (sql.py's conventions): appending
deliveries and their bodies, reading the log in order, the bodies' dictionaries and
their compression again, the running totals."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from embrasure.errors import IdempotencyConflict, StoreError
from embrasure.model import DeliveryDraft, Receipt, Rejection
from embrasure.store import migrations
from embrasure.store.base import AppendResult, LogEntry
from embrasure.store.compression import NO_DICTIONARY, BodyCodec, LoadDictionary
from embrasure.store.connection import Connection
from embrasure.store.sql import select_where_in

# A delivery's log columns with its stored body (NULL, NULL once retention archived it).
LOG_COLUMNS = "d.seq, d.delivery_id, d.route, b.dict_id, b.body, d.item_count, d.rejections"


@dataclasses.dataclass(frozen=True)
class BodySQL:
    """How a backend keys ``delivery_bodies``. PostgreSQL partitions it by day of
    received_at, so that column is in its key and every statement names it (PostgreSQL
    then looks in one partition); SQLite's is a rowid table keyed by seq alone
    (migration 9)."""

    by_day: bool

    @property
    def match(self) -> str:
        """``b`` (delivery_bodies) is the body of ``d`` (deliveries)."""
        return "b.seq = d.seq" + (" AND b.received_at = d.received_at" if self.by_day else "")

    @property
    def with_bodies(self) -> str:
        return f"deliveries d LEFT JOIN delivery_bodies b ON {self.match}"

    @property
    def key(self) -> tuple[str, ...]:
        return ("seq", "received_at") if self.by_day else ("seq",)

    @property
    def insert(self) -> str:
        columns = (*self.key, "dict_id", "size", "body")
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO delivery_bodies ({', '.join(columns)}) VALUES ({marks})"

    @property
    def delete(self) -> str:
        """Deletes one body by its key: the first ``len(key)`` values of its ``row``."""
        return "DELETE FROM delivery_bodies WHERE " + " AND ".join(f"{c} = ?" for c in self.key)

    def row(
        self, seq: int, received_at: str, dict_id: int | None, size: int, body: bytes
    ) -> tuple[Any, ...]:
        """A row for ``insert``."""
        return (*(seq, received_at)[: len(self.key)], dict_id, size, body)


SQLITE_BODIES = BodySQL(by_day=False)
POSTGRES_BODIES = BodySQL(by_day=True)


def decode_rejections(text: str) -> tuple[Rejection, ...]:
    return tuple(Rejection(index, kind, reason) for index, kind, reason in json.loads(text))


def dictionary_loader(conn: Connection) -> LoadDictionary:
    """Loads a dictionary another process trained since this one read them."""

    def load(dict_id: int) -> bytes:
        row = conn.execute(
            "SELECT content FROM log_dictionaries WHERE dict_id = ?", (dict_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"a log body names zstd dictionary {dict_id}, which is not stored")
        return bytes(row[0])

    return load


def dictionaries(conn: Connection) -> list[tuple[int, bytes]]:
    return [
        (int(i), bytes(c))
        for i, c in conn.execute("SELECT dict_id, content FROM log_dictionaries ORDER BY dict_id")
    ]


def save_dictionary(conn: Connection, content: bytes, samples: int, now: str) -> int:
    """Store a trained dictionary (in the caller's transaction); its new id."""
    row = conn.execute(
        "INSERT INTO log_dictionaries (created_at, samples, content) VALUES (?, ?, ?)"
        " RETURNING dict_id",
        (now, samples, content),
    ).fetchone()
    return int(row[0])


def body_partition(day: datetime.date) -> str:
    return f"delivery_bodies_d{day:%Y%m%d}"


def make_body_partition(conn: Connection, day: datetime.date) -> None:
    """PostgreSQL: the partition of delivery_bodies holding the bodies received on
    ``day`` (UTC; received_at is RFC 3339 text, which sorts as time)."""
    after = day + datetime.timedelta(days=1)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {body_partition(day)} PARTITION OF delivery_bodies"
        f" FOR VALUES FROM ('{day.isoformat()}') TO ('{after.isoformat()}')" + migrations.CHURNED
    )


def compress_again(
    conn: Connection, codec: BodyCodec, bodies: BodySQL, after_seq: int, limit: int
) -> int:
    """Compress again, with the codec's current dictionary, up to ``limit`` bodies after
    ``after_seq`` stored without one: as received (an upgrade moved them into
    delivery_bodies) or with zstd alone (appended before the first dictionary). In the
    caller's transaction; a body is rewritten only when it gets smaller. Returns the last
    seq looked at, 0 when none was left.

    Rewritten by deleting the rows and inserting them again in seq order, not by UPDATE:
    an update shrinks each row where it lies and leaves its SQLite page mostly empty (the
    first dictionary's bodies took 26% more pages than their bytes needed), while rows
    inserted again in key order are packed into whole pages and the emptied ones go to
    the freelist, which the incremental vacuum gives back."""
    rows = conn.execute(
        f"SELECT b.seq, d.received_at, b.dict_id, b.size, b.body FROM delivery_bodies b"
        f" JOIN deliveries d ON {bodies.match}"
        " WHERE (b.dict_id IS NULL OR b.dict_id = ?) AND b.seq > ? ORDER BY b.seq LIMIT ?",
        (NO_DICTIONARY, after_seq, limit),
    ).fetchall()
    load = dictionary_loader(conn)
    again = []
    for seq, received_at, dict_id, size, stored in rows:
        new_id, packed = codec.compress(codec.decompress(dict_id, stored, load))
        if new_id != dict_id and len(packed) < len(stored):
            again.append(bodies.row(seq, received_at, new_id, size, packed))
    conn.executemany(bodies.delete, [row[: len(bodies.key)] for row in again])
    conn.executemany(bodies.insert, again)
    return int(rows[-1][0]) if rows else 0


def log_entries(
    rows: Iterable[Sequence[Any]],
    codec: BodyCodec,
    load: LoadDictionary,
    max_bytes: int,
    max_items: int | None = None,
) -> list[LogEntry]:
    """Log rows (LOG_COLUMNS) → entries, stopping after the one that brings the bodies
    past ``max_bytes`` or the items past ``max_items``."""
    entries: list[LogEntry] = []
    size = items = 0
    for seq, delivery_id, route, dict_id, stored, item_count, rejections in rows:
        body = None if stored is None else codec.decompress(dict_id, stored, load)
        entries.append(
            LogEntry(seq, delivery_id, route, body, item_count, decode_rejections(rejections))
        )
        size += len(body or b"")
        items += item_count
        if size >= max_bytes or (max_items is not None and items >= max_items):
            break
    return entries


def read_log(
    conn: Connection,
    codec: BodyCodec,
    bodies: BodySQL,
    after_seq: int,
    limit: int,
    max_bytes: int,
    max_items: int | None = None,
) -> list[LogEntry]:
    rows = conn.execute(
        f"SELECT {LOG_COLUMNS} FROM {bodies.with_bodies} WHERE d.seq > ? ORDER BY d.seq LIMIT ?",
        (after_seq, limit),
    )
    return log_entries(rows, codec, dictionary_loader(conn), max_bytes, max_items)


def read_body(conn: Connection, codec: BodyCodec, seq: int) -> bytes | None:
    """A delivery's body as received; None when there is no such delivery or retention
    archived its body."""
    row = conn.execute("SELECT dict_id, body FROM delivery_bodies WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else codec.decompress(row[0], row[1], dictionary_loader(conn))


INSERT_DELIVERY = (
    "INSERT INTO deliveries (delivery_id, provider_key, idempotency_key, dedupe_key,"
    " body_sha256, received_at, route, item_count, invalid_item_count,"
    " rejections, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

INSERT_KAFKA = (
    "INSERT INTO kafka_messages (seq, topic, msg_partition, msg_offset, msg_key)"
    " VALUES (?, ?, ?, ?, ?)"
)

INSERT_WRITER = (
    "INSERT INTO delivery_writers (seq, kind, subject, issuer, token_id) VALUES (?, ?, ?, ?, ?)"
)

# A body as the appender stores it: (dict_id, stored bytes), from BodyCodec.compress.
Packed = tuple[int | None, bytes]


def append(
    conn: Connection,
    bodies: BodySQL,
    drafts: Sequence[DeliveryDraft],
    packed: Sequence[Packed],
    new_id: Callable[[], str],
) -> list[AppendResult]:
    """Inside the append transaction (the log's lock held): the deliveries new to the
    log, their bodies (compressed before the lock: ``packed``, one per draft) and the
    running totals."""
    results, rows, fresh = plan_append(conn, drafts, new_id)
    conn.executemany(INSERT_DELIVERY, rows)
    if fresh:
        ids = [(row[0],) for row in rows]
        seqs: dict[str, int] = dict(
            select_where_in(conn, "deliveries", ("delivery_id", "seq"), ("delivery_id",), ids)
        )
        new = []
        for row, index in zip(rows, fresh, strict=True):
            dict_id, stored = packed[index]
            draft = drafts[index]
            new.append(
                bodies.row(seqs[row[0]], draft.received_at, dict_id, len(draft.body), stored)
            )
        conn.executemany(bodies.insert, new)
        kafka = [
            (seqs[row[0]], c.topic, c.partition, c.offset, c.key)
            for row, index in zip(rows, fresh, strict=True)
            if (c := drafts[index].kafka) is not None
        ]
        if kafka:
            conn.executemany(INSERT_KAFKA, kafka)
        writers = [
            (seqs[row[0]], w.kind, w.subject, w.issuer, w.token_id)
            for row, index in zip(rows, fresh, strict=True)
            if (w := drafts[index].writer) is not None
        ]
        if writers:
            conn.executemany(INSERT_WRITER, writers)
    record_totals(conn)
    return results


def record_totals(conn: Connection) -> None:
    """Inside the append transaction, after the inserts (the log's lock held): the
    running totals of the deliveries appended since the last totals row."""
    last = conn.execute(
        "SELECT seq, items, pending, rejected FROM delivery_totals ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    after, items, pending, rejected = (0, 0, 0, 0) if last is None else tuple(last)
    rows = []
    for seq, item_count, invalid in conn.execute(
        "SELECT seq, item_count, invalid_item_count FROM deliveries WHERE seq > ? ORDER BY seq",
        (after,),
    ):
        items += item_count - invalid
        pending += item_count > invalid
        rejected += item_count <= invalid
        rows.append((seq, items, pending, rejected))
    conn.executemany(
        "INSERT INTO delivery_totals (seq, items, pending, rejected) VALUES (?, ?, ?, ?)", rows
    )


def plan_append(
    conn: Connection, drafts: Sequence[DeliveryDraft], new_id: Callable[[], str]
) -> tuple[list[AppendResult], list[tuple[Any, ...]], list[int]]:
    """Inside the append transaction: one result per draft, the INSERT_DELIVERY rows of
    the new ones, and which drafts those are (their indexes). A draft whose identity is
    stored already, or earlier in ``drafts``, repeats the first receipt, or conflicts
    when its body differs (docs/receiver.md#idempotency)."""
    known = {
        (r[0], r[1]): r[2:]
        for r in select_where_in(
            conn,
            "deliveries",
            (
                "provider_key",
                "dedupe_key",
                "delivery_id",
                "body_sha256",
                "state",
                "item_count",
                "invalid_item_count",
            ),
            ("provider_key", "dedupe_key"),
            [(d.provider_key, d.dedupe_key) for d in drafts],
        )
    }
    results: list[AppendResult] = []
    rows = []
    fresh: list[int] = []
    for index, draft in enumerate(drafts):
        identity = (draft.provider_key, draft.dedupe_key)
        if identity in known:
            delivery_id, sha, state, item_count, invalid = known[identity]
            results.append(
                IdempotencyConflict(delivery_id)
                if sha != draft.body_sha256
                else Receipt(delivery_id, state, True, item_count, invalid)
            )
            continue
        delivery_id = new_id()
        invalid = len(draft.rejections)
        rows.append(
            (
                delivery_id,
                draft.provider_key,
                draft.idempotency_key,
                draft.dedupe_key,
                draft.body_sha256,
                draft.received_at,
                draft.route,
                draft.item_count,
                invalid,
                json.dumps([[r.index, r.kind, r.reason] for r in draft.rejections]),
                draft.state,
            )
        )
        fresh.append(index)
        known[identity] = (delivery_id, draft.body_sha256, draft.state, draft.item_count, invalid)
        results.append(Receipt(delivery_id, draft.state, False, draft.item_count, invalid))
    return results, rows, fresh
