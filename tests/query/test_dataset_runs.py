"""What each run did (docs/queries.md#what-each-run-did), on both backends: the facets a
run sent about each dataset it used, a dataset's runs with statistics, assertions and
schema changes, and the quality mark of lineage and impact. Real producers' shapes come
from the OpenLineage corpus (tests/data/producers/)."""

from __future__ import annotations

from typing import Any

import pytest

import producer_events as pe
from graph_api import (
    ORDERS,
    REPORT,
    Api,
    at,
    dataset_id,
    ds,
    facet,
    run_event,
    run_id,
    symlinks,
    walk_pages,
)

RUNS = "/api/v1/datasets/runs"


def runs_of(api: Api, dataset: tuple[str, str], **params: Any) -> list[dict[str, Any]]:
    doc = api.get(RUNS, namespace=dataset[0], name=dataset[1], **params)
    listed: list[dict[str, Any]] = doc["runs"]
    return listed


def stats(**fields: int) -> dict[str, Any]:
    return facet("OutputStatisticsOutputDatasetFacet", "1-0-2", **fields)


def typed_schema(*fields: tuple[str, str]) -> dict[str, Any]:
    return facet("SchemaDatasetFacet", "1-2-0", fields=[{"name": n, "type": t} for n, t in fields])


def assertions(*results: tuple[str, bool, str | None]) -> dict[str, Any]:
    listed = [
        {"assertion": a, "success": ok, **({"column": c} if c else {})} for a, ok, c in results
    ]
    return facet("DataQualityAssertionsDatasetFacet", "1-1-0", assertions=listed)


def write(n: int, time: str, dataset: tuple[str, str] = REPORT, **extra: Any) -> dict[str, Any]:
    """spark/daily's run ``n`` writing ``dataset`` with ``extra`` (outputFacets, facets)."""
    output = {**ds(*dataset, **extra.pop("facets", {})), **extra}
    return run_event("COMPLETE", "daily", run_id(n), time, outputs=[output])


def check(n: int, time: str, dataset: tuple[str, str], facet_value: dict[str, Any]) -> Any:
    """A data-quality run (a dbt test, a Great Expectations checkpoint) reading ``dataset``
    with its assertions as an input facet, where OpenLineage puts them."""
    checked = {**ds(*dataset), "inputFacets": {"dataQualityAssertions": facet_value}}
    return run_event("COMPLETE", "checks", run_id(n), time, inputs=[checked])


# == real producers' shapes ===========================================================


def test_spark_statistics_are_served_as_sent(api: Api) -> None:
    (event,) = pe.spark_statistics()
    api.ingest(event)
    run = api.run(event["run"]["runId"])
    (read,), (wrote,) = run["inputs"], run["outputs"]
    sent_in, sent_out = event["inputs"][0], event["outputs"][0]
    assert read["inputFacets"] == sent_in["inputFacets"]  # dataQualityMetrics, column metrics
    assert wrote["outputFacets"] == sent_out["outputFacets"]
    (entry,) = runs_of(api, ("ons", "output"))
    assert (entry["role"], entry["runId"]) == ("output", event["run"]["runId"])
    assert entry["statistics"] == {"rowCount": 10, "size": 20, "fileCount": 5}
    assert entry["outputFacets"] == sent_out["outputFacets"]
    # A read's statistics from Spark's dataQualityMetrics input facet (bytes: the size).
    (entry,) = runs_of(api, ("ins", "input"))
    assert (entry["role"], entry["statistics"]) == (
        "input",
        {"rowCount": 10, "size": 20, "fileCount": 5},
    )
    assert entry["assertions"] == {"passed": 0, "failed": 0, "failures": []}


def test_assertions_under_input_facets_and_output_statistics(api: Api) -> None:
    (event,) = pe.python_client_full()
    api.ingest(event)
    dataset = ("my-datasource-namespace", "instance.schema.table")
    read, wrote = sorted(runs_of(api, dataset), key=lambda r: r["role"])
    assert read["assertions"] == {"passed": 2, "failed": 0, "failures": []}
    assert (
        read["inputFacets"]["dataQualityAssertions"]
        == (event["inputs"][0]["inputFacets"]["dataQualityAssertions"])
    )
    assert wrote["statistics"] == {"rowCount": 2000, "size": 2097152}
    assert "quality" not in _dataset_node(api.lineage(*dataset), dataset)


