"""Interned identities (store/interned.py): the column tables store ids, every read and
write is by name, on both backends; the reads search indexes on a table of any size."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from embrasure.store import open_store
from embrasure.store.interned import named_sql
from embrasure.store.rows import ColumnEdgeRow, FieldRow, NameRow
from embrasure.store.schema import COLUMNS

from conftest import run_sql, sqlite_files, sqlite_url

A, B, C = ("db", "a"), ("db", "b"), ("hive", "b")  # C: the same name, another namespace


def edge(src: tuple[str, str], sf: str, tgt: tuple[str, str], tf: str, job: str) -> ColumnEdgeRow:
    t = "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"
    return ColumnEdgeRow(
        *tgt, tf, *src, sf, *(("spark", job) if job else ("", "")), "",
        "mapping", "direct", 0, '["DIRECT/IDENTITY"]', *t, *t,
    )  # fmt: skip


EDGES = [
    edge(A, "id", B, "id", "j1"),
    edge(A, "x", B, "y", "j1"),
    edge(C, "id", A, "id", ""),
    edge(B, "id", C, "x", "j2"),
]


def test_rows_go_in_and_come_back_by_name(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.projection() as tx:
            tx.merge(ColumnEdgeRow, EDGES)
            tx.insert_missing(FieldRow, [FieldRow(*A, "id"), FieldRow(*C, "id")])
        with store.projection() as tx:
            # A second transaction (ids from the store's cache) merges into them.
            later = EDGES[0]._replace(
                last_key="2026-12-01T00:00:00.000000000Z", last_text="2026-12-01T00:00:00Z"
            )
            tx.merge(ColumnEdgeRow, [later])
            assert tx.load(ColumnEdgeRow, [EDGES[1][:9]]) == {EDGES[1][:9]: EDGES[1]}
            tx.delete(ColumnEdgeRow, [EDGES[3][:9], ("no", "such", "x", *EDGES[3][3:9])])
        with store.reader() as reader:
            assert reader.rows(ColumnEdgeRow) == sorted([later, *EDGES[1:3]])  # key order
            by_source = reader.rows(ColumnEdgeRow, ("src_ns", "src_name"), [A])
            assert sorted(by_source) == [later, EDGES[1]]
            got = reader.rows(ColumnEdgeRow, ("tgt_ns", "tgt_name", "tgt_field"), [(*A, "id")])
            assert got == [EDGES[2]]
            assert reader.rows(ColumnEdgeRow, ("job_ns", "job_name"), [("", "")]) == [EDGES[2]]
            assert reader.pick(ColumnEdgeRow, ("tgt_field",), ("src_field",), [("x",)]) == [("y",)]
            assert reader.distinct(ColumnEdgeRow, ("src_ns", "src_name", "src_field")) == [
                (*A, "id"),
                (*A, "x"),
                (*C, "id"),
            ]
            assert reader.rows(FieldRow) == [FieldRow(*A, "id"), FieldRow(*C, "id")]
            hits = {(h.ns, h.name, h.field) for h in reader.search("id", 10) if h.kind == "field"}
            assert hits == {(*A, "id"), (*C, "id")}
            # Each identity once, whatever it was named by (dataset, job, '' '' for none).
            names = reader.rows(NameRow)
            assert sorted((n.ns, n.name) for n in names) == sorted(
                [A, B, C, ("spark", "j1"), ("spark", "j2"), ("", "")]
            )
        stored = run_sql(db_url, "SELECT COUNT(*) FROM g1_column_edges")
        assert stored == [(3,)]
    finally:
        store.close()


# (key, text) as projector/times.py makes them: a text is stored NULL only when it is
# the key with its fraction's trailing zeros cut, and always reads back as written.
TIMES = [
    ("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z", True),
    ("2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00.000Z", False),
    ("2026-11-30T09:00:00.500000000Z", "2026-11-30T09:00:00.5Z", True),
    ("2026-11-30T09:00:00.500000000Z", "2026-11-30T09:00:00.50Z", False),
    ("2026-11-30T09:00:10.123456789Z", "2026-11-30T09:00:10.123456789Z", True),
    ("2026-11-30T09:00:10.120000000Z", "2026-11-30T09:00:10.120000000Z", False),
    ("0001-01-01T00:00:00.000000010Z", "0001-01-01T00:00:00.00000001Z", True),
]


def test_a_rolled_back_transaction_leaves_no_ids_behind(db_url: str) -> None:
    """Ids reach the cache kept across transactions only when theirs commits: the
    names a rolled-back one interned are gone, and their ids may be another's now."""
    store = open_store(db_url)
    try:
        with contextlib.suppress(RuntimeError), store.projection() as tx:
            tx.merge(ColumnEdgeRow, [EDGES[0]])
            raise RuntimeError("roll back")
        with store.projection() as tx:
            tx.merge(ColumnEdgeRow, [EDGES[3]])  # takes the ids SQLite handed out above
        with store.projection() as tx:
            tx.merge(ColumnEdgeRow, [EDGES[0]])
        with store.reader() as reader:
            assert reader.rows(ColumnEdgeRow) == sorted([EDGES[0], EDGES[3]])
    finally:
        store.close()


