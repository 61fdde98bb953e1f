"""The canonical export, and reprojection, through the read API (how: tests/graph_api.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson

from embrasure.projector.worker import Projector, reproject
from embrasure.store import schema
from embrasure.store.schema import GRAPH_VERSION

from conftest import make_client, run_sql
from graph_api import (
    REPORT,
    Api,
    at,
    daily_run,
    ds,
    export_events,
    job_id,
    node_ids,
    run_event,
    run_id,
)

# == export and reproject ==========================================================================
# (docs/queries.md#export, docs/architecture.md#reprojection-a-new-generation-then-a-swap)


def test_export_is_deterministic_and_arrival_free(api: Api, tmp_path: Path) -> None:
    events = export_events()
    views = [api.ingest(*events[:4], provider_key="airflow"), api.ingest(*events[4:])]
    exported = api.export()
    assert exported == api.export()
    doc = orjson.loads(exported)
    assert set(doc) == {"datasets", "jobs", "runs", "edges", "column_edges"}
    assert all(doc[k] for k in doc), "every part of the export is populated"
    text = exported.decode()
    for view in views:
        assert view["delivery_id"] not in text
        assert view["received_at"] not in text
    for key in ("delivery_id", "received_at", "seq", "provider_key"):
        assert f'"{key}"' not in text
    # The same events, one delivery each and in reverse, into another database.
    with make_client(tmp_path / "other.db") as other_client:
        other = Api(other_client)
        other.ingest_each(*reversed(events))
        assert other.export() == exported
    other.store.close()


def test_export_cli_prints_the_api_export(api: Api, db_url: str) -> None:
    api.ingest(*export_events())
    out = subprocess.run(
        [sys.executable, "-m", "embrasure", "export", "--db", db_url],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout == api.export() + b"\n"


def test_reproject_leaves_the_graph_identical(api: Api, db_url: str) -> None:
    bad = daily_run(9)
    bad["run"]["runId"] = "nope"
    view = api.ingest(*export_events(), bad)
    before = api.export()
    reproject(api.store)
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view
    subprocess.run(
        [sys.executable, "-m", "embrasure", "reproject", "--db", db_url],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view
    # The projector carries on from the new generation's position.
    api.ingest(run_event("COMPLETE", "late", run_id(20), at(20), inputs=[ds(*REPORT)]))
    assert job_id("spark", "late") in node_ids(api.lineage(*REPORT, direction="downstream"))


def test_reproject_leaves_no_table_of_another_generation(api: Api, db_url: str) -> None:
    """A table an older GRAPH_VERSION had (g1_facet_history), and what a reproject
    killed while dropping its old generation left (g7_…), go with the next reproject."""
    api.ingest(*export_events())
    before = api.export()
    run_sql(db_url, "CREATE TABLE g1_facet_history (entity TEXT)")
    run_sql(db_url, "CREATE TABLE g7_runs (run_id TEXT)")
    generation = reproject(api.store)
    assert api.export() == before
    if db_url.startswith("sqlite:///"):
        names = run_sql(db_url, "SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        names = run_sql(db_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    prefixes = {n.split("_")[0] for (n,) in names if n[0] == "g" and n[1].isdigit()}
    assert prefixes == {f"g{generation}"}


def _indexes(db_url: str, generation: int) -> set[str]:
    """The generation's index names, without its prefix (primary keys and UNIQUE
    constraints' own indexes left out: they come with their tables)."""
    prefix = f"g{generation}_"
    if db_url.startswith("sqlite:///"):
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    else:
        sql = "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"
    names = [n for (n,) in run_sql(db_url, sql) if n.startswith(prefix)]
    return {n.removeprefix(prefix) for n in names if not n.endswith(("_pkey", "_key"))}


def test_reproject_builds_the_indexes_it_deferred(api: Api, db_url: str) -> None:
    """A rebuild creates its generation without the read-only indexes and builds them
    once the log is folded (schema.DEFERRED_INDEXES): the served graph has every one."""
    api.ingest(*export_events())
    fresh = _indexes(db_url, api.store.generation())
    assert fresh > schema.DEFERRED_INDEXES, "each deferred index is one the schema makes"
    built: list[set[str]] = []
    index_generation = api.store.index_generation

    def spy(generation: int) -> None:
        built.append(_indexes(db_url, generation))  # what the fold ran without
        index_generation(generation)

    api.store.index_generation = spy
    generation = reproject(api.store)
    assert built == [fresh - schema.DEFERRED_INDEXES]
    assert _indexes(db_url, generation) == fresh


def test_a_graph_built_by_an_older_version_is_rebuilt_on_start(api: Api, db_url: str) -> None:
    view = api.ingest(*export_events())
    before = api.export()
    generation = api.store.generation()
    # As an older Embrasure would have left it:
    run_sql(db_url, "UPDATE graph_meta SET graph_version = ?", (GRAPH_VERSION - 1,))
    projector = Projector(api.store)
    projector.start()
    try:
        deadline = time.monotonic() + 30
        while api.store.graph_version() != GRAPH_VERSION and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        projector.stop()
    assert api.store.graph_version() == GRAPH_VERSION
    assert api.store.generation() == generation + 1
    assert api.export() == before
    assert api.delivery(view["delivery_id"]) == view


def test_reads_answer_503_while_a_graph_an_older_version_built_is_rebuilt(
    api: Api, db_url: str
) -> None:
    """This code's reads do not fit an older version's tables: 503 graph-rebuilding
    until the rebuild swaps, while ingest goes on (docs/operations.md#upgrading)."""
    api.ingest(*export_events())
    before = api.export()
    run_sql(db_url, "UPDATE graph_meta SET graph_version = ?", (GRAPH_VERSION - 1,))
    with make_client(db_url) as client:
        store = client.app.state.store  # type: ignore[attr-defined]
        refused = client.get("/api/v1/datasets")
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "30"
        assert refused.json()["type"].endswith("/graph-rebuilding")
        late = run_event("COMPLETE", "late", run_id(30), at(21), inputs=[ds(*REPORT)])
        accepted = client.post("/api/v1/lineage", json=late)
        assert accepted.status_code == 202
        reproject(store)
        assert client.get("/api/v1/datasets").status_code == 200
        exported = client.get("/api/v1/export")
        store.close()
    assert exported.content != before
    assert job_id("spark", "late") in {j["id"] for j in exported.json()["jobs"]}
