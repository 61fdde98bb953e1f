"""Column lineage through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

import pytest

from graph_api import (
    AGGREGATION,
    DBT,
    DBT_CUSTOMERS,
    DBT_JOB,
    DBT_ORDERS,
    DBT_REPORT,
    IDENTITY,
    TRANSFORMATION,
    Api,
    Event,
    at,
    column_lineage,
    dbt_run,
    ds,
    field_id,
    input_field,
    job_id,
    node_ids,
    run_event,
    run_id,
    schema,
    symlinks,
)

# == column lineage ================================================================================
# (docs/projection.md#column-lineage, docs/queries.md#column-lineage-and-impact)


@pytest.mark.parametrize(
    ("transformations", "kind", "klass", "indirect"),
    [
        ([IDENTITY], "mapping", "direct", []),
        ([TRANSFORMATION], "mapping", "expression", []),
        ([AGGREGATION], "mapping", "aggregate", []),
        ([IDENTITY, AGGREGATION, TRANSFORMATION], "mapping", "aggregate", []),
        ([], "mapping", "expression", []),  # no metadata at all
        ([("DIRECT", "WINDOWED_MAGIC", False)], "mapping", "expression", []),  # unknown
        # docs/queries.md#column-lineage-and-impact: `indirect` holds "the INDIRECT
        # subtypes": the API answers the bare subtype ("JOIN"), not the qualified
        # "INDIRECT/JOIN".
        ([("INDIRECT", "JOIN", False)], "indirect", None, ["JOIN"]),
        (
            [("INDIRECT", "JOIN", False), ("INDIRECT", "FILTER", False)],
            "indirect",
            None,
            ["FILTER", "JOIN"],
        ),
        ([IDENTITY, ("INDIRECT", "FILTER", False)], "mapping", "direct", ["FILTER"]),
    ],
    ids=[
        "identity",
        "transformation",
        "aggregation",
        "strongest",
        "none",
        "unknown-subtype",
        "join",
        "join-filter",
        "direct-with-filter",
    ],
)
def test_column_edge_classification(
    api: Api,
    transformations: list[tuple[str, str, bool]],
    kind: str,
    klass: str | None,
    indirect: list[str],
) -> None:
    api.ingest(dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", *transformations)]}))
    doc = api.columns(*DBT_REPORT, "order_id")
    assert doc["root"] == field_id(DBT_REPORT, "order_id")
    assert node_ids(doc) == {field_id(DBT_REPORT, "order_id"), field_id(DBT_ORDERS, "id")}
    (e,) = doc["edges"]
    assert (e["source"], e["target"]) == (
        field_id(DBT_ORDERS, "id"),
        field_id(DBT_REPORT, "order_id"),
    )
    assert (e["kind"], e["class"], sorted(e["indirect"])) == (kind, klass, indirect)
    assert e["masked"] is False and e["job"] == DBT_JOB and "derived" not in e


def test_field_nodes_carry_their_parts(api: Api) -> None:
    api.ingest(dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", IDENTITY)]}))
    doc = api.columns(*DBT_REPORT, "order_id")
    assert {
        "id": field_id(DBT_ORDERS, "id"),
        "type": "field",
        "namespace": DBT_ORDERS[0],
        "name": DBT_ORDERS[1],
        "field": "id",
    } in doc["nodes"]


@pytest.mark.parametrize("reverse", [False, True], ids=["weak-first", "strong-first"])
def test_strongest_class_wins_across_events(api: Api, reverse: bool) -> None:
    runs = [
        dbt_run(1, {"total": [input_field(DBT_ORDERS, "amount", IDENTITY)]}, at(9)),
        dbt_run(2, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}, at(10)),
        dbt_run(3, {"total": [input_field(DBT_ORDERS, "amount", TRANSFORMATION)]}, at(11)),
    ]
    api.ingest_each(*(reversed(runs) if reverse else runs))
    (e,) = api.columns(*DBT_REPORT, "total")["edges"]
    assert (e["kind"], e["class"]) == ("mapping", "aggregate")
    assert (e["first_seen"], e["last_seen"]) == (at(9), at(11))


def test_masking_marks_the_edge_masked_for_good(api: Api) -> None:
    masked = ("DIRECT", "TRANSFORMATION", True)
    api.ingest_each(
        dbt_run(1, {"email": [input_field(DBT_CUSTOMERS, "email", masked)]}, at(9)),
        dbt_run(2, {"email": [input_field(DBT_CUSTOMERS, "email", TRANSFORMATION)]}, at(10)),
    )
    (e,) = api.columns(*DBT_REPORT, "email")["edges"]
    assert (e["class"], e["masked"]) == ("expression", True)


def test_indirect_only_input_is_an_indirect_dependency(api: Api) -> None:
    api.ingest(
        dbt_run(
            1,
            {
                "customer_name": [
                    input_field(DBT_CUSTOMERS, "name", IDENTITY),
                    input_field(DBT_ORDERS, "customer_id", ("INDIRECT", "JOIN", False)),
                ]
            },
        )
    )
    doc = api.columns(*DBT_REPORT, "customer_name")
    by_source = {e["source"]: e for e in doc["edges"]}
    join = by_source[field_id(DBT_ORDERS, "customer_id")]
    assert (join["kind"], join["class"], join["indirect"]) == ("indirect", None, ["JOIN"])
    name = by_source[field_id(DBT_CUSTOMERS, "name")]
    assert (name["kind"], name["class"]) == ("mapping", "direct")

    mappings = api.columns(*DBT_REPORT, "customer_name", kinds="mapping")
    assert [e["source"] for e in mappings["edges"]] == [field_id(DBT_CUSTOMERS, "name")]
    assert field_id(DBT_ORDERS, "customer_id") not in node_ids(mappings)
    indirect = api.columns(*DBT_REPORT, "customer_name", kinds="indirect")
    assert [e["source"] for e in indirect["edges"]] == [field_id(DBT_ORDERS, "customer_id")]
    api.problem(
        "GET",
        "/api/v1/column-lineage",
        400,
        namespace=DBT_REPORT[0],
        name=DBT_REPORT[1],
        field="customer_name",
        kinds="mapping,derived",
    )


def test_unmatched_input_dataset_is_ignored_with_a_warning(api: Api) -> None:
    ghost = ("postgres://db:5432", "public.ghost")
    view = api.ingest(
        dbt_run(
            1,
            {
                "order_id": [
                    input_field(DBT_ORDERS, "id", IDENTITY),
                    input_field(ghost, "id", IDENTITY),
                ]
            },
        )
    )
    assert view["items"][0]["outcome"] == "projected"
    (warning,) = view["items"][0]["warnings"]
    assert "public.ghost" in warning and "not among the event's inputs" in warning
    doc = api.columns(*DBT_REPORT, "order_id")
    assert [e["source"] for e in doc["edges"]] == [field_id(DBT_ORDERS, "id")]
    api.problem("GET", "/api/v1/datasets", 404, namespace=ghost[0], name=ghost[1])


def test_column_lineage_walks_hops_both_ways(api: Api) -> None:
    dashboard = ("postgres://db:5432", "analytics.revenue")
    api.ingest(
        dbt_run(1, {"total": [input_field(DBT_ORDERS, "amount", AGGREGATION)]}),
        run_event(
            "COMPLETE",
            "jaffle_shop.revenue",
            run_id(2),
            at(10),
            inputs=[ds(*DBT_REPORT)],
            outputs=[
                ds(
                    *dashboard,
                    columnLineage=column_lineage(
                        {"revenue": [input_field(DBT_REPORT, "total", IDENTITY)]}
                    ),
                )
            ],
            namespace="dbt",
            producer=DBT,
        ),
    )
    up = api.columns(*dashboard, "revenue", direction="upstream")
    assert node_ids(up) == {
        field_id(dashboard, "revenue"),
        field_id(DBT_REPORT, "total"),
        field_id(DBT_ORDERS, "amount"),
    }
    assert {e["job"] for e in up["edges"]} == {DBT_JOB, job_id("dbt", "jaffle_shop.revenue")}
    one_hop = api.columns(*dashboard, "revenue", direction="upstream", depth=1)
    assert node_ids(one_hop) == {field_id(dashboard, "revenue"), field_id(DBT_REPORT, "total")}
    down = api.columns(*DBT_ORDERS, "amount", direction="downstream")
    assert node_ids(down) == node_ids(up)
    both = api.columns(*DBT_REPORT, "total")
    assert node_ids(both) == node_ids(up)
    assert up["truncated"] is False
    capped = api.columns(*dashboard, "revenue", direction="upstream", limit=2)
    assert capped["truncated"] is True
    assert node_ids(capped) == {field_id(dashboard, "revenue"), field_id(DBT_REPORT, "total")}
    assert [(e["source"], e["target"]) for e in capped["edges"]] == [
        (field_id(DBT_REPORT, "total"), field_id(dashboard, "revenue"))
    ]


def test_column_both_is_the_union_of_the_two_walks_on_a_cycle(api: Api) -> None:
    t, u, v = ("w", "t"), ("w", "u"), ("w", "v")

    def copy(
        n: int, job: str, src: tuple[str, str], f_in: str, out: tuple[str, str], f_out: str
    ) -> Event:
        lineage = column_lineage({f_out: [input_field(src, f_in, IDENTITY)]})
        return run_event(
            "COMPLETE",
            job,
            run_id(n),
            at(9),
            inputs=[ds(*src)],
            outputs=[ds(*out, columnLineage=lineage)],
        )

    api.ingest(
        copy(1, "J", t, "a", u, "b"), copy(2, "K", u, "b", t, "a"), copy(3, "L", u, "b", v, "c")
    )
    up = node_ids(api.columns(*t, "a", direction="upstream"))
    down = node_ids(api.columns(*t, "a", direction="downstream"))
    assert field_id(v, "c") in down
    assert node_ids(api.columns(*t, "a", direction="both")) == up | down


def test_field_name_is_percent_encoded_in_ids(api: Api) -> None:
    api.ingest(dbt_run(1, {"ratio:pct%": [input_field(DBT_ORDERS, "a:b", IDENTITY)]}))
    doc = api.columns(*DBT_REPORT, "ratio:pct%")
    assert doc["root"] == f"field:{DBT_REPORT[0]}:{DBT_REPORT[1]}:ratio%3Apct%25"
    (e,) = doc["edges"]
    assert e["source"] == f"field:{DBT_ORDERS[0]}:{DBT_ORDERS[1]}:a%3Ab"


def test_known_dataset_field_without_lineage_is_just_its_root(api: Api) -> None:
    """A field the dataset's schema facet names, with no column edge: 200, its root."""
    api.ingest(
        dbt_run(1, {"order_id": [input_field(DBT_ORDERS, "id", IDENTITY)]}),
        run_event(
            "COMPLETE", "load", run_id(2), at(8), outputs=[ds(*DBT_REPORT, schema=schema("note"))]
        ),
    )
    doc = api.columns(*DBT_REPORT, "note")
    assert doc == {
        "root": field_id(DBT_REPORT, "note"),
        "nodes": [
            {
                "id": field_id(DBT_REPORT, "note"),
                "type": "field",
                "namespace": DBT_REPORT[0],
                "name": DBT_REPORT[1],
                "field": "note",
            }
        ],
        "edges": [],
        "truncated": False,
    }
    api.problem("GET", "/api/v1/column-lineage", 400, namespace=DBT_REPORT[0], name=DBT_REPORT[1])