def test_dbt_tests_flag_the_failed_check_with_its_column(api: Api) -> None:
    events = pe.dbt_tests()
    api.ingest(*events)
    checks = runs_of(api, pe.DBT_CUSTOMERS, role="input")
    assert [r["job"]["name"].split(".")[2] for r in checks] == [
        "unique_customers_customer_id",
        "relationships_orders_customer_id__customer_id__ref_customers_",  # on its START
        "not_null_customers_customer_id",
        "accepted_values_customers_first_name__Jane",
    ]  # newest first
    failed = checks[-1]
    assert failed["state"] == "FAIL"
    assert failed["assertions"] == {
        "passed": 0,
        "failed": 1,
        "failures": [{"assertion": "accepted_values", "column": "first_name"}],
    }
    # dbt sends the assertions among the dataset facets, as it sent them.
    assert failed["facets"]["dataQualityAssertions"]["assertions"][0]["success"] is False
    assert checks[0]["assertions"] == {"passed": 1, "failed": 0, "failures": []}
    # A later test of the same table passing does not hide the failed one: each check's
    # latest result counts.
    customers = _dataset_node(api.lineage(*pe.DBT_CUSTOMERS), pe.DBT_CUSTOMERS)
    assert customers["quality"] == "failed"
    orders = ("postgres://postgres:5432", "postgres.public.orders")
    assert "quality" not in _dataset_node(api.lineage(*orders), orders)


def _dataset_node(doc: dict[str, Any], dataset: tuple[str, str]) -> dict[str, Any]:
    (node,) = [n for n in doc["nodes"] if n["id"] == dataset_id(*dataset)]
    return dict(node)


# == per run: the latest value per facet name over the run's events =================


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
def test_a_run_keeps_the_latest_value_per_facet_and_honours_deleted(
    api: Api, reverse: bool
) -> None:
    first = write(1, at(9), outputFacets={"outputStatistics": stats(rowCount=1)})
    second = write(
        1,
        at(9, 5),
        outputFacets={"outputStatistics": stats(rowCount=5, size=50)},
        facets={"schema": typed_schema(("id", "long"))},
    )
    events = [second, first] if reverse else [first, second]
    api.ingest_each(*events)
    (wrote,) = api.run(run_id(1))["outputs"]
    assert wrote["outputFacets"]["outputStatistics"]["rowCount"] == 5
    assert wrote["facets"]["schema"]["fields"] == [{"name": "id", "type": "long"}]
    assert runs_of(api, REPORT)[0]["statistics"] == {"rowCount": 5, "size": 50}
    # A later event of the run takes its statistics and the schema it sent back.
    gone = {"_deleted": True}
    api.ingest(
        write(1, at(9, 10), outputFacets={"outputStatistics": gone}, facets={"schema": gone})
    )
    (wrote,) = api.run(run_id(1))["outputs"]
    assert wrote["outputFacets"] == {} and "schema" not in wrote["facets"]
    assert runs_of(api, REPORT)[0]["statistics"] == {}
    # The dataset's own current facets follow the dataset facet rule, as before.
    assert "schema" not in api.dataset(*REPORT)["facets"]


