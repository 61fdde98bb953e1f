"""Symlinks and renames through the read API: one node, every alias resolving to it
(how: tests/graph_api.py)."""

from __future__ import annotations

import pytest

from graph_api import (
    DBT,
    HIVE_REPORT,
    HIVE_TABLE,
    ORDERS,
    REPORT,
    S3_LOCATION,
    WAREHOUSE_PATH,
    Api,
    at,
    daily_run,
    dataset_event,
    dataset_id,
    ds,
    edge,
    edge_pairs,
    facet,
    job_id,
    lifecycle,
    node_ids,
    run_event,
    run_id,
    spark_reads_table,
    spark_writes_path,
    symlinks,
    walk_pages,
)

# == symlinks and renames (docs/projection.md#entities-and-identity) ===============================


@pytest.mark.parametrize("lookup", [WAREHOUSE_PATH, HIVE_TABLE], ids=["by-path", "by-table"])
def test_table_symlink_is_one_node(api: Api, lookup: tuple[str, str]) -> None:
    api.ingest(spark_writes_path())
    api.ingest(spark_reads_table())
    # Canonical: the smallest (namespace, name) of the group: "file" < "hive://metastore".
    node = api.dataset(*lookup)
    assert (node["id"], node["namespace"], node["name"]) == (
        dataset_id(*WAREHOUSE_PATH),
        *WAREHOUSE_PATH,
    )
    assert node["aliases"] == [
        {"namespace": HIVE_TABLE[0], "name": HIVE_TABLE[1], "renamed": False}
    ]
    assert node["locations"] == [
        {"namespace": S3_LOCATION[0], "name": S3_LOCATION[1], "type": "LOCATION"}
    ]
    doc = api.lineage(*lookup)
    # The walk names the node as asked (docs/queries.md#conventions): the path or the table.
    orders = dataset_id(*lookup)
    writer, reader = job_id("spark", "write_orders"), job_id("spark", "build_report")
    assert doc["root"] == orders
    assert node_ids(doc) == {orders, writer, reader, dataset_id(*HIVE_REPORT)}
    assert edge_pairs(doc) == {
        (writer, orders),
        (orders, reader),
        (reader, dataset_id(*HIVE_REPORT)),
    }
    # One node in listings too, under its canonical identity: the alias is not listed apart.
    listed = [d["id"] for d in api.get("/api/v1/datasets")["datasets"]]
    assert listed == [dataset_id(*WAREHOUSE_PATH), dataset_id(*HIVE_REPORT)]


def test_canonical_is_the_smallest_identity_of_the_group(api: Api) -> None:
    lake = ("s3://lake", "orders")  # carries the facet, but "hive…" < "s3…"
    api.ingest(
        run_event(
            "COMPLETE",
            "write",
            run_id(1),
            at(9),
            outputs=[ds(*lake, symlinks=symlinks((*HIVE_TABLE, "TABLE")))],
        )
    )
    node = api.dataset(*lake)
    assert node["id"] == dataset_id(*HIVE_TABLE)
    assert [(a["namespace"], a["name"]) for a in node["aliases"]] == [lake]


@pytest.mark.parametrize("alias_first", [False, True], ids=["alias-later", "alias-first"])
def test_alias_learned_later_repoints_earlier_edges(api: Api, alias_first: bool) -> None:
    events = [spark_reads_table(), spark_writes_path()]
    api.ingest_each(*(reversed(events) if alias_first else events))
    doc = api.lineage(*HIVE_REPORT, direction="upstream")
    orders = dataset_id(*WAREHOUSE_PATH)
    reader, writer = job_id("spark", "build_report"), job_id("spark", "write_orders")
    assert node_ids(doc) == {dataset_id(*HIVE_REPORT), reader, orders, writer}
    # The reader's edge, learned under the table name, now starts at the canonical node.
    assert edge(doc, orders, reader)["first_seen"] == at(10)
    assert edge(doc, writer, orders)["first_seen"] == at(9)


def test_facets_sent_under_an_alias_show_on_the_node(api: Api) -> None:
    documentation = facet("DocumentationDatasetFacet", "1-1-0", DBT, description="Orders.")
    api.ingest(spark_writes_path())
    api.ingest(dataset_event(ds(*HIVE_TABLE, documentation=documentation), at(12)))
    node = api.dataset(*WAREHOUSE_PATH)
    assert node["facets"]["documentation"] == documentation
    assert set(node["facets"]) == {"documentation", "symlinks"}


def test_dataset_listing_pages_over_canonical_nodes(api: Api) -> None:
    api.ingest(spark_writes_path(), spark_reads_table(), daily_run(3))
    expected = sorted(dataset_id(*d) for d in (WAREHOUSE_PATH, HIVE_REPORT, ORDERS, REPORT))
    whole = api.get("/api/v1/datasets")
    assert [d["id"] for d in whole["datasets"]] == expected
    assert whole["next_cursor"] is None
    pages = walk_pages(api, "/api/v1/datasets", "datasets", limit=1)
    assert [d["id"] for page in pages for d in page] == expected
    assert all(len(page) == 1 for page in pages[:-1])


def test_location_symlink_merges_nothing(api: Api) -> None:
    api.ingest(spark_writes_path())
    api.ingest(
        run_event("COMPLETE", "copy", run_id(3), at(11), inputs=[ds(*S3_LOCATION)]),
    )
    location = api.dataset(*S3_LOCATION)
    assert location["id"] == dataset_id(*S3_LOCATION)
    assert location["aliases"] == [] and location["locations"] == []
    assert node_ids(api.lineage(*S3_LOCATION)) == {
        dataset_id(*S3_LOCATION),
        job_id("spark", "copy"),
    }
    assert job_id("spark", "copy") not in node_ids(api.lineage(*WAREHOUSE_PATH))


def test_rename_resolves_the_old_name_to_the_new(api: Api) -> None:
    old, new = ("postgres://db:5432", "public.orders_v1"), ("postgres://db:5432", "public.orders")
    api.ingest(run_event("COMPLETE", "load", run_id(1), at(9), outputs=[ds(*old)]))
    api.ingest(dataset_event(ds(*new, lifecycleStateChange=lifecycle("RENAME", old)), at(11)))
    for lookup in (old, new):
        node = api.dataset(*lookup)
        assert node["id"] == dataset_id(*new)
        assert node["aliases"] == [{"namespace": old[0], "name": old[1], "renamed": True}]
        assert node["dropped"] is False
    doc = api.lineage(*old, direction="upstream")
    assert doc["root"] == dataset_id(*new)
    assert edge_pairs(doc) == {(job_id("spark", "load"), dataset_id(*new))}


def test_drop_flags_the_dataset(api: Api) -> None:
    api.ingest(daily_run(1))
    api.ingest(dataset_event(ds(*REPORT, lifecycleStateChange=lifecycle("DROP")), at(12)))
    node = api.dataset(*REPORT)
    assert node["dropped"] is True
    assert api.dataset(*ORDERS)["dropped"] is False
    # It stays in the graph, with its edges.
    assert job_id("spark", "daily") in node_ids(api.lineage(*REPORT))
