"""The delivery log on both backends: identity, conflicts, failed commits, group commit,
migrations; and what is SQLite's own (WAL, page limits, query plans)."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from embrasure.errors import IdempotencyConflict, SchemaError, StoreUnavailable
from embrasure.model import Grant, Receipt
from embrasure.store import Store, migrations, open_store
from embrasure.store.group_commit import GroupCommitter
from embrasure.store.sqlite import SQLiteStore

from conftest import run_sql
from event_strategies import draft, incompressible


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(db_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(str(db_path))
    yield s
    s.close()


def test_new_database_gets_the_latest_schema(empty_db_url: str) -> None:
    store = open_store(empty_db_url)
    try:
        assert store.schema_version() == migrations.LATEST  # type: ignore[attr-defined]
    finally:
        store.close()


def test_sqlite_runs_in_wal_mode_with_full_sync(sqlite_store: SQLiteStore) -> None:
    mode = sqlite_store._writer.execute("PRAGMA journal_mode").fetchone()[0]
    sync = sqlite_store._writer.execute("PRAGMA synchronous").fetchone()[0]
    assert (mode, sync) == ("wal", 2)  # 2 = FULL


def test_append_stores_the_body_byte_for_byte(store: Store) -> None:
    body = b'{"job": {"namespace": "a", "name": "b"}}  \n'
    [receipt] = store.append([draft(body)])
    assert isinstance(receipt, Receipt)
    with store.reader() as reader:
        stored = reader.delivery(receipt.delivery_id)
        assert stored is not None and stored.body_sha256 == hashlib.sha256(body).hexdigest()
        assert reader.body(stored.seq) == body


def test_duplicates_and_conflicts_within_one_group(store: Store) -> None:
    a, a_again, keyed, keyed_other = store.append(
        [draft(b"{}"), draft(b"{}"), draft(b"[1]", key="k"), draft(b"[2]", key="k")]
    )
    assert isinstance(a, Receipt) and isinstance(a_again, Receipt)
    assert a_again.duplicate and a_again.delivery_id == a.delivery_id
    assert isinstance(keyed, Receipt)
    assert isinstance(keyed_other, IdempotencyConflict)
    assert keyed_other.delivery_id == keyed.delivery_id


def test_a_failed_commit_stores_nothing_and_the_log_recovers(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    [first] = store.append([draft(b'"small"')])
    # A real SQLite failure, not a mock: cap the file so the next transaction cannot fit.
    pages = store._writer.execute("PRAGMA page_count").fetchone()[0]
    store._writer.execute(f"PRAGMA max_page_count = {pages + 2}")
    big = [draft(incompressible(100_000)) for _ in range(3)]
    with pytest.raises(StoreUnavailable, match="full"):
        store.append(big)
    assert not store._writer.in_transaction
    store._writer.execute("PRAGMA max_page_count = 1073741823")
    count = store._read().execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]
    assert count == 1
    results = store.append(big)
    assert all(isinstance(r, Receipt) and not r.duplicate for r in results)
    assert isinstance(first, Receipt) and _stored(store, first.delivery_id)


def test_a_failed_commit_stores_nothing_and_the_log_recovers_on_postgresql(pg_db: str) -> None:
    db_url = pg_db
    store = open_store(db_url)
    try:
        [first] = store.append([draft(b'"small"')])
        # A real PostgreSQL failure, not a mock: a constraint the next bodies break.
        run_sql(db_url, "ALTER TABLE delivery_bodies ADD CONSTRAINT small CHECK (size < 1000)")
        big = [draft(b'"' + bytes([65 + i]) * 100_000 + b'"') for i in range(3)]
        with pytest.raises(StoreUnavailable, match="small"):
            store.append(big)
        run_sql(db_url, "ALTER TABLE delivery_bodies DROP CONSTRAINT small")
        assert run_sql(db_url, "SELECT COUNT(*) FROM deliveries") == [(1,)]
        results = store.append(big)
        assert all(isinstance(r, Receipt) and not r.duplicate for r in results)
        assert isinstance(first, Receipt) and _stored(store, first.delivery_id)
    finally:
        store.close()


def test_group_commit_shares_transactions(store: Store) -> None:
    committer = GroupCommitter(store, max_group=512, max_group_bytes=1 << 26)
    committer.start()

    async def many(n: int) -> list[Receipt]:
        return await asyncio.gather(*(committer.append(draft(b"%d" % i)) for i in range(n)))

    try:
        receipts = asyncio.run(many(300))
    finally:
        committer.stop()
    assert len({r.delivery_id for r in receipts}) == 300
    assert committer.groups_committed <= 150  # 300 deliveries, far fewer fsyncs
    ids = [r.delivery_id for r in receipts]
    with store.reader() as reader:
        seqs = [reader.delivery(i).seq for i in ids]  # type: ignore[union-attr]
    assert sorted(ids) == [i for _, i in sorted(zip(seqs, ids, strict=True))]


def test_group_commit_reports_failures_to_every_waiter(store: Store, db_url: str) -> None:
    committer = GroupCommitter(store, max_group=512, max_group_bytes=1 << 26)
    committer.start()
    # Every write now fails (a real failure of each database, not a mock).
    if isinstance(store, SQLiteStore):
        store._writer.execute("PRAGMA query_only = ON")
    else:
        run_sql(db_url, "ALTER TABLE deliveries ADD CONSTRAINT never CHECK (false) NOT VALID")

    async def attempt() -> list[object]:
        return await asyncio.gather(
            *(committer.append(draft(b"%d" % i)) for i in range(20)), return_exceptions=True
        )

    try:
        results = asyncio.run(attempt())
    finally:
        if isinstance(store, SQLiteStore):
            store._writer.execute("PRAGMA query_only = OFF")
        committer.stop()
    assert all(isinstance(r, StoreUnavailable) for r in results)


# -- migrations -------------------------------------------------------------------------------

EXTRA = migrations.Migration(migrations.LATEST + 1, "test step", "CREATE TABLE later (x TEXT)")


def test_older_schema_is_refused_until_upgraded(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(db_url).close()
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, EXTRA))
    monkeypatch.setattr(migrations, "LATEST", EXTRA.version)
    with pytest.raises(SchemaError, match="embrasure db upgrade"):
        open_store(db_url)
    upgraded = open_store(db_url, upgrade=True)
    assert upgraded.schema_version() == EXTRA.version  # type: ignore[attr-defined]
    assert list(upgraded.migrations_applied) == [EXTRA.version]
    upgraded.close()


def test_newer_schema_is_refused(db_url: str) -> None:
    open_store(db_url).close()
    run_sql(db_url, "INSERT INTO embrasure_schema VALUES (999, 'future', '')")
    with pytest.raises(SchemaError, match="newer"):
        open_store(db_url)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migrations_render_for_every_dialect(dialect: str) -> None:
    for migration in migrations.MIGRATIONS:
        statements = migration.statements(dialect) + migration.served_statements(dialect, "g1_")
        # A migration for other dialects renders nothing here, and only then; nor does
        # one the store does itself (the SQLite graph's move to a file of its own).
        assert bool(statements) == (dialect in migration.dialects and not migration.by_store)
        assert not any("{" in s for s in statements)


def test_concurrent_upgrades_do_not_race(empty_db_url: str) -> None:
    db_url = empty_db_url
    cmd = [sys.executable, "-m", "embrasure", "db", "upgrade", "--db", db_url]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    versions = run_sql(db_url, "SELECT version FROM embrasure_schema ORDER BY version")
    assert versions == [(v.version,) for v in migrations.MIGRATIONS]


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ("deliveries", ("provider_key", "dedupe_key")),
        ("g1_facets", ("entity", "name")),
        ("g1_edges", ("ds_ns", "ds_name")),
        ("g1_column_edges", ("tgt", "tgt_field")),  # interned ids (test_interned.py)
        ("g1_column_edges", ("src", "src_field")),
        ("g1_links", ("b_ns", "b_name")),
    ],
)
def test_keyed_lookups_search_an_index(
    sqlite_store: SQLiteStore, table: str, match: tuple[str, ...]
) -> None:
    store = sqlite_store
    # SQLite 3.40 plans ``(a, b) IN (VALUES …)`` as a full scan (found by the ingest
    # benchmark: group commits slowed as the log grew). Every keyed lookup goes through
    # select_where_in; its plan must search an index, whatever the table's size.
    from embrasure.store.sqlite_graph import select_where_in

    plans: list[str] = []

    class Explain:
        def execute(self, sql: str, params: Sequence[object]) -> list[object]:
            # A reader's connection: the graph's file with the log's attached.
            plans.extend(r[3] for r in store._read().execute("EXPLAIN QUERY PLAN " + sql, params))
            return []

    select_where_in(Explain(), table, match, match, [("x",) * len(match)] * 2)  # type: ignore[arg-type]
    assert any(p.startswith("SEARCH t USING") for p in plans), plans
    assert not any(p.startswith("SCAN t") for p in plans), plans


def _stored(store: Store, delivery_id: str) -> bool:
    with store.reader() as reader:
        return reader.delivery(delivery_id) is not None


def test_grants_are_kept_in_order_and_removed(store: Store) -> None:
    """docs/security.md#grants: the rules every server process reads, on each backend."""
    first = Grant("g1", "group:finance", "read", "finance.*", "2026-12-05T10:00:00Z", None)
    second = Grant("g0", "token:abc", "ingest", "spark/*", "2026-12-05T11:00:00Z", "x (y)")
    store.add_grant(second)
    store.add_grant(first)
    assert store.grants() == [first, second]  # oldest first
    assert store.remove_grant("g1") and not store.remove_grant("g1")
    assert store.grants() == [second]