def test_what_a_run_sent_is_its_own_across_shapes_runs_and_roles(api: Api) -> None:
    """The dataset facets a run sent are read from its events' shapes, which other runs
    share (docs/projection.md#what-each-run-did): each run sees only what its own events
    sent, each role its own, and the latest of its events decides whichever shape sent it."""
    old, new = typed_schema(("id", "long")), typed_schema(("id", "long"), ("v", "text"))
    merge = "merge"  # reads the report as it was and writes it widened
    api.ingest(
        run_event("START", merge, run_id(1), at(9), outputs=[ds(*REPORT, schema=new)]),
        run_event(
            "COMPLETE",
            merge,
            run_id(1),
            at(9, 5),
            inputs=[ds(*REPORT, schema=old)],
            outputs=[ds(*REPORT, schema=old)],
        ),
        # Run 2's events are run 1's two shapes, the other way round in time.
        run_event(
            "START",
            merge,
            run_id(2),
            at(10),
            inputs=[ds(*REPORT, schema=old)],
            outputs=[ds(*REPORT, schema=old)],
        ),
        run_event("COMPLETE", merge, run_id(2), at(10, 5), outputs=[ds(*REPORT, schema=new)]),
    )
    for n, wrote in ((1, old), (2, new)):
        run = api.run(run_id(n))
        assert [i["facets"] for i in run["inputs"]] == [{"schema": old}]
        assert [o["facets"] for o in run["outputs"]] == [{"schema": wrote}], n
    assert [(r["runId"], r["role"]) for r in runs_of(api, REPORT, role="output")] == [
        (run_id(2), "output"),
        (run_id(1), "output"),
    ]


def test_a_run_named_by_an_alias_is_served_under_the_canonical_identity(api: Api) -> None:
    path, table = ("file", "/warehouse/report"), ("hive://metastore", "db.report")
    api.ingest(
        write(1, at(9), path, outputFacets={"outputStatistics": stats(rowCount=3)}),
        write(2, at(10), table, facets={"symlinks": symlinks((*path, "TABLE"))}),
    )
    canonical = min(path, table)
    for n in (1, 2):
        (wrote,) = api.run(run_id(n))["outputs"]
        assert (wrote["namespace"], wrote["name"]) == canonical
    by_path = runs_of(api, path)
    assert by_path == runs_of(api, table)
    assert [(r["runId"], r["statistics"]) for r in by_path] == [
        (run_id(2), {}),
        (run_id(1), {"rowCount": 3}),
    ]


# == a dataset's runs: order, paging, roles =========================================


def test_runs_are_listed_newest_first_by_the_runs_latest_event(api: Api) -> None:
    api.ingest(
        run_event("START", "daily", run_id(1), at(9), outputs=[ds(*REPORT)]),
        run_event("START", "daily", run_id(2), at(10), outputs=[ds(*REPORT)]),
    )
    assert [r["runId"] for r in runs_of(api, REPORT)] == [run_id(2), run_id(1)]
    # Run 1 ends later, in an event that does not name the report: it moves up.
    api.ingest(run_event("COMPLETE", "daily", run_id(1), at(11)))
    listed = runs_of(api, REPORT)
    assert [(r["runId"], r["state"]) for r in listed] == [
        (run_id(1), "COMPLETE"),
        (run_id(2), "START"),
    ]
    assert listed[0]["ended_at"] == at(11)


def test_pages_cover_every_use_once_and_role_filters(api: Api) -> None:
    events = [write(n, at(8 + n)) for n in range(1, 6)]
    events += [
        run_event("COMPLETE", "reader", run_id(10 + n), at(8 + n, 30), inputs=[ds(*REPORT)])
        for n in range(1, 4)
    ]
    # One run reads and writes the report: listed once per role.
    events.append(
        run_event(
            "COMPLETE", "upsert", run_id(20), at(15), inputs=[ds(*REPORT)], outputs=[ds(*REPORT)]
        )
    )
    api.ingest(*events)
    whole = runs_of(api, REPORT, limit=100)
    assert len(whole) == 10
    assert [(r["runId"], r["role"]) for r in whole[:2]] == [
        (run_id(20), "output"),
        (run_id(20), "input"),
    ]
    pages = walk_pages(api, RUNS, "runs", namespace=REPORT[0], name=REPORT[1], limit=3)
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert [r for page in pages for r in page] == whole
    writes = [
        r
        for page in walk_pages(
            api, RUNS, "runs", namespace=REPORT[0], name=REPORT[1], role="output", limit=2
        )
        for r in page
    ]
    assert [r["runId"] for r in writes] == [run_id(20), *(run_id(n) for n in range(5, 0, -1))]
    assert {r["role"] for r in runs_of(api, REPORT, role="input")} == {"input"}


