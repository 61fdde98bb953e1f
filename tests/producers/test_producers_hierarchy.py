"""Producer run hierarchies as the read API shows them (docs/projection.md#runs: the parent run
facet links a run to its parent run and its job to the parent job; the root is kept):
an Airflow DAG run and its task runs, a Spark application and its query, dbt invocations
with their models and the models' SQL queries — real producers' events from the
OpenLineage corpus (tests/data/producers/, made sendable by producer_events.py) — and a
dbt-sized run of 20,000 models ingested with `embrasure ingest`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from click.testing import CliRunner

from embrasure.cli.main import main

import producer_events as pe
from conftest import ServerProcess

pytestmark = pytest.mark.slow


def _post(http: httpx.Client, events: list[dict[str, Any]]) -> str:
    reply = http.post(
        "/api/v1/lineage/batch",
        content=orjson.dumps(events),
        headers={"Content-Type": "application/json"},
    )
    assert reply.status_code == 202, reply.text
    receipt = reply.json()
    assert receipt["invalid_item_count"] == 0
    return str(receipt["delivery_id"])


def _wait(http: httpx.Client, delivery_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        view: dict[str, Any] = http.get(f"/api/v1/deliveries/{delivery_id}").json()
        if view["state"] != "accepted" or time.monotonic() > deadline:
            return view
        time.sleep(0.05)


def _run(http: httpx.Client, run_id: str) -> dict[str, Any]:
    reply = http.get(f"/api/v1/runs/{run_id}")
    assert reply.status_code == 200, reply.text
    run: dict[str, Any] = reply.json()
    return run


def _children(http: httpx.Client, run_id: str, **params: Any) -> dict[str, Any]:
    reply = http.get(f"/api/v1/runs/{run_id}/children", params=params)
    assert reply.status_code == 200, reply.text
    page: dict[str, Any] = reply.json()
    return page


def _ref(run_id: str, namespace: str, name: str) -> dict[str, Any]:
    return {"runId": run_id, "job": {"namespace": namespace, "name": name}}


def _parent_job(http: httpx.Client, namespace: str, name: str) -> Any:
    (job,) = http.get("/api/v1/jobs", params={"namespace": namespace, "name": name}).json()["jobs"]
    return job["parent_job"]


def test_airflow_spark_and_dbt_hierarchies(server: ServerProcess) -> None:
    producers = {
        "airflow": pe.airflow_dag(),
        "spark": pe.spark_application(),
        "dbt-run": pe.dbt_run(),
        "dbt-test": pe.dbt_singular_tests(),
        "flink": pe.flink_streaming(),
    }
    with httpx.Client(base_url=server.url, timeout=60) as http:
        last = ""
        for events in producers.values():
            last = _post(http, events)
        assert _wait(http, last)["state"] == "projected"
        for delivery in http.get("/api/v1/deliveries").json()["deliveries"]:
            assert delivery["state"] == "projected", delivery

        # Airflow: the DAG run, its 6 tasks; each task names the DAG run as parent and root.
        def airflow(name: str) -> str:
            return pe.run_id("airflow", pe.AIRFLOW_NS, name)

        dag_run = airflow(pe.AIRFLOW_DAG)
        tasks = sorted({e["job"]["name"] for e in producers["airflow"]} - {pe.AIRFLOW_DAG})
        assert len(tasks) == 6
        dag = _run(http, dag_run)
        assert (dag["state"], dag["parent"]) == ("COMPLETE", None)
        assert dag["children"] == sorted(airflow(t) for t in tasks)
        dag_ref = _ref(dag_run, pe.AIRFLOW_NS, pe.AIRFLOW_DAG)
        for task in tasks:
            run = _run(http, airflow(task))
            assert run["parent"] == {**dag_ref, "root": dag_ref}, task
            assert run["children"] == []
            # The fixture never completes this task (its second COMPLETE names another).
            expected = "START" if task == "athena_dag.athena_select_from_other_db" else "COMPLETE"
            assert run["state"] == expected, task
            assert _parent_job(http, pe.AIRFLOW_NS, task) == dag_ref["job"]

        # The same children, a page at a time, in the order they started.
        started = sorted(tasks, key=lambda t: _run(http, airflow(t))["started_at"])
        first = _children(http, dag_run, limit=4)
        assert [r["job"]["name"] for r in first["runs"]] == started[:4]
        rest = _children(http, dag_run, limit=4, cursor=first["next_cursor"])
        assert [r["job"]["name"] for r in rest["runs"]] == started[4:]
        assert rest["next_cursor"] is None
        assert rest["runs"][0] == _run(http, rest["runs"][0]["runId"])  # full run views

        # Spark: the application under the scheduler's task run that started it; the
        # query under the application.
        app_run = pe.run_id("spark", pe.SPARK_NS, pe.SPARK_APP)
        query_run = pe.run_id("spark", pe.SPARK_NS, pe.SPARK_QUERY)
        app = _run(http, app_run)
        assert app["state"] == "COMPLETE"
        assert app["parent"] == _ref(pe.SCHEDULER_RUN, "parent-namespace", "parent-job")
        assert app["children"] == [query_run]
        query = _run(http, query_run)
        assert query["state"] == "COMPLETE"
        assert query["parent"] == _ref(app_run, pe.SPARK_NS, pe.SPARK_APP)
        assert query["children"] == []
        assert _parent_job(http, pe.SPARK_NS, pe.SPARK_QUERY) == {
            "namespace": pe.SPARK_NS,
            "name": pe.SPARK_APP,
        }
        # The scheduler's run sent no event: its id is a reference, not a run; its
        # children are known all the same.
        assert http.get(f"/api/v1/runs/{pe.SCHEDULER_RUN}").status_code == 404
        children = _children(http, pe.SCHEDULER_RUN)
        assert [r["runId"] for r in children["runs"]] == [app_run]
        unknown = http.get("/api/v1/runs/01943c00-0000-7000-8000-00000000ffff/children")
        assert unknown.status_code == 404
        forged = http.get(f"/api/v1/runs/{app_run}/children", params={"cursor": "5"})  # not a pair
        assert forged.status_code == 400

        # Flink: a streaming run has no terminal event; it is RUNNING, and its edges are
        # in the graph from its first event (docs/projection.md#runs).
        stream = _run(http, pe.run_id("flink", pe.FLINK_NS, pe.FLINK_JOB))
        assert (stream["state"], stream["ended_at"], stream["parent"]) == ("RUNNING", None, None)
        assert stream["facets"]["checkpoints"]["completed"] == 1  # filled from any-number
        (flink_job,) = http.get(
            "/api/v1/jobs", params={"namespace": pe.FLINK_NS, "name": pe.FLINK_JOB}
        ).json()["jobs"]
        assert flink_job["facets"]["jobType"]["processingType"] == "STREAMING"
        # streaming, not a service (docs/projection.md#entities-and-identity)
        assert flink_job["type"] == "job"
        graph = http.get(
            "/api/v1/lineage",
            params={"type": "job", "namespace": pe.FLINK_NS, "name": pe.FLINK_JOB},
        ).json()
        kafka = "dataset:kafka://kafka-cluster-prod:9092:io.openlineage.flink.kafka."
        job_id = f"job:{pe.FLINK_NS}:{pe.FLINK_JOB}"
        assert sorted((e["source"], e["target"], e["last_state"]) for e in graph["edges"]) == [
            (f"{kafka}input1", job_id, "RUNNING"),
            (f"{kafka}input2", job_id, "RUNNING"),
            (job_id, f"{kafka}output", "RUNNING"),
        ]

        # dbt run: the invocation → 5 models → 6 SQL queries each (no root in these events).
        def dbt(key: str, name: str) -> str:
            return pe.run_id(key, pe.DBT_NS, name)

        invocation = dbt("dbt-run", pe.DBT_RUN_JOB)
        models = sorted(
            e["job"]["name"]
            for e in producers["dbt-run"]
            if e["eventType"] == "START" and e["job"]["name"].count(".") == 2
        )
        assert len(models) == 5
        top = _run(http, invocation)
        assert (top["state"], top["parent"]) == ("COMPLETE", None)
        assert top["children"] == sorted(dbt("dbt-run", m) for m in models)
        for model in models:
            run = _run(http, dbt("dbt-run", model))
            assert run["parent"] == _ref(invocation, pe.DBT_NS, pe.DBT_RUN_JOB), model
            queries = [f"{model}.sql.{n}" for n in range(1, 7)]
            assert run["children"] == sorted(dbt("dbt-run", q) for q in queries)
            assert run["state"] == "COMPLETE"
            for q in queries[:1]:
                sql = _run(http, dbt("dbt-run", q))
                assert sql["parent"] == _ref(dbt("dbt-run", model), pe.DBT_NS, model)
                assert (sql["state"], sql["children"]) == ("COMPLETE", [])

        # dbt test: every level names the invocation as root.
        root = _ref(dbt("dbt-test", pe.DBT_RUN_JOB), pe.DBT_NS, pe.DBT_RUN_JOB)
        test = "test.dbt_test_project.assert_no_future_dates"
        test_run = _run(http, dbt("dbt-test", test))
        assert test_run["parent"] == {**root, "root": root}
        assert test_run["children"] == sorted(dbt("dbt-test", f"{test}.sql.{n}") for n in (1, 2))
        sql = _run(http, dbt("dbt-test", f"{test}.sql.1"))
        assert sql["parent"] == {**_ref(dbt("dbt-test", test), pe.DBT_NS, test), "root": root}


MODELS = 10_000  # 20,002 events: dbt's size for a large project (START + COMPLETE a model)


def test_a_dbt_sized_run_ingested_in_batches(db_url: str, tmp_path: Path) -> None:
    events = pe.dbt_sized_run(MODELS)
    path = tmp_path / "dbt-ol.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    server = ServerProcess(db_url, log_dir=tmp_path).start()
    try:
        started = time.monotonic()
        result = CliRunner().invoke(main, ["ingest", str(path), "--url", server.url, "--json"])
        took = time.monotonic() - started
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert (summary["events"], summary["accepted"], summary["invalid"]) == (
            len(events),
        ) * 2 + (0,)
        assert len(summary["deliveries"]) == -(-len(events) // 500)  # batches of 500
        assert summary["projection"] == {"projected": len(events), "quarantined": 0, "pending": 0}
        # Printed for the record (pytest -s); bench/producers.py measures it properly.
        print(f"{len(events)} events ingested and projected in {took:.1f} s")

        with httpx.Client(base_url=server.url, timeout=60) as http:
            invocation = pe.run_id("dbt-big", pe.DBT_NS, pe.BIG_INVOCATION)
            top = _run(http, invocation)
            assert (top["state"], top["parent"]) == ("COMPLETE", None)
            names = [f"model.{pe.BIG_PROJECT}.m{i:05d}" for i in range(MODELS)]
            children = sorted(pe.run_id("dbt-big", pe.DBT_NS, n) for n in names)
            assert (top["children"], top["child_count"]) == (children, MODELS)
            # A listing of the invocation's runs carries the first 100 ids and the count.
            (listed_top,) = http.get(
                "/api/v1/runs", params={"namespace": pe.DBT_NS, "name": pe.BIG_INVOCATION}
            ).json()["runs"]
            assert listed_top["children"] == children[:100]
            assert listed_top["child_count"] == MODELS
            ref = _ref(invocation, pe.DBT_NS, pe.BIG_INVOCATION)
            for name in (names[0], names[-1]):
                model = _run(http, pe.run_id("dbt-big", pe.DBT_NS, name))
                assert model["parent"] == {**ref, "root": ref}
                assert (model["state"], model["children"]) == ("COMPLETE", [])
                assert _parent_job(http, pe.DBT_NS, name) == ref["job"]
            # The web UI pages through them: the first two pages of 25, in start order.
            first = _children(http, invocation, limit=25)
            second = _children(http, invocation, limit=25, cursor=first["next_cursor"])
            listed = [r["job"]["name"] for r in first["runs"] + second["runs"]]
            assert listed == names[:50]
            # One node per model job and per table: the graph holds the whole project.
            namespaces = http.get("/api/v1/namespaces").json()["namespaces"]
            assert namespaces == [
                {"name": pe.DBT_NS, "datasets": 0, "jobs": MODELS + 1},
                {"name": "postgres://postgres:5432", "datasets": MODELS + 50, "jobs": 0},
            ]
    finally:
        server.stop()


def test_a_real_dbt_ol_capture(server: ServerProcess, tmp_path: Path) -> None:
    """dbt-ol's own events (tests/data/producers/dbt_ol_duckdb_capture.jsonl: a seed
    invocation, then a run invocation of two models), through `embrasure ingest`."""
    events = pe.dbt_ol_capture()
    path = tmp_path / "dbt-ol.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    result = CliRunner().invoke(main, ["ingest", str(path), "--url", server.url, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["accepted"], summary["invalid"], summary["projection"]["projected"]) == (
        8,
        0,
        8,
    )

    runs = {(e["job"]["name"], e["eventType"]): e["run"]["runId"] for e in events}
    seed_invocation = events[0]["run"]["runId"]
    invocation = runs[("dbt-run-shop", "COMPLETE")]
    assert invocation != seed_invocation  # one invocation per dbt-ol command
    models = ["shop.main.shop.stg_orders", "shop.main.shop.orders_daily"]
    model_runs = [runs[(m, "COMPLETE")] for m in models]
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert _run(http, seed_invocation)["children"] == []  # dbt-ol sends no seed nodes
        top = _run(http, invocation)
        assert (top["state"], top["parent"]) == ("COMPLETE", None)
        assert top["children"] == sorted(model_runs)
        ref = _ref(invocation, pe.DBT_OL_NS, "dbt-run-shop")
        for model, run_id in zip(models, model_runs, strict=True):
            run = _run(http, run_id)
            assert (run["state"], run["parent"]) == ("COMPLETE", {**ref, "root": ref}), model
            assert _parent_job(http, pe.DBT_OL_NS, model) == ref["job"]
        listed = _children(http, invocation)["runs"]
        assert [r["job"]["name"] for r in listed] == models  # in the order dbt ran them

        # Lineage: seed → (not named by dbt-ol) stg_orders → orders_daily.
        daily = _run(http, model_runs[1])
        used = {k: [(d["namespace"], d["name"]) for d in daily[k]] for k in ("inputs", "outputs")}
        assert used["inputs"] == [(pe.DBT_OL_DB, "shop.main.stg_orders")]
        assert used["outputs"] == [(pe.DBT_OL_DB, "shop.main.orders_daily")]
        columns = http.get(
            "/api/v1/column-lineage",
            params={
                "namespace": pe.DBT_OL_DB,
                "name": "shop.main.orders_daily",
                "field": "revenue",
            },
        ).json()
        assert [(e["source"], e["kind"], e["class"]) for e in columns["edges"]] == [
            (f"field:{pe.DBT_OL_DB}:shop.main.stg_orders:amount", "mapping", "expression")
        ]
        # stg_orders' columnLineage names the seed, which its event does not list among its
        # inputs: ignored, with a warning on the delivery
        # (docs/projection.md#column-lineage), not guessed.
        warned = [
            w
            for d in summary["deliveries"]
            for i in http.get(f"/api/v1/deliveries/{d}").json()["items"]
            for w in i["warnings"]
        ]
        assert (
            warned
            == [
                f"columnLineage of {pe.DBT_OL_DB}:shop.main.stg_orders: input dataset "
                f"{pe.DBT_OL_DB}:shop.main.raw_orders is not among the event's inputs; "
                "ignored for 4 field(s)"
            ]
            * 2
        )


def test_a_real_airflow_provider_capture(server: ServerProcess) -> None:
    """apache-airflow-providers-openlineage's own events (airflow_provider_capture.jsonl):
    the tasks name the DAG run as parent and root; the DAG run lists them."""
    events = pe.airflow_provider_capture()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        last = ""
        for event in events:  # one request each, as the provider sends them
            reply = http.post(
                "/api/v1/lineage",
                content=orjson.dumps(event),
                headers={"Content-Type": "application/json"},
            )
            assert reply.status_code == 202, reply.text
            last = reply.json()["delivery_id"]
        assert _wait(http, last)["state"] == "projected"

        dag_run = events[-1]["run"]["runId"]
        assert events[-1]["job"]["name"] == "orders_daily"
        tasks = {e["job"]["name"]: e["run"]["runId"] for e in events[:-1]}
        assert list(tasks) == ["orders_daily.extract", "orders_daily.load"]
        dag = _run(http, dag_run)
        assert (dag["state"], dag["parent"]) == ("COMPLETE", None)
        assert dag["children"] == sorted(tasks.values())
        assert "airflowDagRun" in dag["facets"]
        ref = _ref(dag_run, pe.AIRFLOW_PROVIDER_NS, "orders_daily")
        for name, run_id in tasks.items():
            task = _run(http, run_id)
            assert (task["state"], task["parent"]) == ("COMPLETE", {**ref, "root": ref}), name
            assert _parent_job(http, pe.AIRFLOW_PROVIDER_NS, name) == ref["job"]
        listed = _children(http, dag_run)["runs"]
        assert [r["job"]["name"] for r in listed] == list(tasks)  # in the order they ran
        # The tasks' inlets and outlets make the DAG's lineage: extract writes what load reads.
        lineage = http.get(
            "/api/v1/lineage",
            params={
                "namespace": "s3://lake",
                "name": "raw/orders",
                "direction": "both",
                "depth": "1",
            },
        ).json()
        assert sorted((e["source"], e["target"]) for e in lineage["edges"]) == [
            ("dataset:s3://lake:raw/orders", f"job:{pe.AIRFLOW_PROVIDER_NS}:orders_daily.load"),
            (f"job:{pe.AIRFLOW_PROVIDER_NS}:orders_daily.extract", "dataset:s3://lake:raw/orders"),
        ]
