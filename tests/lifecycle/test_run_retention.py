"""--retain-runs (docs/operations.md#retention-and-the-archive), on both backends: runs
before the horizon leave the graph with their per-run rows, the lineage stays, each
job's latest run stays, asOf before the horizon is a 422, and a reprojection keeps them
out."""

from __future__ import annotations

import contextlib
import datetime
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.lifecycle.retention import RetentionLoop
from embrasure.lifecycle.run_retention import trim_runs
from embrasure.projector.worker import Projector, reproject
from embrasure.settings import Settings
from embrasure.store import open_store
from embrasure.store.rows import (
    EventRow,
    FacetRow,
    FacetSetRow,
    FacetValueRow,
    IoSetRow,
    RunIoRow,
    RunRow,
    ShapeRow,
)

from conftest import ServerProcess
from event_strategies import deliveries
from graph_api import (
    REPORT,
    Api,
    at,
    daily_run,
    dataset_id,
    ds,
    facet,
    run_event,
    run_id,
    schema,
)
from http_client import HTTP

HORIZON = "2026-11-30T11:00:00.000000000Z"  # an eventTime key (projector/times.py)
DAILY = "daily"


def runs(api: Api) -> list[str]:
    """Every run id in the served graph."""
    with api.store.reader() as reader:
        return sorted(r.run_id for r in reader.rows(RunRow))


def history(api: Api) -> None:
    """spark/daily runs at 09:00, 10:00 and 12:00 (reading orders, writing the report);
    spark/weekly's only run at 08:00."""
    nominal = facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(8))
    for n, hour in ((1, 9), (2, 10), (3, 12)):
        api.ingest(
            run_event("START", DAILY, run_id(n), at(hour), run_facets={"nominalTime": nominal}),
            run_event(
                "COMPLETE",
                DAILY,
                run_id(n),
                at(hour, 30),
                inputs=[ds("postgres://db:5432", "public.orders")],
                # What the run did: per-run facets, which leave with the run.
                outputs=[
                    {
                        **ds(*REPORT, schema=schema("id")),
                        "outputFacets": {"outputStatistics": stats(n)},
                    }
                ],
            ),
        )
    api.ingest(run_event("COMPLETE", "weekly", run_id(9), at(8), outputs=[ds("s3://lake", "w")]))
    # spark/monthly writes a staging table only in its first run, then the report: that
    # staging edge is named by a removed run alone.
    api.ingest(
        run_event("COMPLETE", "monthly", run_id(5), at(8), outputs=[ds(*STAGING)]),
        run_event(
            "FAIL", "monthly", run_id(6), at(9), inputs=[ds(*STAGING)], outputs=[ds(*REPORT)]
        ),
    )