def test_a_rebuild_starts_with_no_cached_ids(db_url: str) -> None:
    """A rebuild's tables number names afresh: ids cached for the generation they
    replace (or a crashed rebuild's tables of the same number) must not be used."""
    store = open_store(db_url)
    try:
        with store.projection() as tx:
            tx.merge(ColumnEdgeRow, [EDGES[3]])
        first = store.create_generation()
        with store.projection(first) as tx:
            tx.merge(ColumnEdgeRow, [EDGES[0]])
        store.drop_generation(first)  # as a failed rebuild does; the next takes its number
        again = store.create_generation()
        assert again == first
        with store.projection(again) as tx:
            tx.merge(ColumnEdgeRow, [EDGES[1], EDGES[0]])
            assert tx.load(ColumnEdgeRow, [EDGES[0][:9]]) == {EDGES[0][:9]: EDGES[0]}
    finally:
        store.close()


def test_time_texts_come_back_exactly(db_url: str) -> None:
    rows = [
        edge(A, f"f{n}", B, f"f{n}", "j")._replace(
            first_key=key, first_text=text, last_key=key, last_text=text
        )
        for n, (key, text, _plain) in enumerate(TIMES)
    ]
    store = open_store(db_url)
    try:
        with store.projection() as tx:
            tx.merge(ColumnEdgeRow, rows)
        with store.reader() as reader:
            assert reader.rows(ColumnEdgeRow) == sorted(rows)
    finally:
        store.close()
    stored = run_sql(db_url, "SELECT COUNT(first_text), COUNT(last_text) FROM g1_column_edges")
    kept = sum(not plain for _key, _text, plain in TIMES)
    assert stored == [(kept, kept)]


@pytest.mark.parametrize(
    "match",
    [
        ("tgt_ns", "tgt_name", "tgt_field"),  # column lineage upstream
        ("src_ns", "src_name", "src_field"),  # downstream, export
        ("src_ns", "src_name"),  # impact: a dataset's fields with lineage
        ("tgt_ns", "tgt_name", "tgt_field", "src_ns", "src_name", "src_field"),
    ],
)
def test_named_lookups_search_indexes(db_path: Path, match: tuple[str, ...]) -> None:
    open_store(sqlite_url(db_path)).close()
    keys, values = COLUMNS["column_edges"]
    sql = named_sql("g1_", "column_edges", keys + values, match, 2)
    with contextlib.closing(sqlite_files(db_path)) as conn:
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, ["x"] * 2 * len(match))]
    # Only the VALUES list is scanned; the names, then the edges by an index on ids.
    scans = [p for p in plan if p.startswith("SCAN")]
    assert scans == ["SCAN 2 CONSTANT ROWS", "SCAN v"], plan
    assert any(p.startswith("SEARCH e USING") for p in plan), plan
