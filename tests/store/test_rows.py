"""The typed rows (store/rows.py) against the tables the schema creates: schema.COLUMNS
is derived from the records, so a column added to a table and not to its record (or
the other way round), or a key split that is not the table's primary key, must fail
here rather than shift every reader."""

from __future__ import annotations

import contextlib
from pathlib import Path

from embrasure.store import open_store
from embrasure.store.rows import (
    GRAPH_ROWS,
    INTERNED,
    ItemRow,
    columns_of,
    decode_kinds,
    encode_kinds,
    table_of,
)
from embrasure.store.schema import TABLES

from conftest import sqlite_files, sqlite_url


def test_every_graph_table_has_a_record() -> None:
    assert set(GRAPH_ROWS) == set(TABLES) - {"position"}  # position: one number, no rows
    assert all(table_of(t.row) == name for name, t in GRAPH_ROWS.items())


def test_records_name_the_created_tables_columns_and_keys(db_path: Path) -> None:
    open_store(sqlite_url(db_path)).close()
    with contextlib.closing(sqlite_files(db_path)) as conn:
        for name, table in GRAPH_ROWS.items():
            info = conn.execute(f"PRAGMA table_info(g1_{name})").fetchall()
            # A table storing interned ids has its stored record (store/interned.py).
            keys, values = columns_of(INTERNED.get(name, table))
            # (cid, name, type, notnull, default, pk): pk is the place in the primary key
            assert {c[1] for c in info} == {*keys, *values}, name
            assert tuple(c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]) == keys, name


def test_interned_tables_keep_their_value_columns() -> None:
    # The merge rules (schema.MERGES) name value columns: the stored record has the same.
    for name, stored in INTERNED.items():
        assert columns_of(stored)[1] == columns_of(GRAPH_ROWS[name])[1], name


def test_item_outcomes_have_one_shape() -> None:
    warned = ItemRow.projected(7, 2, "RunEvent", '["w"]')
    bad = ItemRow.quarantined(7, 3, None, "bad", retriable=True)
    # Only a projected item with a kind and no warnings is plain (keeps no row).
    assert ItemRow.projected(7, 4, "JobEvent").plain
    assert not warned.plain and not bad.plain and not ItemRow.projected(7, 5, None).plain
    assert warned == (7, 2, "RunEvent", "projected", None, 0, '["w"]')
    assert bad == (7, 3, None, "quarantined", "bad", 1, "[]")


def test_kinds_are_run_length_encoded_in_index_order() -> None:
    kinds = ["RunEvent"] * 3 + ["JobEvent"] + ["RunEvent"] * 2
    text = encode_kinds(kinds)
    assert text == '[["RunEvent",3],["JobEvent",1],["RunEvent",2]]'
    assert decode_kinds(text) == kinds
    assert encode_kinds([]) == "[]" and decode_kinds("[]") == []