def test_unknown_dataset_is_404_and_a_bad_role_400(api: Api) -> None:
    api.ingest(write(1, at(9)))
    api.problem("GET", RUNS, 404, namespace="nowhere", name="nothing")
    api.problem("GET", RUNS, 400, namespace=REPORT[0], name=REPORT[1], role="both")
    api.problem("GET", RUNS, 400, namespace=REPORT[0], name=REPORT[1], cursor="[1]")


# == schema changes between writes ===================================================


def test_schema_change_against_the_previous_write_with_a_schema(api: Api) -> None:
    v1 = typed_schema(("id", "long"), ("amount", "string"), ("note", "string"))
    v2 = typed_schema(("id", "long"), ("amount", "decimal(10,2)"), ("currency", "string"))
    api.ingest(
        write(1, at(9), facets={"schema": v1}),
        write(2, at(10), facets={"schema": v2}),
        write(3, at(11)),  # no schema sent: nothing to compare
        write(4, at(12), facets={"schema": v2}),  # the same as write 2's: no change
        run_event("COMPLETE", "reader", run_id(9), at(13), inputs=[ds(*REPORT, schema=v1)]),
    )
    listed = {r["runId"]: r for r in runs_of(api, REPORT)}
    assert listed[run_id(2)]["schema_change"] == {
        "added": [{"name": "currency", "type": "string"}],
        "removed": [{"name": "note", "type": "string"}],
        "changed": [{"name": "amount", "from": "string", "to": "decimal(10,2)"}],
    }
    for n in (1, 3, 4, 9):  # the first write, no schema, no change, a read
        assert "schema_change" not in listed[run_id(n)], n
    # Paged one at a time, a write still finds the previous schema beyond its page.
    pages = walk_pages(
        api, RUNS, "runs", namespace=REPORT[0], name=REPORT[1], role="output", limit=1
    )
    assert [p[0]["runId"] for p in pages] == [run_id(n) for n in (4, 3, 2, 1)]
    assert "schema_change" not in pages[0][0]
    assert pages[2][0]["schema_change"] == listed[run_id(2)]["schema_change"]


# == the quality mark ===============================================================


def test_lineage_and_impact_mark_a_dataset_whose_check_failed(api: Api) -> None:
    api.ingest(
        run_event(
            "COMPLETE", "daily", run_id(1), at(9), inputs=[ds(*ORDERS)], outputs=[ds(*REPORT)]
        ),
        check(2, at(10), REPORT, assertions(("not_null", False, "amount"), ("unique", True, "id"))),
    )
    lineage = api.lineage(*ORDERS, direction="downstream")
    assert _dataset_node(lineage, REPORT)["quality"] == "failed"
    assert "quality" not in _dataset_node(lineage, ORDERS)
    impact = api.get("/api/v1/impact", namespace=ORDERS[0], name=ORDERS[1])
    marked = {i["node"]["id"]: i["node"].get("quality") for i in impact["items"]}
    assert marked[dataset_id(*REPORT)] == "failed"
    # asOf answers carry no mark: the checks kept are the current ones.
    as_of = api.lineage(*ORDERS, direction="downstream", asOf=at(23))
    assert "quality" not in _dataset_node(as_of, REPORT)
    # The same check passing later clears the mark; one that last failed keeps it.
    api.ingest(check(3, at(11), REPORT, assertions(("not_null", True, "amount"))))
    assert "quality" not in _dataset_node(api.lineage(*REPORT), REPORT)
    api.ingest(check(4, at(12), REPORT, assertions(("unique", False, "id"))))
    assert _dataset_node(api.lineage(*REPORT), REPORT)["quality"] == "failed"
    # A check result that arrives late but is older changes nothing.
    api.ingest(check(5, at(8), REPORT, assertions(("unique", True, "id"))))
    assert _dataset_node(api.lineage(*REPORT), REPORT)["quality"] == "failed"
