"""What only the PostgreSQL backend has: the log's ordering hazard, projectors sharing the
log (SKIP LOCKED claims, the watermark), and the translation of the shared SQL."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embrasure.errors import StoreUnavailable
from embrasure.model import DeliveryDraft, Receipt, utc_now
from embrasure.projector.worker import Projector, ProjectorLimits, reproject
from embrasure.query.export import export_bytes
from embrasure.store import Store, migrations, open_store, schema
from embrasure.store.postgres_conn import translate
from embrasure.store.postgres_graph import LOG_LOCK

from conftest import pg_database, pg_reset, run_sql
from event_strategies import deliveries, events


def draft(n: int, job: str = "j") -> DeliveryDraft:
    body = orjson.dumps(
        {
            "eventType": "COMPLETE",
            "eventTime": f"2026-11-30T09:{n // 60 % 60:02d}:{n % 60:02d}Z",
            "run": {"runId": f"01900000-0000-7000-8000-{n:012d}"},
            "job": {"namespace": "ns", "name": f"{job}{n % 7}"},
            "inputs": [{"namespace": "ds", "name": f"in{n % 5}"}],
            "outputs": [{"namespace": "ds", "name": f"out{n % 3}"}],
        }
    )
    return DeliveryDraft(
        "default", None, hashlib.sha256(body).hexdigest(), body, "single", 1, (), utc_now()
    )


@pytest.fixture
def store(pg_db: str) -> Iterator[Store]:
    s = open_store(pg_db)
    yield s
    s.close()


def export(store: Store) -> bytes:
    with store.reader() as reader:
        return export_bytes(reader)


# -- the ordering hazard ----------------------------------------------------------------------


def test_sequence_values_become_visible_out_of_order_on_raw_sql(store: Store, pg_db: str) -> None:
    """The hazard itself (why appends take LOG_LOCK): without it, a later seq commits
    first and a reader tailing ``seq > cursor`` would skip the earlier one."""
    insert = (
        "INSERT INTO deliveries (delivery_id, provider_key, dedupe_key, body_sha256,"
        " received_at, route, item_count, invalid_item_count, rejections, state)"
        " VALUES (%s, 'p', %s, '', '', 'single', 0, 0, '[]', 'accepted') RETURNING seq"
    )
    with psycopg.connect(pg_db) as a, psycopg.connect(pg_db) as b:
        seq_a = a.execute(insert, ("a", "a")).fetchone()[0]  # type: ignore[index]
        seq_b = b.execute(insert, ("b", "b")).fetchone()[0]  # type: ignore[index]
        b.commit()
        assert seq_a < seq_b
        assert [e.seq for e in store.read_log(0, 10, 1 << 20)] == [seq_b]  # seq_a unseen
        a.commit()
        assert [e.seq for e in store.read_log(0, 10, 1 << 20)] == [seq_a, seq_b]


def test_an_append_waits_for_the_append_in_flight_before_it(store: Store, pg_db: str) -> None:
    """An append in flight (here: a raw transaction holding LOG_LOCK with its row
    inserted) keeps the next append from taking a seq until it has committed."""
    with psycopg.connect(pg_db) as held:
        held.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        first = held.execute(
            "INSERT INTO deliveries (delivery_id, provider_key, dedupe_key, body_sha256,"
            " received_at, route, item_count, invalid_item_count, rejections, state)"
            " VALUES ('held', 'p', 'held', '', '', 'single', 0, 0, '[]', 'accepted')"
            " RETURNING seq"
        ).fetchone()[0]  # type: ignore[index]
        results: list[Any] = []
        appender = threading.Thread(target=lambda: results.extend(store.append([draft(1)])))
        appender.start()
        appender.join(0.5)
        assert appender.is_alive(), "the append did not wait for the one in flight"
        assert store.read_log(0, 10, 1 << 20) == []
        held.commit()
    appender.join(10)
    [receipt] = results
    assert isinstance(receipt, Receipt)
    with store.reader() as reader:
        stored = reader.delivery(receipt.delivery_id)
    assert stored is not None and stored.seq > first


def test_a_tailing_reader_never_skips_a_delivery(pg_db: str) -> None:
    """Four stores (four pools) append concurrently while a reader tails ``seq >
    cursor``, moving its cursor to the last seq it saw: it must see every delivery."""
    stores = [open_store(pg_db) for _ in range(4)]
    stop = threading.Event()
    appended: list[int] = []

    def append(store: Store, offset: int) -> None:
        n = offset
        while not stop.is_set():
            for receipt in store.append([draft(n), draft(n + 1)]):
                assert isinstance(receipt, Receipt)
            n += 8

    threads = [threading.Thread(target=append, args=(s, 2 * i)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    seen: list[int] = []
    cursor, deadline = 0, time.monotonic() + 3
    try:
        while time.monotonic() < deadline:
            for entry in stores[0].read_log(cursor, 1000, 1 << 30):
                seen.append(entry.seq)
                cursor = entry.seq
    finally:
        stop.set()
        for t in threads:
            t.join()
    appended = [e.seq for e in stores[0].read_log(0, 1_000_000, 1 << 40)]
    seen += [e.seq for e in stores[0].read_log(cursor, 1_000_000, 1 << 40)]
    for s in stores:
        s.close()
    assert len(appended) > 100
    assert seen == appended


# -- projectors sharing the log ---------------------------------------------------------------


def test_concurrent_transactions_claim_different_deliveries(store: Store) -> None:
    store.append([draft(n) for n in range(10)])
    with store.projection() as first:
        mine = [e.seq for e in first.read_log(first.position(), 4, 1 << 20)]
        claimed = threading.Event()
        theirs: list[int] = []

        def other() -> None:
            with store.projection() as second:
                theirs.extend(e.seq for e in second.read_log(second.position(), 4, 1 << 20))
                claimed.set()

        t = threading.Thread(target=other)
        t.start()
        assert claimed.wait(5), "the second claim waited for the first instead of skipping"
        t.join()
    assert len(mine) == len(theirs) == 4
    assert not set(mine) & set(theirs)


def test_the_watermark_stops_below_a_delivery_another_projector_holds(store: Store) -> None:
    store.append([draft(n) for n in range(6)])
    seqs = [e.seq for e in store.read_log(0, 10, 1 << 20)]
    limits = ProjectorLimits(batch_deliveries=2)
    with store.projection() as holder:
        held = [e.seq for e in holder.read_log(0, 2, 1 << 20)]
        assert held == seqs[:2]
        # Another projector takes everything else meanwhile.
        done = threading.Thread(target=Projector(store, limits).run_until_caught_up)
        done.start()
        done.join(10)
        assert store.position() == 0  # the first two are not projected yet
    # Released unprojected (rolled back): the next projector takes them, and the
    # watermark reaches the end.
    Projector(store, limits).run_until_caught_up()
    assert store.position() == seqs[-1]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events, st.integers(2, 4))
def test_several_projectors_export_what_one_does(
    pg_two: tuple[str, str], items: list[dict[str, Any]], projectors: int
) -> None:
    """Projectors racing over the same log (one or two deliveries a transaction, each
    event its own delivery, some twice) give the graph one projector gives."""
    one, many = (pg_reset(url) for url in pg_two)
    drafts = list(deliveries([[e] for e in items + items[:3]]))
    reference = open_store(one)
    reference.append(drafts)
    Projector(reference).run_until_caught_up()
    expected = export(reference)
    reference.close()

    stores = [open_store(many) for _ in range(projectors)]
    stores[0].append(drafts)
    limits = ProjectorLimits(batch_deliveries=1, batch_events=2)
    workers = [threading.Thread(target=Projector(s, limits).run_until_caught_up) for s in stores]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    Projector(stores[0]).run_until_caught_up()  # whatever a skip left for later
    try:
        assert export(stores[0]) == expected
        assert stores[0].position() == max(e.seq for e in stores[0].read_log(0, 1000, 1 << 30))
    finally:
        for s in stores:
            s.close()


@pytest.fixture
def pg_two() -> Iterator[tuple[str, str]]:
    with pg_database() as a, pg_database() as b:
        yield a, b


def test_reproject_while_a_projector_and_appends_run(store: Store, pg_db: str) -> None:
    """The swap holds the log and waits for deliveries a live projector holds: the new
    graph misses nothing that was appended before the swap."""
    stop = threading.Event()
    live = Projector(open_store(pg_db), ProjectorLimits(batch_deliveries=2))
    live.start()
    appender = open_store(pg_db)

    def append() -> None:  # a steady load the rebuild can catch up with
        n = 0
        while not stop.wait(0.01):
            appender.append([draft(n), draft(n + 1, job="k")])
            n += 2

    thread = threading.Thread(target=append)
    thread.start()
    try:
        time.sleep(0.5)
        reproject(store, ProjectorLimits(batch_deliveries=3))
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
        live.stop()
        live.store.close()
        appender.close()
    Projector(store).run_until_caught_up()
    rebuilt = export(store)
    reproject(store)
    assert export(store) == rebuilt


def test_a_rebuilt_graph_is_analyzed_before_it_is_served(store: Store, pg_db: str) -> None:
    """Its tables were filled in bulk: without statistics the planner guesses until
    autovacuum visits them (store/postgres.py ``index_generation``)."""
    store.append([draft(n) for n in range(40)])
    Projector(store).run_until_caught_up()
    prefix = schema.prefix(reproject(store))
    analyzed = run_sql(
        pg_db,
        "SELECT relname, last_analyze IS NOT NULL FROM pg_stat_user_tables"
        " WHERE schemaname = current_schema()",
    )
    tables = {name: done for name, done in analyzed if name.startswith(prefix)}
    assert len(tables) >= 10 and all(tables.values()), tables


def test_two_reprojects_at_once_wait_for_each_other(pg_db: str) -> None:
    """As when projectors start together on a graph an older version built: each
    reprojects; the second waits for the first instead of dropping its tables."""
    stores = [open_store(pg_db) for _ in range(3)]
    stores[0].append([draft(n) for n in range(40)])
    Projector(stores[0]).run_until_caught_up()
    before = export(stores[0])
    generations: list[int] = []
    threads = [
        threading.Thread(
            target=lambda s=s: generations.append(reproject(s, ProjectorLimits(batch_deliveries=3)))
        )
        for s in stores[1:]
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert sorted(generations) == [2, 3]
        assert export(stores[0]) == before
    finally:
        for s in stores:
            s.close()


def test_an_unreachable_server_is_unavailable_not_a_crash(store: Store, pg_db: str) -> None:
    name = pg_db.rsplit("/", 1)[1]
    with psycopg.connect(pg_db.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        try:
            with pytest.raises(StoreUnavailable):
                store.ping()
            with pytest.raises(StoreUnavailable):
                store.append([draft(1)])
        finally:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")


# -- the shared SQL's translation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sqlite", "postgresql"),
    [
        ("SELECT a FROM t WHERE b = ? AND c > ?", "SELECT a FROM t WHERE b = %s AND c > %s"),
        (
            "SELECT x FROM t WHERE y = :q LIMIT :limit",
            "SELECT x FROM t WHERE y = %(q)s LIMIT %(limit)s",
        ),
        ("SELECT '?:x%' || a FROM t", "SELECT '?:x%' || a FROM t"),
        ("SELECT a::json, b % 2 FROM t", "SELECT a::json, b %% 2 FROM t"),
        (
            "SELECT 1 FROM (VALUES (?)) AS v CROSS JOIN t ON t.a = v.column1",
            "SELECT 1 FROM (VALUES (%s)) AS v JOIN t ON t.a = v.column1",
        ),
        ("SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , %s"),
    ],
)
def test_translate(sqlite: str, postgresql: str) -> None:
    assert translate(sqlite) == postgresql


# -- autovacuum of the tables retention trims ---------------------------------------------------


def churned_tables(url: str) -> dict[str, list[str] | None]:
    """The trimmed tables of every generation, and the body partitions: their reloptions."""
    return dict(
        run_sql(
            url,
            "SELECT relname::text, reloptions FROM pg_class WHERE relkind = 'r'"
            " AND (starts_with(relname::text, 'delivery_bodies_') OR substring(relname::text from"
            " '^g[0-9]+_(.*)$') = ANY(?))",
            (list(migrations.CHURNED_TABLES),),
        )
    )


def test_the_tables_retention_trims_are_vacuumed_early(store: Store, pg_db: str) -> None:
    """docs/operations.md#postgresql-and-its-disk: a fresh database's trimmed tables, its
    body partitions and a reprojection's new generation carry the lower autovacuum
    threshold."""
    store.append([draft(1)])
    day = utc_now()[:10].replace("-", "")
    params = [migrations.CHURNED_PARAMETERS.replace(" ", "")]
    generation = 1
    for rebuilt in (False, True):
        if rebuilt:
            generation = reproject(store)
        tables = churned_tables(pg_db)
        expected = {f"g{generation}_{t}" for t in migrations.CHURNED_TABLES}
        assert {"delivery_bodies_default", f"delivery_bodies_d{day}"} | expected <= set(tables)
        assert all(options == params for options in tables.values())


def test_db_upgrade_sets_the_served_generations_autovacuum(pg_db: str) -> None:
    """Migration 11 on a database of version 10: the served generation's trimmed tables get
    the setting (the body partitions made already keep the default: the migration says)."""
    for table in migrations.CHURNED_TABLES:
        run_sql(pg_db, f"ALTER TABLE g1_{table} RESET (autovacuum_vacuum_scale_factor)")
    run_sql(pg_db, "DELETE FROM embrasure_schema WHERE version >= 11")
    made_later = ("grants", "server_secrets", "delivery_writers")  # by 13
    for table in (*made_later, "subscriptions", "notifications", "sessions"):  # by 14, 18
        run_sql(pg_db, f"DROP TABLE {table}")
    open_store(pg_db, upgrade=True).close()
    tables = churned_tables(pg_db)
    assert all(tables[f"g1_{t}"] for t in migrations.CHURNED_TABLES)
    assert run_sql(pg_db, "SELECT MAX(version) FROM embrasure_schema") == [(migrations.LATEST,)]