def stats(rows: int) -> dict[str, Any]:
    return facet("OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=rows)


STAGING = ("postgres://db:5432", "staging.report")
KEPT = sorted([run_id(3), run_id(6), run_id(9)])


def lineage(api: Api, **params: str) -> dict[str, Any]:
    return api.lineage(*REPORT, depth="3", **params)


def test_runs_before_the_horizon_go_their_lineage_stays(api: Api) -> None:
    history(api)
    before = lineage(api)
    report = trim_runs(api.store, HORIZON)
    assert report.runs == 3
    # daily's 09:00 and 10:00 runs and monthly's first went; the latest runs stay.
    assert runs(api) == KEPT
    after = lineage(api)
    assert after["nodes"] == before["nodes"]
    assert [(e["source"], e["target"], e["run_count"]) for e in after["edges"]] == [
        (e["source"], e["target"], e["run_count"]) for e in before["edges"]
    ]
    api.problem("GET", f"/api/v1/runs/{run_id(1)}", 404)
    assert run_id(3) in str(api.run(run_id(3)))
    with api.store.reader() as reader:
        events = {e.run_id for e in reader.rows(EventRow)}
        run_io = {r.run_id for r in reader.rows(RunIoRow)}
        facets = [f.entity for f in reader.rows(FacetRow)]
    assert events == run_io == set(KEPT)
    assert not [e for e in facets if run_id(1) in e or run_id(2) in e]
    # The run's own facets ('run<SEP>id') and its output's own facets, under it; the
    # dataset facets it sent are its events' shapes' (docs/projection.md#what-each-run-did).
    kept = {tuple(e.split("\x1f")[:3]) for e in facets if run_id(3) in e}
    own = ("run", run_id(3))
    assert kept == {own, (*own, "output")}, "the kept run keeps them"
    [output] = api.run(run_id(3))["outputs"]
    assert output["facets"] == {"schema": schema("id")}
    assert output["outputFacets"] == {"outputStatistics": stats(3)}
    listed = api.get("/api/v1/datasets/runs", namespace=REPORT[0], name=REPORT[1])["runs"]
    assert [(r["runId"], r["statistics"]) for r in listed] == [
        (run_id(3), {"rowCount": 3}),
        (run_id(6), {}),
    ]


def test_a_late_event_between_a_steps_snapshot_and_its_write_keeps_its_run(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step reads what it removes in a snapshot, then deletes under the write lock
    # (lifecycle/run_retention.py): an event of run 1 at 12:45 projected in between
    # makes it the job's latest run, past the horizon, so it must stay.
    history(api)
    snapshot = api.store.projection_snapshot
    late: list[str] = []

    @contextlib.contextmanager
    def then_a_late_event(generation: int | None = None) -> Iterator[Any]:
        with snapshot(generation) as tx:
            yield tx
        if not late:
            late.append(run_id(1))
            api.ingest(run_event("COMPLETE", DAILY, run_id(1), at(12, 45)))

    monkeypatch.setattr(api.store, "projection_snapshot", then_a_late_event)
    assert trim_runs(api.store, HORIZON).runs == 2
    assert late and runs(api) == sorted([run_id(1), *KEPT])
    assert api.run(run_id(1))["state"] == "COMPLETE"
    # What the rows left give is what a rebuild from the log gives (which trims again).
    exported = api.export()
    reproject(api.store)
    assert api.export() == exported


def shared_content(api: Api) -> tuple[set[bytes], set[bytes]]:
    """The shapes stored and the shapes the events name (equal when no unnamed one is
    kept); every facet set a shape names, and no other, and every value a facet set
    names, are stored. io sets may outlive their shapes (asOf walks through them)."""
    with api.store.reader() as reader:
        shapes = reader.rows(ShapeRow)
        named = {e.shape_key for e in reader.rows(EventRow)}
        io = {r.io_key for r in reader.rows(IoSetRow)}
        sets = {r.facets_key for r in reader.rows(FacetSetRow)}
        values = {r.hash for r in reader.rows(FacetValueRow)}
        in_sets = {r.value_hash for r in reader.rows(FacetSetRow)}
    assert in_sets <= values, "every facet set's value is stored"
    assert {s.io_key for s in shapes if s.io_key} <= io
    assert {s.facets_key for s in shapes if s.facets_key} == sets
    return {s.shape_key for s in shapes}, named


def test_shapes_only_removed_runs_named_go_with_them(api: Api) -> None:
    # monthly's first run alone names its staging output; and a Delta-style job writes a
    # new version of its table every run: a dataset facet that changes every run makes
    # every run's shape one of its own.
    history(api)
    for n, hour in ((21, 9), (22, 10), (23, 12)):
        version = facet("DatasetVersionDatasetFacet", "1-0-1", datasetVersion=str(n))
        api.ingest(
            run_event(
                "COMPLETE",
                "versioned",
                run_id(n),
                at(hour),
                outputs=[ds("w", "t", version=version)],
            )
        )
    before, named = shared_content(api)
    assert before == named
    trim_runs(api.store, HORIZON)
    after, named = shared_content(api)
    assert after == named, "the shapes left are those the events left name"
    assert len(before) - len(after) == 3, "monthly's staging run and two versions went"
    # A late event of a removed run brings its shape back, sets and values with it.
    api.ingest(run_event("COMPLETE", "monthly", run_id(5), at(8), outputs=[ds(*STAGING)]))
    again, named = shared_content(api)
    assert again == named and len(again) == len(after) + 1


def test_postgresql_a_trim_waits_for_a_projection_that_found_a_shape_stored(
    pg_db: str,
) -> None:
    # Concurrent projections (PostgreSQL only): one that found a shape stored names it in
    # its events at commit without storing it, so the trim's deletion of unnamed shapes
    # waits for it to end. The runs write different tables and send no facets: their
    # shapes differ and no value is a candidate (that deletion waits the same way).
    store = open_store(pg_db)
    try:
        for n, hour in ((1, 9), (2, 12)):
            event = run_event("COMPLETE", DAILY, run_id(n), at(hour), outputs=[ds("w", f"t{n}")])
            for draft in deliveries([[event]]):
                store.append([draft])
        Projector(store).run_until_caught_up()
        trimmed = threading.Event()

        def trim() -> None:
            trim_runs(store, HORIZON)
            trimmed.set()

        with store.projection() as tx:
            assert tx.load(ShapeRow, [(b"\0" * 16,)]) == {}
            thread = threading.Thread(target=trim)
            thread.start()
            assert not trimmed.wait(1.5), "the trim went ahead of an open projection"
        assert trimmed.wait(30)
        thread.join()
        with store.reader() as reader:
            assert [r.run_id for r in reader.rows(RunRow)] == [run_id(2)]
            assert len(reader.rows(ShapeRow)) == 1
    finally:
        store.close()


def test_as_of_after_the_horizon_answers_as_before_the_runs_went(api: Api) -> None:
    history(api)
    instants = [at(11), at(12, 45), at(23)]
    before = [lineage(api, asOf=t) for t in instants]
    staging = [e for e in before[1]["edges"] if e["target"] == dataset_id(*STAGING)]
    assert staging, "the edge a removed run alone names is in the graph at 12:45"
    trim_runs(api.store, HORIZON)
    assert [lineage(api, asOf=t) for t in instants] == before


def test_as_of_before_the_horizon_is_a_422_naming_it(api: Api) -> None:
    history(api)
    api.lineage(*REPORT, asOf=at(10))  # answered while nothing is trimmed
    trim_runs(api.store, HORIZON)
    problem = api.problem(
        "GET",
        "/api/v1/lineage",
        422,
        type="dataset",
        namespace=REPORT[0],
        name=REPORT[1],
        asOf=at(10),
    )
    assert problem["type"].endswith("/as-of-before-horizon")
    assert problem["horizon"] == HORIZON and HORIZON in problem["detail"]
    assert dataset_id(*REPORT) in {n["id"] for n in lineage(api, asOf=at(12, 45))["nodes"]}


def test_the_horizon_only_moves_up_and_reproject_keeps_the_runs_out(api: Api) -> None:
    history(api)
    trim_runs(api.store, HORIZON)
    assert trim_runs(api.store, "2026-11-30T09:30:00.000000000Z").horizon == HORIZON
    exported = api.export()
    reproject(api.store)
    assert runs(api) == KEPT
    assert api.export() == exported


def test_the_retention_command_removes_old_runs(api: Api, db_url: str) -> None:
    history(api)
    db = db_url
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "embrasure",
            "retention",
            "--db",
            db,
            "--retain-runs",
            "0s",
            "--json",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert orjson.loads(out.stdout)["runs"]["runs"] == 3
    assert runs(api) == KEPT


def test_serve_passes_remove_runs_and_metrics_count_them(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(db_url)
    loop = RetentionLoop(store, "", None, 3600, retain_runs=datetime.timedelta(0))
    monkeypatch.setattr(loop, "start", lambda: None)  # passes run when the test says
    with TestClient(build_app(Settings(db=db_url), store, retention=loop)) as client:
        api = Api(client)
        history(api)
        loop.run_once()
        assert runs(api) == KEPT
        metrics = client.get("/metrics").text
        assert "embrasure_retention_runs_removed_total 3.0" in metrics
    store.close()


def test_serve_removes_old_runs_every_interval(db_url: str, tmp_path: Path) -> None:
    flags = ("--retain-runs", "0s", "--retention-interval", "1s")
    server = ServerProcess(db_url, *flags, log_dir=tmp_path).start()
    try:
        events = [daily_run(n, time=at(8 + n)) for n in (1, 2)]
        r = HTTP.post(
            server.url + "/api/v1/lineage/batch",
            content=orjson.dumps(events),
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            metrics = HTTP.get(server.url + "/metrics", timeout=10).text
            if "embrasure_retention_runs_removed_total 1.0" in metrics:
                break
            time.sleep(0.2)
        assert "embrasure_retention_runs_removed_total 1.0" in metrics
        assert HTTP.get(server.url + f"/api/v1/runs/{run_id(1)}", timeout=10).status_code == 404
        assert HTTP.get(server.url + f"/api/v1/runs/{run_id(2)}", timeout=10).status_code == 200
        assert server.terminate() == 0
    finally:
        server.stop()