FIELD_NOT_FOUND = "https://embrasure.dev/problems/field-not-found"


@pytest.mark.parametrize("path", ["/api/v1/column-lineage", "/api/v1/impact"])
def test_a_field_the_dataset_never_had_is_a_404_naming_the_closest(api: Api, path: str) -> None:
    """``emial`` on customers is a typo, not "nothing downstream": 404 field-not-found with
    the dataset's own near names (``email``, not another dataset's ``emails``), by an
    alias as by the dataset's own name."""
    hive = ("hive://metastore:9083", "shop.customers")
    api.ingest(
        dbt_run(1, {"email_hash": [input_field(DBT_CUSTOMERS, "email", TRANSFORMATION)]}),
        run_event(
            "COMPLETE",
            "load",
            run_id(2),
            at(8),
            outputs=[
                ds(
                    *DBT_CUSTOMERS,
                    schema=schema("id", "e_mail"),
                    symlinks=symlinks((*hive, "TABLE")),
                ),
                ds("s3://other", "contacts", schema=schema("emails", "emial_x")),
            ],
        ),
    )
    params = {"namespace": DBT_CUSTOMERS[0], "name": DBT_CUSTOMERS[1]}
    problem = api.problem("GET", path, 404, **params, field="emial")
    assert problem["type"] == FIELD_NOT_FOUND
    assert problem["title"] == "Field not found"
    assert problem["closest"] == ["email", "e_mail"]
    assert problem["detail"] == (
        f"No field 'emial' is known on dataset {DBT_CUSTOMERS[0]} {DBT_CUSTOMERS[1]}: no schema"
        " facet or column lineage named it. Closest known: email, e_mail."
    )
    # Each kind of known field answers 200: a column lineage source, a schema field, both
    # sent under the warehouse name, asked for by it and by the table it is a location of
    # (the canonical node), each answer naming its root as asked.
    asked = DBT_CUSTOMERS
    assert api.get(path, **params, field="email")["root"] == field_id(asked, "email")
    assert api.get(path, **params, field="id")["root"] == field_id(asked, "id")
    by_alias = api.get(path, namespace=hive[0], name=hive[1], field="email")
    assert by_alias["root"] == field_id(hive, "email")
    far = api.problem("GET", path, 404, namespace=hive[0], name=hive[1], field="zzzz")
    assert far["type"] == FIELD_NOT_FOUND and far["closest"] == []
    assert "None of its known fields is close" in far["detail"]
    # An unknown dataset is still the plain 404.
    ghost = api.problem("GET", path, 404, namespace="s3://nowhere", name="x", field="email")
    assert ghost["type"].endswith("/not-found")
