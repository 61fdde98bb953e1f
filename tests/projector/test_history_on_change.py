"""docs/projection.md#history-written-on-change: a job that runs again with the same
inputs, outputs and facets adds its run and its events, not another copy of what its
events name (shapes, io_sets, facet_sets, and the job and dataset facet values in
facet_values); a changed facet adds one set."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from embrasure.projector.canonical import canonical_json
from embrasure.projector.facets import value_hash
from embrasure.projector.worker import Projector
from embrasure.store import Store, open_store
from embrasure.store.rows import GRAPH_ROWS, FieldRow

from event_strategies import deliveries
from graph_api import SPARK, at, ds, facet, run_id

SHARED = ("shapes", "io_sets", "facet_sets")
PER_RUN = ("events", "runs", "run_io")


def job_run(
    n: int,
    query: str = "INSERT INTO db.report SELECT * FROM db.orders",
    processing: str = "BATCH",
) -> list[Any]:
    """Run ``n`` of one hourly job: START then COMPLETE, the same job and dataset facets
    each time; only the runId, the times and a run facet change."""
    job_type = facet("JobTypeJobFacet", "2-0-3", processingType=processing, integration="SPARK")
    schema = facet("SchemaDatasetFacet", "1-1-1", fields=[{"name": "id", "type": "bigint"}])
    event = {
        "producer": SPARK,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": run_id(n),
            "facets": {
                "nominalTime": facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(n))
            },
        },
        "job": {
            "namespace": "spark",
            "name": "report",
            "facets": {
                "sql": facet("SQLJobFacet", "1-1-0", query=query),
                "jobType": job_type,
            },
        },
        "inputs": [ds("warehouse", "db.orders", schema=schema)],
        "outputs": [ds("warehouse", "db.report", schema=schema)],
    }
    start, complete = copy.deepcopy(event), copy.deepcopy(event)
    start.update(eventType="START", eventTime=at(n, 0))
    complete.update(eventType="COMPLETE", eventTime=at(n, 5))
    return [start, complete]


def counts(store: Store) -> dict[str, int]:
    with store.reader() as reader:
        return {name: len(reader.rows(table.row)) for name, table in GRAPH_ROWS.items()}


def project(store: Store, events: list[Any]) -> dict[str, int]:
    for draft in deliveries([events]):
        store.append([draft])
    Projector(store).run_until_caught_up()
    return counts(store)


def test_a_repeated_job_adds_its_run_and_nothing_it_shares(db_url: str) -> None:
    store = open_store(db_url)
    try:
        first = project(store, job_run(1))
        assert all(first[t] > 0 for t in SHARED + PER_RUN), first
        second = project(store, job_run(2))
        for table in SHARED:
            assert second[table] == first[table], table
        # facet_values holds current values too: the run's own nominalTime is new, the
        # job's and the datasets' values are the ones stored already.
        assert second["facet_values"] == first["facet_values"] + 1
        assert second["events"] == first["events"] + 2
        assert second["runs"] == first["runs"] + 1
        assert second["run_io"] == first["run_io"] + 2  # one input, one output
        # Hourly through the day: still one shape, one set of each.
        for n in range(3, 23):
            later = project(store, job_run(n))
        assert {t: later[t] for t in SHARED} == {t: first[t] for t in SHARED}
        assert later["events"] == 2 * 22
        assert later["facet_values"] == first["facet_values"] + 21
        # A changed SQL facet is a new shape, but no history: asOf reads jobType alone.
        sql = project(store, job_run(23, "INSERT INTO db.report SELECT id FROM db.orders"))
        assert sql["shapes"] == first["shapes"] + 1
        assert {t: sql[t] for t in ("io_sets", "facet_sets")} == {
            t: first[t] for t in ("io_sets", "facet_sets")
        }
        assert sql["facet_values"] == later["facet_values"] + 2  # the SQL, the nominalTime
        # A changed jobType is a new facet set (and shape): jobType, and each dataset's
        # schema as the runs sent it (docs/projection.md#what-each-run-did).
        changed = project(store, job_run(0, processing="STREAMING"))
        assert changed["shapes"] == first["shapes"] + 2
        assert changed["facet_sets"] == 2 * first["facet_sets"] == 2 * 3
        assert changed["facet_values"] == sql["facet_values"] + 2  # jobType, nominalTime
        assert changed["io_sets"] == first["io_sets"]
    finally:
        store.close()


def test_a_stored_shape_stands_for_every_field_it_names(fresh_db: Callable[[], str]) -> None:
    """A dataset read twice with two schemas keeps one value per facet name in its set
    (the larger value hash: here the narrow one), yet names the fields of both: an
    event that differs from another only there is another shape, so each event's fields
    arrive whichever comes first."""
    narrow = facet("SchemaDatasetFacet", "1-1-1", fields=[{"name": "id", "type": "bigint"}])
    wide = facet(
        "SchemaDatasetFacet",
        "1-1-1",
        fields=[{"name": "id", "type": "bigint"}, {"name": "yy", "type": "text"}],
    )
    assert value_hash(canonical_json(narrow)) > value_hash(canonical_json(wide))
    both, one = job_run(1), job_run(2)
    for event in both:  # reads it with the wide schema and with the narrow one
        event["inputs"] = [
            ds("warehouse", "db.same", schema=wide),
            ds("warehouse", "db.same", schema=narrow),
        ]
        event["outputs"] = []
    for event in one:  # the narrow one alone: the same facet set as ``both``
        event["inputs"] = [ds("warehouse", "db.same", schema=narrow)]
        event["outputs"] = []
    wanted = {("warehouse", "db.same", "id"), ("warehouse", "db.same", "yy")}
    for order in ((one, both), (both, one)):
        store = open_store(fresh_db())
        try:
            for events in order:
                project(store, events)
            with store.reader() as reader:
                fields = {(r.ns, r.name, r.field) for r in reader.rows(FieldRow)}
            assert fields == wanted
            # Two shapes, one facet set: jobType and the input's schema as sent.
            assert (counts(store)["shapes"], counts(store)["facet_sets"]) == (2, 2)
        finally:
            store.close()
