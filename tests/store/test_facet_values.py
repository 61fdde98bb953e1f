"""Facet values stored once by hash, compressed when large (store/facet_values.py,
docs/architecture.md#storage): what the read API serves is what was sent, both backends."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from embrasure.lifecycle import run_retention
from embrasure.lifecycle.run_retention import trim_runs
from embrasure.projector.canonical import canonical_json
from embrasure.projector.facets import value_hash
from embrasure.projector.graph_rows import entity
from embrasure.projector.worker import Projector
from embrasure.store import facet_values, open_store
from embrasure.store import run_retention as store_run_retention
from embrasure.store.rows import FacetRow, FacetValueRow, RunRow

from event_strategies import deliveries
from graph_api import Api, at, ds, facet, run_event, run_id, schema


def stored(api: Api) -> tuple[dict[tuple[str, str], FacetRow], dict[bytes, FacetValueRow]]:
    with api.store.reader() as reader:
        facets = {(r.entity, r.name): r for r in reader.rows(FacetRow)}
        values = {bytes(r.hash): r for r in reader.rows(FacetValueRow)}
    return facets, values


def test_a_large_value_is_compressed_and_reads_back_as_sent(api: Api) -> None:
    # ~150 KB of text zstd shrinks well, with characters JSON escapes or spells in UTF-8.
    lines = [f'column_{i} "quoted" \\ tab\t ünïcode \u2028 {i * 7919 % 1000}' for i in range(3000)]
    big = facet("DocumentationDatasetFacet", "1-1-0", description="\n".join(lines))
    canonical = canonical_json(big)
    assert len(canonical) > 100_000
    api.ingest(
        run_event("COMPLETE", "j", run_id(1), at(9), outputs=[ds("w", "db.big", documentation=big)])
    )

    assert api.dataset("w", "db.big")["facets"]["documentation"] == big
    facets, values = stored(api)
    digest = value_hash(canonical)
    assert facets[(entity("dataset", "w", "db.big"), "documentation")].value_hash == digest
    row = values[digest]
    assert row.encoding == facet_values.ZSTD
    assert len(row.value) < len(canonical) // 5
    with api.store.reader() as reader:
        assert reader.facet_values([digest]) == {digest: canonical.decode()}
    export = api.export()
    assert canonical in export  # the export carries the value's canonical bytes as sent


def test_two_entities_share_one_value_row(api: Api) -> None:
    shared = schema("id", "name", "created_at")
    nominal = facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(8))
    small = {"k": 1}  # a custom facet, shorter than COMPRESS_FROM: stored as it is
    events: list[Any] = [
        run_event(
            "COMPLETE",
            f"job_{n}",
            run_id(n),
            at(9, n),
            outputs=[ds("w", f"db.t{n}", schema=shared, tiny=small)],
            run_facets={"nominalTime": nominal},
        )
        for n in (1, 2)
    ]
    api.ingest(*events)

    facets, values = stored(api)
    for name, value in (("schema", shared), ("tiny", small)):
        digest = value_hash(canonical_json(value))
        owners = [k for k, r in facets.items() if k[1] == name and r.value_hash == digest]
        # The datasets (each run's view of its output is its shape's: facet_sets): one value.
        assert sorted(owners) == sorted(
            [(entity("dataset", "w", f"db.t{n}"), name) for n in (1, 2)]
        )
        assert digest in values
    runs = [k for k, r in facets.items() if k[1] == "nominalTime"]
    assert runs == [(entity("run", run_id(n)), "nominalTime") for n in (1, 2)]
    assert facets[runs[0]].value_hash == facets[runs[1]].value_hash
    # One row per distinct value, whatever names it: each value's hash is its key.
    assert sorted(values) == sorted({r.value_hash for r in facets.values() if r.value_hash})
    plain = values[value_hash(canonical_json(small))]
    assert (plain.encoding, bytes(plain.value)) == (facet_values.PLAIN, canonical_json(small))
    for n in (1, 2):
        view = api.dataset("w", f"db.t{n}")
        assert view["facets"] == {"schema": shared, "tiny": small}
        assert api.run(run_id(n))["facets"]["nominalTime"] == nominal
        [output] = api.run(run_id(n))["outputs"]
        assert output["facets"] == {"schema": shared, "tiny": small}


@pytest.mark.parametrize("length", [8, facet_values.COMPRESS_FROM - 1, facet_values.COMPRESS_FROM])
def test_values_from_the_threshold_are_compressed(length: int) -> None:
    canonical = canonical_json({"v": "a" * (length - 8)})  # {"v":"…"}: 8 bytes around
    assert len(canonical) == length
    row = facet_values.value_row(value_hash(canonical), canonical)
    compressed = length >= facet_values.COMPRESS_FROM
    assert row.encoding == (facet_values.ZSTD if compressed else facet_values.PLAIN)
    assert facet_values.decode(row.encoding, row.value) == canonical.decode()


@pytest.mark.parametrize("per_statement", [None, 1])
def test_a_run_trim_deletes_the_values_only_its_runs_named(
    api: Api, monkeypatch: pytest.MonkeyPatch, per_statement: int | None
) -> None:
    if per_statement is not None:  # a transaction per candidate, after the trims
        monkeypatch.setattr(run_retention, "UNNAMED_PER_STATEMENT", per_statement)
        monkeypatch.setattr(store_run_retention, "UNNAMED_PER_STATEMENT", per_statement)
    engine = facet("ProcessingEngineRunFacet", "1-1-0", version="3.5.1", name="spark")
    table = schema("id", "amount")

    def nominal(hour: int) -> dict[str, Any]:
        return facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(hour))

    def statistics(rows: int) -> dict[str, Any]:
        return facet("OutputStatisticsOutputDatasetFacet", "1-0-2", rowCount=rows)

    for n, hour in ((1, 9), (2, 12)):
        output = ds("w", "db.out", schema=table) | {"outputFacets": {"stats": statistics(n)}}
        run_facets = {"nominalTime": nominal(hour), "processing_engine": engine}
        api.ingest(
            run_event(
                "COMPLETE", "daily", run_id(n), at(hour), outputs=[output], run_facets=run_facets
            )
        )
    _, before = stored(api)
    gone = {value_hash(canonical_json(v)) for v in (nominal(9), statistics(1))}
    kept = {value_hash(canonical_json(v)) for v in (nominal(12), statistics(2), engine, table)}
    assert gone | kept <= set(before)

    assert trim_runs(api.store, "2026-11-30T11:00:00.000000000Z").runs == 1
    facets, after = stored(api)
    assert set(after) == set(before) - gone
    assert set(after) == {r.value_hash for r in facets.values() if r.value_hash}
    view = api.run(run_id(2))
    assert view["facets"] == {"nominalTime": nominal(12), "processing_engine": engine}
    assert api.dataset("w", "db.out")["facets"]["schema"] == table


def test_postgresql_a_trim_waits_for_a_projection_that_found_a_value_stored(pg_db: str) -> None:
    # Concurrent projections (PostgreSQL only): one that found a value stored will name
    # it at commit, so a trim deleting unnamed values must wait for it to end.
    store = open_store(pg_db)
    try:
        for n, hour in ((1, 9), (2, 12)):
            nominal = facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(hour))
            event = run_event(
                "COMPLETE", "daily", run_id(n), at(hour), run_facets={"nominalTime": nominal}
            )
            for draft in deliveries([[event]]):
                store.append([draft])
        Projector(store).run_until_caught_up()
        trimmed = threading.Event()

        def trim() -> None:
            trim_runs(store, "2026-11-30T11:00:00.000000000Z")
            trimmed.set()

        with store.projection() as tx:
            assert tx.stored_keys(FacetValueRow, [(b"\0" * 16,)]) == set()
            thread = threading.Thread(target=trim)
            thread.start()
            assert not trimmed.wait(1.5), "the trim went ahead of an open projection"
        assert trimmed.wait(30)
        thread.join()
        with store.reader() as reader:
            assert [r.run_id for r in reader.rows(RunRow)] == [run_id(2)]
    finally:
        store.close()


def test_one_statement_deletes_more_unnamed_values_than_a_statement_had_parameters(
    api: Api,
) -> None:
    # 1,200 runs, each with a nominal time of its own: a single pass gathers 1,199
    # candidates (all but the latest run's), over the 900 parameters statements take
    # elsewhere, and UNNAMED_PER_STATEMENT (30,000) hands them to one statement.
    def nominal(n: int) -> dict[str, Any]:
        return facet("NominalTimeRunFacet", "1-0-1", nominalStartTime=at(8, n // 60, n % 60))

    for first in (0, 600):  # a batch holds at most 1,000 events
        api.ingest(
            *(
                run_event(
                    "COMPLETE",
                    "hourly",
                    run_id(n),
                    at(9, n // 60, n % 60),
                    run_facets={"nominalTime": nominal(n)},
                )
                for n in range(first, first + 600)
            )
        )
    _, before = stored(api)
    gone = {value_hash(canonical_json(nominal(n))) for n in range(1199)}
    assert gone <= set(before)
    assert trim_runs(api.store, at(11)).runs == 1199
    _, after = stored(api)
    assert set(after) == set(before) - gone
    assert api.run(run_id(1199))["facets"] == {"nominalTime": nominal(1199)}
