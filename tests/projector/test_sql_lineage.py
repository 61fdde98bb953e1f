"""Column lineage derived from the job's SQL facet
(docs/projection.md#column-lineage-derived-from-sql;
projector/sql_lineage.py), read from whole events through ``project_event``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import openlineage_sql
import pytest

from embrasure.model import ColumnFact, DatasetFacts, DatasetId, EventFacts, JobId
from embrasure.projector import sql_lineage
from embrasure.projector.column_lineage import ColumnEdge, ColumnEdgeKey, edge_of, merge_edges
from embrasure.projector.pipeline import project_event
from embrasure.projector.sql_lineage import dialect_of

EVENTS = Path(__file__).parent / "sql_events"
HIVE = "hive://localhost:9083"
PG = "postgres://db.internal:5432"


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def facts_of(event: dict[str, Any]) -> EventFacts:
    # A fresh parse every time: results must not depend on what the process saw before.
    sql_lineage.clear_cache()
    found = project_event(event)
    assert isinstance(found, EventFacts), found
    return found


def edges(facts: EventFacts) -> set[tuple[str, str, str, str, str, str | None, str | None]]:
    return {
        (c.source.name, c.source_field, c.target.name, c.target_field, c.kind, c.klass, c.derived)
        for c in facts.columns
    }


def sql_warnings(facts: EventFacts) -> list[str]:
    return [w for w in facts.warnings if w.startswith("SQL column lineage")]


def ds(name: str, *fields: str, namespace: str = PG, **facets: Any) -> dict[str, Any]:
    if fields:
        facets["schema"] = {"fields": [{"name": f, "type": "string"} for f in fields]}
    return {"namespace": namespace, "name": name, "facets": facets}


def event(
    query: str,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    dialect: str | None = None,
) -> dict[str, Any]:
    sql: dict[str, Any] = {"query": query}
    if dialect is not None:
        sql["dialect"] = dialect
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-30T09:00:00Z",
        "run": {"runId": "0194f5d2-6b1a-7c3e-8d4f-5a6b7c8d9e02"},
        "job": {"namespace": "airflow", "name": "etl.load", "facets": {"sql": sql}},
        "inputs": inputs,
        "outputs": outputs,
    }


# -- real producer events (the Hive integration) ----------------------------------------------


def test_hive_ctas_without_column_lineage_is_derived() -> None:
    facts = facts_of(load("cllCtasWithJoinsStart.json"))
    assert edges(facts) == {
        ("test.t1", "id", "test.xxx", "id", "mapping", "expression", "sql"),
        ("test.t2", "name", "test.xxx", "name", "mapping", "expression", "sql"),
    }
    assert sql_warnings(facts) == []


def test_an_output_with_a_column_lineage_facet_gets_nothing_derived() -> None:
    facts = facts_of(load("cllCtasWithJoinsComplete.json"))
    assert facts.job_facets["sql"]["query"].startswith("CREATE TABLE xxx AS")
    assert facts.columns and all(c.derived is None for c in facts.columns)


@pytest.mark.parametrize("declared_first", [False, True])
def test_declared_beats_derived_across_two_events(declared_first: bool) -> None:
    start = facts_of(load("cllCtasWithJoinsStart.json"))
    complete = facts_of(load("cllCtasWithJoinsComplete.json"))
    order = [complete, start] if declared_first else [start, complete]
    job = JobId("default", "createtable_as_select.test.xxx")
    merged: dict[ColumnEdgeKey, ColumnEdge] = {}
    for edge in (edge_of(job, c) for f in order for c in f.columns):
        old = merged.get(edge.key)
        merged[edge.key] = edge if old is None else merge_edges(old, edge)
    by_pair = {(k.source.name, k.source_field, k.target_field): e for k, e in merged.items()}
    name = by_pair[("test.t2", "name", "name")]
    assert (name.kind, name.klass, name.derived) == ("mapping", "direct", None)
    assert name.subtypes == ("DIRECT/IDENTITY",)
    ident = by_pair[("test.t1", "id", "id")]
    assert (ident.klass, ident.derived) == ("expression", None)
    assert ident.indirect == ("FILTER", "JOIN")
    assert all(e.derived is None for e in merged.values())


def test_hive_identifiers_are_lower_case_as_the_metastore_keeps_them() -> None:
    facts = facts_of(load("cllCaseInsensitivityStart.json"))
    assert {(c.source_field, c.target_field) for c in facts.columns} == {
        ("submissiondate", "month"),
        ("transactionamount", "totalamount"),
        ("transactiontype", "transactiontype"),
    }
    declared = facts_of(load("cllCaseInsensitivityComplete.json"))
    mappings = {(c.source_field, c.target_field) for c in declared.columns if c.kind == "mapping"}
    assert {(c.source_field, c.target_field) for c in facts.columns} == mappings


def test_derived_facts_are_a_function_of_the_event_alone() -> None:
    raw = load("cllCtasWithJoinsStart.json")
    cold = facts_of(copy.deepcopy(raw))
    warm = project_event(copy.deepcopy(raw))  # now from the parse cache
    assert isinstance(warm, EventFacts)
    assert warm.columns == cold.columns and warm.warnings == cold.warnings


# -- warnings, never quarantine ---------------------------------------------------------------


def test_unparseable_sql_is_a_warning() -> None:
    facts = facts_of(event("SELEC oops FROM", [ds("shop.public.a", "x")], [ds("shop.public.b")]))
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        "SQL column lineage not derived: the query cannot be parsed as postgres SQL: "
        "Expected: an SQL statement, found: SELEC at Line: 1, Column: 1"
    ]
    assert [d.id.name for d in facts.datasets] == ["shop.public.a", "shop.public.b"]


def test_a_parser_exception_is_a_warning() -> None:
    # openlineage_sql raises RuntimeError("Empty statement list") for a comment alone.
    facts = facts_of(event("-- nothing here", [ds("shop.public.a")], [ds("shop.public.b")]))
    (warning,) = sql_warnings(facts)
    assert warning == (
        "SQL column lineage not derived: the SQL parser failed on the postgres query: "
        "RuntimeError: Empty statement list"
    )


def test_a_parser_panic_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    class PanicException(BaseException):  # what pyo3 raises for a Rust panic
        pass

    def panics(*args: Any, **kwargs: Any) -> Any:
        raise PanicException("index out of bounds")

    monkeypatch.setattr(openlineage_sql, "parse", panics)
    facts = facts_of(event("INSERT INTO b SELECT x FROM a", [ds("a")], [ds("b")]))
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        "SQL column lineage not derived: the SQL parser failed on the postgres query: "
        "PanicException: index out of bounds"
    ]


def test_an_oversized_query_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_lineage, "MAX_SQL_CHARS", 40)
    monkeypatch.setattr(openlineage_sql, "parse", lambda *a, **k: pytest.fail("parsed"))
    query = "INSERT INTO b SELECT x FROM a WHERE x > 1000"
    facts = facts_of(event(query, [ds("a")], [ds("b")]))
    assert sql_warnings(facts) == [
        f"SQL column lineage not derived: the query is {len(query)} characters, over the 40 "
        "that are parsed"
    ]


def test_deleted_or_blank_sql_derives_nothing_silently() -> None:
    for sql in ({"_deleted": True}, {"query": "   "}):
        raw = event("x", [ds("a")], [ds("b")])
        raw["job"]["facets"]["sql"] = sql
        facts = facts_of(raw)
        assert facts.columns == () and sql_warnings(facts) == []


# -- matching tables to the event's datasets ---------------------------------------------------


def test_trailing_components_match() -> None:
    facts = facts_of(
        event(
            "INSERT INTO public.orders_daily SELECT amount AS total FROM public.orders",
            [ds("shop.public.orders", "amount")],
            [ds("shop.public.orders_daily", "total")],
        )
    )
    assert edges(facts) == {
        ("shop.public.orders", "amount", "shop.public.orders_daily", "total", "mapping",
         "expression", "sql"),
    }  # fmt: skip
    assert sql_warnings(facts) == []


def test_an_exact_name_is_preferred_to_a_trailing_match() -> None:
    facts = facts_of(
        event("INSERT INTO out SELECT id FROM orders", [ds("orders"), ds("x.orders")], [ds("out")])
    )
    assert {c.source.name for c in facts.columns} == {"orders"}
    assert sql_warnings(facts) == []


def test_an_ambiguous_table_is_a_warning_and_no_edge() -> None:
    facts = facts_of(
        event(
            "INSERT INTO public.report SELECT id FROM public.orders",
            [ds("eu.public.orders", "id"), ds("us.public.orders", "id")],
            [ds("dw.public.report", "id")],
        )
    )
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        f"SQL column lineage: table public.orders matches 2 of the event's inputs "
        f"({PG}:eu.public.orders, {PG}:us.public.orders); ignored"
    ]


def test_the_same_name_in_two_namespaces_is_ambiguous() -> None:
    facts = facts_of(
        event(
            "INSERT INTO report SELECT id FROM orders",
            [ds("orders"), ds("orders", namespace="mysql://replica:3306")],
            [ds("report")],
        )
    )
    assert facts.columns == ()
    (warning,) = sql_warnings(facts)
    assert "table orders matches 2 of the event's inputs" in warning


def test_a_table_symlink_name_matches() -> None:
    spark_input = {
        "namespace": "s3://lake",
        "name": "warehouse/orders",
        "facets": {
            "symlinks": {
                "identifiers": [{"namespace": HIVE, "name": "sales.orders", "type": "TABLE"}]
            }
        },
    }
    facts = facts_of(
        event("INSERT INTO sales.daily SELECT amount FROM sales.orders", [spark_input],
              [ds("sales.daily", namespace=HIVE)])
    )  # fmt: skip
    assert {(c.source, c.source_field) for c in facts.columns} == {
        (DatasetId("s3://lake", "warehouse/orders"), "amount")
    }


def test_a_source_table_not_among_the_inputs_is_a_warning() -> None:
    facts = facts_of(
        event("INSERT INTO b SELECT x, y FROM a JOIN c ON a.id = c.id", [ds("a")], [ds("b")])
    )
    assert sql_warnings(facts) == []  # unqualified columns: the parser names the first table
    facts = facts_of(event("INSERT INTO b SELECT c.y FROM a JOIN c ON a.id = c.id", [ds("a")],
                           [ds("b")]))  # fmt: skip
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        "SQL column lineage: table c is not among the event's inputs; ignored"
    ]


def test_a_query_without_target_feeds_the_only_output() -> None:
    # A dbt model's compiled SELECT: the event's one output is what it builds.
    facts = facts_of(
        event("SELECT o.id, o.amount * 2 AS doubled FROM shop.orders o", [ds("shop.orders")],
              [ds("analytics.orders_doubled")])
    )  # fmt: skip
    assert {(c.source_field, c.target_field) for c in facts.columns} == {
        ("id", "id"),
        ("amount", "doubled"),
    }
    two = facts_of(event("SELECT id FROM shop.orders", [ds("shop.orders")], [ds("a.x"), ds("a.y")]))
    assert two.columns == ()
    assert sql_warnings(two) == [
        "SQL column lineage not derived: the query writes no table and the event has 2 outputs"
    ]


def test_a_query_writing_several_tables_is_not_attributed() -> None:
    facts = facts_of(
        event(
            "INSERT INTO x SELECT a FROM s; INSERT INTO y SELECT b FROM s",
            [ds("s")],
            [ds("x"), ds("y")],
        )
    )
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        "SQL column lineage not derived: the query writes 2 tables (x, y); its columns "
        "cannot be told apart"
    ]


def test_only_outputs_without_a_facet_get_derived_lineage() -> None:
    declared = {"fields": {"id": {"inputFields": [{"namespace": PG, "name": "s", "field": "id"}]}}}
    facts = facts_of(
        event("INSERT INTO x SELECT id FROM s", [ds("s")], [ds("x", columnLineage=declared)])
    )
    assert [c.derived for c in facts.columns] == [None]


def test_a_facet_dropped_for_breaking_its_schema_leaves_the_output_without() -> None:
    broken = {"fields": [1, 2]}  # ColumnLineageDatasetFacet wants an object
    facts = facts_of(
        event("INSERT INTO x SELECT id FROM s", [ds("s")], [ds("x", columnLineage=broken)])
    )
    assert facts.warnings[0].startswith("outputs[0].facets.columnLineage dropped")
    assert [(c.source_field, c.target_field, c.derived) for c in facts.columns] == [
        ("id", "id", "sql")
    ]


# -- columns -----------------------------------------------------------------------------------


def test_schema_facets_check_and_spell_columns() -> None:
    facts = facts_of(
        event(
            "INSERT INTO out SELECT ID, Amount AS TOTAL, max(y), note AS extra FROM src",
            [ds("src", "id", "amount", "note")],
            [ds("out", "id", "total")],
        )
    )
    assert {(c.source_field, c.target_field) for c in facts.columns} == {
        ("id", "id"),
        ("amount", "total"),
    }
    assert sql_warnings(facts) == [
        "SQL column lineage: 1 unnamed output expression(s) ignored",
        f"SQL column lineage: column(s) extra not in the schema of {PG}:out; ignored",
    ]


def test_an_insert_column_list_is_caught_by_the_schema() -> None:
    # The parser names the SELECT's columns (x), not the INSERT's list (a): with the
    # target's schema the wrong name is dropped rather than invented.
    facts = facts_of(event("INSERT INTO o (a) SELECT x FROM s", [ds("s", "x")], [ds("o", "a")]))
    assert facts.columns == ()
    assert sql_warnings(facts) == [
        f"SQL column lineage: column(s) x not in the schema of {PG}:o; ignored"
    ]


# -- dialect -----------------------------------------------------------------------------------


def facts_ds(namespace: str, uri: str | None = None) -> DatasetFacts:
    facets = {"dataSource": {"name": "x", "uri": uri}} if uri else {}
    return DatasetFacts(DatasetId(namespace, "a.b"), "input", facets, {})


@pytest.mark.parametrize(
    ("facet", "namespaces", "expected"),
    [
        ({"dialect": "snowflake"}, ["postgres://h:5432"], "snowflake"),
        ({"dialect": "PostgreSQL"}, [], "postgres"),
        ({"dialect": "sqlserver"}, [], "mssql"),
        ({"dialect": "tsql"}, [], "mssql"),
        ({"dialect": "spark"}, [], "databricks"),
        ({"dialect": "trino"}, [], "generic"),
        ({"dialect": "klingon"}, ["postgres://h:5432"], "generic"),
        ({}, ["postgres://h:5432"], "postgres"),
        ({}, ["snowflake://org-account"], "snowflake"),
        ({}, ["bigquery"], "bigquery"),
        ({}, ["redshift://cluster.eu-west-1:5439"], "redshift"),
        ({}, ["mysql://h:3306"], "mysql"),
        ({}, ["mssql://h:1433"], "mssql"),
        ({}, ["sqlserver://h:1433"], "mssql"),
        ({}, ["trino://h:8080"], "generic"),
        ({}, ["hive://h:9083"], "hive"),
        ({}, ["databricks://workspace"], "databricks"),
        ({}, ["awsathena://athena.eu-west-1.amazonaws.com"], "generic"),
        ({}, ["s3://bucket", "snowflake://org-account"], "snowflake"),
        ({}, ["postgres://h:5432", "bigquery"], "generic"),
        ({}, ["s3://bucket"], "generic"),
        ({}, [], "generic"),
    ],
)
def test_dialect_selection(facet: dict[str, Any], namespaces: list[str], expected: str) -> None:
    assert dialect_of(facet, [facts_ds(ns) for ns in namespaces]) == expected


def test_dialect_from_a_data_source_uri() -> None:
    assert dialect_of({}, [facts_ds("warehouse", "mssql://h:1433;database=x")]) == "mssql"


def test_every_dialect_is_one_the_parser_knows() -> None:
    known = {"bigquery", "databricks", "snowflake", "postgres", "redshift", "hive", "mysql",
             "mssql", "sqlite", "ansi", "generic"}  # fmt: skip
    assert set(sql_lineage.DIALECTS.values()) <= known


def test_the_dialect_decides_what_parses() -> None:
    query = "INSERT INTO [dbo].[report] SELECT [id] FROM [dbo].[orders]"
    inputs, outputs = [ds("shop.dbo.orders")], [ds("shop.dbo.report")]
    as_mssql = facts_of(event(query, inputs, outputs, dialect="mssql"))
    assert {(c.source.name, c.target.name) for c in as_mssql.columns} == {
        ("shop.dbo.orders", "shop.dbo.report")
    }
    as_postgres = facts_of(event(query, inputs, outputs))  # postgres:// namespaces
    assert as_postgres.columns == ()
    (warning,) = sql_warnings(as_postgres)
    assert warning.startswith(
        "SQL column lineage not derived: the query cannot be parsed as postgres"
    )


def test_the_chosen_dialect_reaches_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = openlineage_sql.parse

    def spy(sql: list[str], dialect: str | None = None, default_schema: str | None = None) -> Any:
        seen.append(dialect)
        return real(sql, dialect=dialect, default_schema=default_schema)

    monkeypatch.setattr(openlineage_sql, "parse", spy)
    facts_of(event("INSERT INTO b SELECT x FROM a", [ds("a", namespace="bigquery")],
                   [ds("b", namespace="bigquery")]))  # fmt: skip
    assert seen == ["bigquery"]


# -- the parse cache ---------------------------------------------------------------------------


def test_the_parse_cache_is_a_bounded_lru(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_lineage, "CACHE_SIZE", 3)
    sql_lineage.clear_cache()
    queries = [f"INSERT INTO b SELECT c{i} FROM a" for i in range(5)]
    for q in queries:
        sql_lineage.parse_sql(q, "generic")
    assert len(sql_lineage._cache) == 3
    sql_lineage.parse_sql(queries[2], "generic")  # hit: now the most recent
    sql_lineage.parse_sql(queries[0], "generic")  # evicted earlier: a miss
    assert sql_lineage.cache_stats == {"hits": 1, "misses": 6}
    sql_lineage.parse_sql(queries[2], "generic")
    assert sql_lineage.cache_stats["hits"] == 2
    # Same text, other dialect: another entry.
    same = sql_lineage.parse_sql(queries[2], "mssql")
    assert same == sql_lineage.parse_sql(queries[2], "generic")
    assert sql_lineage.cache_stats["misses"] == 7


def test_facts_carry_no_parser_objects() -> None:
    facts = facts_of(load("cllCtasWithJoinsStart.json"))
    assert all(type(c) is ColumnFact for c in facts.columns)
    parsed = sql_lineage.parse_sql("INSERT INTO b SELECT x FROM a", "generic")
    assert parsed.out_tables == ("b",)
    assert parsed.lineage == ((None, "x", (("a", "x"),)),)
