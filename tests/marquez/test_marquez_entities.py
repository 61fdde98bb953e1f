"""Marquez's namespaces, datasets, jobs and runs served from the graph
(embrasure/marquez/{namespaces,datasets,jobs,runs}.py, docs/marquez.md), on both backends."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.testclient import TestClient

from embrasure.marquez.model import dataset_version, job_version

from graph_api import (
    HIVE_REPORT,
    HIVE_TABLE,
    ORDERS,
    REPORT,
    WAREHOUSE_PATH,
    Api,
    at,
    daily_run,
    ds,
    facet,
    job_event,
    run_event,
    run_id,
    schema,
    spark_reads_table,
    spark_writes_path,
    symlinks,
)


def enc(text: str) -> str:
    """A path segment as marquez-python and marquez-web send it (every reserved byte)."""
    return quote(text, safe="")


def get(marquez: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    r = marquez.get("/api/v1" + path, params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_namespaces_list_what_the_graph_names(api: Api, marquez: TestClient) -> None:
    api.ingest(daily_run(1, time=at(9)), daily_run(2, time=at(11)))
    body = get(marquez, "/namespaces")
    names = [n["name"] for n in body["namespaces"]]
    # Marquez's default namespace is always there (marquez-web opens on it).
    assert names == sorted({ORDERS[0], REPORT[0], "spark", "default"})
    assert get(marquez, "/namespaces/default/datasets") == {"totalCount": 0, "datasets": []}
    spark = next(n for n in body["namespaces"] if n["name"] == "spark")
    assert spark == {
        "name": "spark",
        "createdAt": "2026-11-30T09:00:00Z",
        "updatedAt": "2026-11-30T11:00:00Z",
        "ownerName": "anonymous",
        "description": None,
        "isHidden": False,
    }
    assert get(marquez, "/namespaces/spark") == spark
    assert get(marquez, "/namespaces/" + enc(ORDERS[0]))["name"] == ORDERS[0]
    error = get(marquez, "/namespaces/nowhere", 404)
    assert error == {"code": 404, "message": "Namespace 'nowhere' not found."}
    assert get(marquez, "/namespaces", limit=1, offset=1)["namespaces"][0]["name"] == names[1]


def test_a_run_in_marquez_shape(api: Api, marquez: TestClient) -> None:
    quality = facet("DataQualityMetricsInputDatasetFacet", "1-0-2", rowCount=7, columnMetrics={})
    nominal = facet("NominalTimeRunFacet", "1-0-1", nominalStartTime="2026-11-30T00:00:00Z")
    start = run_event(
        "START",
        "daily",
        run_id(1),
        "2026-11-30T09:00:00.250Z",
        inputs=[
            {
                **ds(*ORDERS, schema=schema("id", "amount")),
                "inputFacets": {"dataQualityMetrics": quality},
            }
        ],
        outputs=[ds(*REPORT)],
        run_facets={"nominalTime": nominal},
    )
    fail = run_event("FAIL", "daily", run_id(1), "2026-11-30T09:00:02Z")
    api.ingest(start, fail)
    run = get(marquez, f"/jobs/runs/{run_id(1)}")
    version = job_version("spark", "daily", [ORDERS], [REPORT])
    assert run["id"] == run_id(1)
    assert run["state"] == "FAILED"
    assert (run["createdAt"], run["startedAt"]) == ("2026-11-30T09:00:00.250Z",) * 2
    assert (run["updatedAt"], run["endedAt"]) == ("2026-11-30T09:00:02Z",) * 2
    assert run["durationMs"] == 1750
    assert run["nominalStartTime"] == "2026-11-30T00:00:00Z"
    assert run["nominalEndTime"] is None
    assert run["jobVersion"] == {"namespace": "spark", "name": "daily", "version": version}
    [read] = run["inputDatasetVersions"]
    assert read["datasetVersionId"] == {
        "namespace": ORDERS[0],
        "name": ORDERS[1],
        "version": dataset_version(*ORDERS, ""),  # no run wrote it: its first version
    }
    # Its inputFacets, as Marquez's RunDao serves them (the dataset facets are the
    # dataset version's).
    assert read["facets"] == {"dataQualityMetrics": quality}
    [wrote] = run["outputDatasetVersions"]
    assert wrote["datasetVersionId"]["version"] == dataset_version(*REPORT, run_id(1))
    assert "nominalTime" in run["facets"]
    facets = get(marquez, f"/jobs/runs/{run_id(1)}/facets", type="run")
    assert facets["runId"] == run_id(1) and "nominalTime" in facets["facets"]
    assert get(marquez, f"/jobs/runs/{run_id(9)}", 404)["code"] == 404
    assert get(marquez, f"/jobs/runs/{run_id(1)}/facets", 400, type="table")["code"] == 400


def test_jobs_with_their_runs_and_versions(api: Api, marquez: TestClient) -> None:
    api.ingest(daily_run(1, time=at(9)), daily_run(2, "FAIL", time=at(10)))
    job = get(marquez, "/namespaces/spark/jobs/daily")
    assert job["id"] == {"namespace": "spark", "name": "daily"}
    assert job["type"] == "BATCH"
    assert job["inputs"] == [{"namespace": ORDERS[0], "name": ORDERS[1]}]
    assert job["outputs"] == [{"namespace": REPORT[0], "name": REPORT[1]}]
    assert (job["createdAt"], job["updatedAt"]) == ("2026-11-30T09:00:00Z", "2026-11-30T10:00:00Z")
    assert job["latestRun"]["id"] == run_id(2)
    assert job["latestRun"]["state"] == "FAILED"
    assert [r["id"] for r in job["latestRuns"]] == [run_id(2), run_id(1)]
    assert job["currentVersion"] == job_version("spark", "daily", [ORDERS], [REPORT])
    listing = get(marquez, "/namespaces/spark/jobs")
    assert listing["totalCount"] == 1 and listing["jobs"] == [job]
    assert get(marquez, "/jobs")["jobs"] == [job]
    assert get(marquez, "/jobs", lastRunStates="COMPLETED")["jobs"] == []
    assert get(marquez, "/jobs", lastRunStates="FAILED")["jobs"] == [job]
    runs = get(marquez, "/namespaces/spark/jobs/daily/runs", limit=1, offset=1)
    assert runs["totalCount"] == 2 and [r["id"] for r in runs["runs"]] == [run_id(1)]
    versions = get(marquez, "/namespaces/spark/jobs/daily/versions")["versions"]
    assert [v["version"] for v in versions] == [job["currentVersion"]]
    assert versions[0]["latestRun"]["id"] == run_id(2)
    one = get(marquez, f"/namespaces/spark/jobs/daily/versions/{job['currentVersion']}")
    assert one == versions[0]
    assert get(marquez, "/namespaces/spark/jobs/nightly", 404) == {
        "code": 404,
        "message": "Job 'nightly' not found.",
    }


def test_a_symlinked_dataset_is_one_node_under_each_name(api: Api, marquez: TestClient) -> None:
    """docs/marquez.md#symlinks: the path and the table are one node, each answered and
    listed under its own name, with the node's data; physicalName the primary's."""
    api.ingest(spark_writes_path(), spark_reads_table())
    node = min(HIVE_TABLE, WAREHOUSE_PATH)  # Embrasure's canonical identity
    primary = WAREHOUSE_PATH  # sent with the facet naming the table
    by_path = get(
        marquez, f"/namespaces/{enc(WAREHOUSE_PATH[0])}/datasets/{enc(WAREHOUSE_PATH[1])}"
    )
    by_table = get(marquez, f"/namespaces/{enc(HIVE_TABLE[0])}/datasets/{enc(HIVE_TABLE[1])}")
    for answer, asked in ((by_path, WAREHOUSE_PATH), (by_table, HIVE_TABLE)):
        assert answer["id"] == {"namespace": asked[0], "name": asked[1]}
        assert (answer["namespace"], answer["name"]) == asked
        assert answer["physicalName"] == primary[1]
    named = ("id", "name", "namespace")
    assert {k: v for k, v in by_path.items() if k not in named} == {
        k: v for k, v in by_table.items() if k not in named
    }
    listed = get(marquez, f"/namespaces/{enc(WAREHOUSE_PATH[0])}/datasets")
    assert [d["name"] for d in listed["datasets"]] == [WAREHOUSE_PATH[1]]
    assert listed["datasets"][0] == by_path
    # The table's namespace lists the table beside its other one.
    other = get(marquez, f"/namespaces/{enc(HIVE_TABLE[0])}/datasets")
    assert [d["name"] for d in other["datasets"]] == sorted([HIVE_REPORT[1], HIVE_TABLE[1]])
    assert other["totalCount"] == 2
    versions = get(marquez, f"/namespaces/{enc(node[0])}/datasets/{enc(node[1])}/versions")
    assert versions["totalCount"] == 1
    [version] = versions["versions"]
    assert version["version"] == dataset_version(*node, run_id(1)) == by_path["currentVersion"]
    assert version["createdByRun"]["id"] == run_id(1)
    path = f"/namespaces/{enc(node[0])}/datasets/{enc(node[1])}/versions/{version['version']}"
    assert get(marquez, path) == version
    table_path = f"/namespaces/{enc(HIVE_TABLE[0])}/datasets/{enc(HIVE_TABLE[1])}/versions"
    by_table_version = get(marquez, f"{table_path}/{version['version']}")
    assert by_table_version["version"] == version["version"]
    assert (by_table_version["namespace"], by_table_version["name"]) == HIVE_TABLE


def test_a_path_whose_table_sorts_first_stays_in_its_namespace(
    api: Api, marquez: TestClient
) -> None:
    """Issue 51's case: a Spark job writes an S3 path that the Hive table also names
    (``hive://`` sorts before ``s3://``). The path is listed, found and named as itself,
    and stays the primary once a job reads the table by its own name: the table is the
    name its symlinks facet gives it (Marquez's ``dataset_symlinks.is_primary``, measured
    by bench/peers/marquez_switch.py). The table is listed in its own namespace from the
    first event on, as Marquez lists it, and answered under its name."""
    path, table = ("s3://lake", "warehouse/orders"), ("hive://metastore", "db.orders")
    write = ds(*path, symlinks=symlinks((*table, "TABLE")))
    api.ingest(run_event("COMPLETE", "load_orders", run_id(1), at(9), outputs=[write]))
    listed = get(marquez, f"/namespaces/{enc(path[0])}/datasets")
    assert listed["totalCount"] == 1
    [dataset] = listed["datasets"]
    assert dataset["id"] == {"namespace": path[0], "name": path[1]}
    assert dataset["physicalName"] == path[1]
    assert get(marquez, f"/namespaces/{enc(path[0])}/datasets/{enc(path[1])}") == dataset
    only_named = get(marquez, f"/namespaces/{enc(table[0])}/datasets")
    assert only_named["totalCount"] == 1
    assert only_named["datasets"][0]["id"] == {"namespace": table[0], "name": table[1]}
    assert only_named["datasets"][0]["physicalName"] == path[1]  # never the primary
    found = get(marquez, "/search", q="orders", filter="DATASET")["results"]
    assert sorted((r["namespace"], r["name"]) for r in found) == sorted([path, table])
    assert get(marquez, "/stats/datasets", period="DAY")[-1]["count"] == 2  # the lists' total
    # A job reads the table by its name: the path, whose facet names the table, stays
    # the primary, whatever sorts first.
    api.ingest(run_event("COMPLETE", "report", run_id(2), at(10), inputs=[ds(*table)]))
    by_table = get(marquez, f"/namespaces/{enc(table[0])}/datasets/{enc(table[1])}")
    by_path = get(marquez, f"/namespaces/{enc(path[0])}/datasets/{enc(path[1])}")
    assert by_table["physicalName"] == by_path["physicalName"] == path[1]
    assert by_path["id"] == {"namespace": path[0], "name": path[1]}
    assert get(marquez, f"/namespaces/{enc(table[0])}/datasets")["totalCount"] == 1


def test_dataset_fields_and_column_lineage(api: Api, marquez: TestClient) -> None:
    from graph_api import column_lineage, input_field

    lineage = column_lineage(
        {"total": [input_field(ORDERS, "amount", ("DIRECT", "AGGREGATION", False))]}
    )
    api.ingest(
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS, schema=schema("id", "amount"))],
            outputs=[ds(*REPORT, schema=schema("total"), columnLineage=lineage)],
        )
    )
    report = get(marquez, f"/namespaces/{enc(REPORT[0])}/datasets/{enc(REPORT[1])}")
    assert report["type"] == "DB_TABLE"
    assert report["sourceName"] == "default"  # no dataSource facet: as Marquez
    assert report["fields"] == [
        {"name": "total", "type": "string", "tags": [], "description": None}
    ]
    assert report["columnLineage"] == [
        {
            "name": "total",
            "inputFields": [
                {
                    "namespace": ORDERS[0],
                    "dataset": ORDERS[1],
                    "field": "amount",
                    "transformationDescription": "aggregated",
                    "transformationType": "AGGREGATION",
                }
            ],
            "transformationDescription": "aggregated",
            "transformationType": "AGGREGATION",
        }
    ]
    assert report["lastModifiedAt"] == "2026-11-30T09:00:00Z"
    assert report["deleted"] is False
    assert report["lastLifecycleState"] == ""  # Marquez's, when no facet said one
    orders = get(marquez, f"/namespaces/{enc(ORDERS[0])}/datasets/{enc(ORDERS[1])}")
    assert orders["columnLineage"] is None
    assert get(marquez, f"/namespaces/{enc(ORDERS[0])}/datasets/nothing", 404) == {
        "code": 404,
        "message": "Dataset 'nothing' not found.",
    }


def parent(job: str, run: str, namespace: str = "spark") -> dict[str, Any]:
    """A ParentRunFacet (1-1-0) naming ``job``'s run ``run``."""
    return facet(
        "ParentRunFacet",
        "1-1-0",
        run={"runId": run},
        job={"namespace": namespace, "name": job},
    )


def test_a_child_job_has_marquez_name(api: Api, marquez: TestClient) -> None:
    """Marquez serves a job whose run names a parent as ``{parent}.{job}`` unless the
    name already starts so (marquez/names.py): both kinds, found by those names."""
    api.ingest(
        run_event("COMPLETE", "dag", run_id(1), at(8)),
        run_event(
            "COMPLETE", "load", run_id(2), at(9), run_facets={"parent": parent("dag", run_id(1))}
        ),
        run_event(
            "COMPLETE",
            "dag.report",
            run_id(3),
            at(10),
            run_facets={"parent": parent("dag", run_id(1))},
        ),
    )
    load = get(marquez, "/namespaces/spark/jobs/dag.load")
    assert (load["name"], load["simpleName"], load["parentJobName"]) == ("dag.load", "load", "dag")
    assert load["id"] == {"namespace": "spark", "name": "dag.load"}
    assert load["latestRun"]["jobVersion"]["name"] == "dag.load"
    report = get(marquez, "/namespaces/spark/jobs/dag.report")
    assert (report["name"], report["simpleName"]) == ("dag.report", "report")
    listed = {j["name"] for j in get(marquez, "/namespaces/spark/jobs")["jobs"]}
    assert listed == {"dag", "dag.load", "dag.report"}
    assert get(marquez, "/namespaces/spark/jobs/load", 404)["code"] == 404
    runs = get(marquez, "/namespaces/spark/jobs/dag.load/runs")["runs"]
    assert [r["id"] for r in runs] == [run_id(2)]


def _pages(marquez: TestClient, path: str, key: str, size: int, **params: Any) -> Any:
    """Every page of a Marquez listing, ``size`` at a time: the names in order, and
    each page's totalCount."""
    names, totals, offset = [], set(), 0
    while True:
        page = get(marquez, path, limit=size, offset=offset, **params)
        totals.add(page["totalCount"])
        names += [item["name"] for item in page[key]]
        if len(page[key]) < size:
            return names, totals
        offset += size


def test_listings_are_ordered_and_paged_in_the_store(api: Api, marquez: TestClient) -> None:
    """Jobs by their latest run (jobs without runs last, ties by name), hidden ones out
    of the pages and the count; datasets by name, aliases and hidden ones out."""
    runs = [("b", "COMPLETE", 9), ("a", "COMPLETE", 9), ("c", "START", 11), ("d", "COMPLETE", 8)]
    runs += [("e", "ABORT", 10), ("gone", "COMPLETE", 12), ("a", "FAIL", 7)]
    events = [
        run_event(state, name, run_id(100 + n), at(hour), outputs=[ds("db", f"t_{name}")])
        for n, (name, state, hour) in enumerate(runs)
    ]
    events.append(job_event("never_ran", at(6), namespace="spark"))
    events.append(run_event("COMPLETE", "other", run_id(99), at(13), namespace="hidden-ns"))
    api.ingest(*events, spark_writes_path(), spark_reads_table())
    for hide in (
        {"type": "job", "namespace": "spark", "name": "gone"},
        {"type": "namespace", "namespace": "hidden-ns"},
        {"type": "dataset", "namespace": "db", "name": "t_d"},
    ):
        assert api.client.post("/api/v1/admin/hide", json=hide).status_code == 202
    api.project()
    order = ["c", "e", "a", "b", "d", "never_ran"]
    for size in (1, 2, 3, 100):
        names, totals = _pages(marquez, "/namespaces/spark/jobs", "jobs", size)
        assert [n for n in names if n in order] == order and totals == {len(names)}
        everywhere, totals = _pages(marquez, "/jobs", "jobs", size)
        assert everywhere == names and totals == {len(names)}
        assert len(names) == len(set(names)) == 8  # and spark_*'s write_orders, build_report
    failed, totals = _pages(marquez, "/jobs", "jobs", 1, lastRunStates=["FAILED", "ABORTED"])
    assert failed == ["e"] and totals == {8}  # a's 7:00 run failed; every job counted
    running, _ = _pages(marquez, "/jobs", "jobs", 2, lastRunStates="RUNNING")
    assert running == ["c"]
    datasets, totals = _pages(marquez, "/namespaces/db/datasets", "datasets", 2)
    assert datasets == ["t_a", "t_b", "t_c", "t_e", "t_gone"] and totals == {5}
    get(marquez, "/namespaces/hidden-ns/datasets", 404)
    # The table and the Spark path are one node; each is listed in its own namespace.
    hive = _pages(marquez, f"/namespaces/{enc(HIVE_TABLE[0])}/datasets", "datasets", 1)
    assert hive == (sorted([HIVE_REPORT[1], HIVE_TABLE[1]]), {2})
