"""The compressed log (store/compression.py): every body reads back exactly as received,
whichever dictionary compressed it, on both backends."""

from __future__ import annotations

import contextlib
import hashlib
import random
import sqlite3
import uuid
from collections.abc import Iterator

import hypothesis.strategies as st
import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings

from embrasure.model import Receipt, utc_now
from embrasure.store import Store, migrations, open_store
from embrasure.store.compression import NO_DICTIONARY, BodyCodec
from embrasure.store.postgres_conn import PgConnection

from conftest import run_sql
from event_strategies import draft


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    yield s
    s.close()


def append(store: Store, bodies: list[bytes]) -> list[int]:
    """Append bodies (a few hundred a transaction); their seqs."""
    ids = []
    for start in range(0, len(bodies), 250):
        for r in store.append([draft(b) for b in bodies[start : start + 250]]):
            assert isinstance(r, Receipt) and not r.duplicate
            ids.append(r.delivery_id)
    with store.reader() as reader:
        return [row.seq for row in (reader.delivery(i) for i in ids) if row is not None]


def read_back(store: Store, seqs: list[int]) -> list[bytes | None]:
    with store.reader() as reader:
        return [reader.body(seq) for seq in seqs]


def job_event(i: int, job: str, fields: int) -> bytes:
    """A RunEvent of one job, its schema repeated from run to run as producers send it."""
    schema = [{"name": f"{job}_column_{n}", "type": "VARCHAR"} for n in range(fields)]
    return orjson.dumps(
        {
            "eventType": "COMPLETE",
            "eventTime": f"2026-12-01T10:{i % 60:02d}:00Z",
            "run": {"runId": str(uuid.UUID(int=i))},
            "job": {"namespace": "compression", "name": job},
            "producer": "https://example.com/producer",
            "outputs": [{"namespace": "db", "name": job, "facets": {"schema": {"fields": schema}}}],
        }
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bodies=st.lists(st.binary(max_size=3000) | st.text().map(str.encode), min_size=1))
def test_every_body_reads_back_byte_identical(store: Store, bodies: list[bytes]) -> None:
    bodies = [*bodies, b"\xff\xfe odd \x00 bytes", b""]
    receipts = store.append([draft(b) for b in bodies])
    with store.reader() as reader:
        # A body sent before (this example's or an earlier one's) is a duplicate of the
        # delivery that stored it: the same bytes.
        seqs = [reader.delivery(r.delivery_id).seq for r in receipts]  # type: ignore[union-attr]
        assert [reader.body(seq) for seq in seqs] == bodies
    entries = {e.seq: e.body for e in store.read_log(min(seqs) - 1, 10_000, 1 << 30)}
    assert [entries[seq] for seq in seqs] == bodies


def test_bodies_are_stored_compressed_with_a_trained_dictionary(store: Store, db_url: str) -> None:
    codec = store.codec  # type: ignore[attr-defined]
    # The first dictionary comes after 200 bodies, and the bodies before it are
    # compressed again with it: a small log benefits too.
    first = [job_event(i, "orders", 40) for i in range(200)]
    seqs = append(store, first)
    codec.wait_for_training()
    assert codec.current == 1
    assert run_sql(db_url, "SELECT DISTINCT dict_id FROM delivery_bodies") == [(1,)]
    # Trained on 200 bodies, it is trained again once 2,000 more have come.
    more = [job_event(i, "orders", 40) for i in range(200, 2600)]
    seqs += append(store, more)
    codec.wait_for_training()
    later = [job_event(i, "orders", 40) for i in range(2600, 3000)]
    last = append(store, later)
    assert read_back(store, seqs + last) == first + more + later
    [(dictionaries,)] = run_sql(db_url, "SELECT COUNT(*) FROM log_dictionaries")
    assert dictionaries == 2
    rows = run_sql(
        db_url,
        "SELECT dict_id, size, length(body) FROM delivery_bodies WHERE seq >= ?",
        (last[0],),
    )
    assert {r[0] for r in rows} == {2}, "bodies after the second training name it"
    ratio = sum(r[2] for r in rows) / sum(r[1] for r in rows)
    assert ratio < 0.1, f"bodies with the dictionary are {ratio:.1%} of their size"


def test_a_new_dictionary_when_the_traffic_changes_old_bodies_still_read(
    store: Store, db_url: str
) -> None:
    # The store's codec with thresholds small enough for a test.
    codec = BodyCodec(True, train_after=300, window=200, check_every=400)
    codec.train_with(store._save_dictionary)  # type: ignore[attr-defined]
    store.codec = codec  # type: ignore[attr-defined]
    first = [job_event(i, "orders", 40) for i in range(600)]
    seqs = append(store, first)
    codec.wait_for_training()
    seqs += append(store, [job_event(i, "orders", 40) for i in range(600, 1000)])
    assert codec.current == 1
    rng = random.Random(7)
    # Another producer, another shape: the orders dictionary does little for it.
    other = [
        orjson.dumps({"metric": f"m{rng.random()}", "tags": [f"t{rng.randrange(9)}"] * 30, "n": i})
        for i in range(1500)
    ]
    seqs += append(store, other[:1400])
    codec.wait_for_training()
    assert codec.current == 2, "no second dictionary"
    seqs += append(store, other[1400:])
    expected = first + [job_event(i, "orders", 40) for i in range(600, 1000)] + other
    assert read_back(store, seqs) == expected
    used = {r[0] for r in run_sql(db_url, "SELECT DISTINCT dict_id FROM delivery_bodies")}
    assert {NO_DICTIONARY, 1, 2} <= used


def test_a_dictionary_another_process_trained_is_loaded_when_a_body_names_it(
    db_url: str,
) -> None:
    reader_side = open_store(db_url)  # opened before any dictionary exists
    writer_side = open_store(db_url)
    try:
        bodies = [job_event(i, "payments", 30) for i in range(2500)]
        append(writer_side, bodies)
        writer_side.codec.wait_for_training()  # type: ignore[attr-defined]
        late = [job_event(i, "payments", 30) for i in range(2500, 2600)]
        seqs = append(writer_side, late)
        assert reader_side.codec.current == NO_DICTIONARY  # type: ignore[attr-defined]
        assert read_back(reader_side, seqs) == late
    finally:
        reader_side.close()
        writer_side.close()


def test_compression_off_stores_bodies_as_received(db_url: str) -> None:
    store = open_store(db_url, compression="off")
    try:
        bodies = [job_event(i, "orders", 10) for i in range(50)]
        seqs = append(store, bodies)
        assert read_back(store, seqs) == bodies
    finally:
        store.close()
    rows = run_sql(db_url, "SELECT dict_id, body FROM delivery_bodies ORDER BY seq")
    assert [(None, b) for b in bodies] == [(r[0], bytes(r[1])) for r in rows]


def test_an_unknown_compression_is_refused(db_url: str) -> None:
    with pytest.raises(Exception, match="not one of zstd, off"):
        open_store(db_url, compression="lz4")


def test_an_upgrade_moves_and_compresses_the_bodies_an_older_version_stored(
    empty_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database as version 5 left it (its migrations, no auto_vacuum): bodies in the
    # deliveries rows.
    monkeypatch.setattr(
        migrations, "MIGRATIONS", migrations.MIGRATIONS[: migrations.BODIES_MOVED - 1]
    )
    if empty_db_url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(empty_db_url.removeprefix("sqlite:///"))) as db:
            db.execute(migrations.SCHEMA_TABLE)
            migrations.apply(db.execute, "sqlite", 0, utc_now())
            db.commit()
        assert run_sql(empty_db_url, "PRAGMA log.auto_vacuum") == [(0,)]
    else:
        with psycopg.connect(empty_db_url, autocommit=True) as pg:
            conn = PgConnection(pg)
            conn.execute(migrations.SCHEMA_TABLE)
            migrations.apply(conn.execute, "postgresql", 0, utc_now())
    bodies = [job_event(i, "legacy", 20) for i in range(120)] + [b"\x00raw\xff"]
    for i, body in enumerate(bodies):
        run_sql(
            empty_db_url,
            "INSERT INTO deliveries (delivery_id, provider_key, dedupe_key, body_sha256,"
            " received_at, route, body, item_count, invalid_item_count, rejections, state)"
            " VALUES (?, 'p', ?, ?, ?, 'single', ?, 1, 0, '[]', 'accepted')",
            (f"old{i}", f"k{i}", hashlib.sha256(body).hexdigest(), utc_now(), body),
        )
    monkeypatch.undo()
    with pytest.raises(Exception, match="db upgrade"):
        open_store(empty_db_url)
    store = open_store(empty_db_url, upgrade=True)
    try:
        seqs = [seq for (seq,) in run_sql(empty_db_url, "SELECT seq FROM deliveries ORDER BY seq")]
        assert read_back(store, seqs) == bodies
    finally:
        store.close()
    raw = run_sql(empty_db_url, "SELECT COUNT(*) FROM delivery_bodies WHERE dict_id IS NULL")
    assert raw == [(1,)], "only the body compression does not shrink stays as received"
    if empty_db_url.startswith("sqlite:///"):
        assert run_sql(empty_db_url, "PRAGMA log.auto_vacuum") == [(2,)]  # INCREMENTAL


def test_postgresql_bodies_land_in_their_day_partition(pg_db: str) -> None:
    store = open_store(pg_db)
    try:
        append(store, [job_event(1, "partitioned", 5)])
    finally:
        store.close()
    day = utc_now()[:10].replace("-", "")
    rows = run_sql(pg_db, "SELECT tableoid::regclass::text FROM delivery_bodies")
    assert rows == [(f"delivery_bodies_d{day}",)]
