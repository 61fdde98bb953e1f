"""What each run did at scale (issue 18): the first page of ``GET /api/v1/datasets/runs``
for a dataset written by 10,000 runs, on SQLite and PostgreSQL.

The log: ``--runs`` runs of one Spark job (a START and a COMPLETE each, an hour apart
in eventTime), each reading a source table and writing ``warehouse.orders`` with its
schema (a field more every 500 runs: schema changes) and ``outputStatistics`` (rows,
bytes, files) on the COMPLETE; every 10th run is followed by a check run (a dbt-style
test reading the table with ``dataQualityAssertions``, one in 7 failing). Appended
through ``Store.append`` in 100-event deliveries, projected by ``Projector`` in this
process (its events/s is reported, as a by-product), then ``embrasure serve
--no-projector`` answers over HTTP on 127.0.0.1: a few warm-up calls, then ``--calls``
calls of the first page (the default limit, 100 entries; and ``role=output&limit=20``,
the web UI's chart page), p50/p99 of the wall time (body read). Target: p99 < 50 ms on
both backends.

Run ``python bench/dataset_runs.py`` (about 2 minutes on this 2-core machine) or
``python bench/query.py --dataset-runs``; writes bench/results/dataset_runs.{md,json}.
PostgreSQL is EMBRASURE_BENCH_PG (default postgresql://postgres@127.0.0.1:5432/postgres);
each backend gets a new database.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import servers
from backends import BACKENDS, database

from embrasure.model import DeliveryDraft, utc_now
from embrasure.projector.worker import Projector
from embrasure.store import open_store

RESULTS = Path(__file__).resolve().parent / "results"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/spark"
TABLE = ("postgres://warehouse:5432", "warehouse.orders")
SOURCE = ("s3://landing", "orders.json")
START = datetime(2026, 1, 1, tzinfo=UTC)


def _time(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _run_id(n: int, kind: int = 0) -> str:
    return str(uuid.UUID(int=(kind << 64) | n + 1))


def events(runs: int) -> list[dict[str, Any]]:
    out = []
    for n in range(runs):
        moment = START + timedelta(hours=n)
        fields = [{"name": f"c{i}", "type": "string"} for i in range(8 + n // 500)]
        output = {
            "namespace": TABLE[0],
            "name": TABLE[1],
            "facets": {"schema": {"_producer": SPARK, "fields": fields}},
        }
        base = {
            "producer": SPARK,
            "run": {"runId": _run_id(n)},
            "job": {"namespace": "spark", "name": "load_orders"},
            "inputs": [{"namespace": SOURCE[0], "name": SOURCE[1]}],
        }
        out.append({**base, "eventType": "START", "eventTime": _time(moment), "outputs": [output]})
        statistics_facet = {"rowCount": 1000 + n % 97, "size": 65536 + n, "fileCount": 4}
        out.append(
            {
                **base,
                "eventType": "COMPLETE",
                "eventTime": _time(moment + timedelta(minutes=20)),
                "outputs": [{**output, "outputFacets": {"outputStatistics": statistics_facet}}],
            }
        )
        if n % 10 == 0:
            assertions = [
                {"assertion": "not_null", "success": n % 7 != 0, "column": "c1"},
                {"assertion": "unique", "success": True, "column": "c0"},
            ]
            checked = {
                "namespace": TABLE[0],
                "name": TABLE[1],
                "inputFacets": {"dataQualityAssertions": {"assertions": assertions}},
            }
            out.append(
                {
                    "producer": SPARK,
                    "eventType": "COMPLETE",
                    "eventTime": _time(moment + timedelta(minutes=30)),
                    "run": {"runId": _run_id(n, 1)},
                    "job": {"namespace": "dbt", "name": "test.orders"},
                    "inputs": [checked],
                }
            )
    return out


def fill_and_project(db: str, items: list[dict[str, Any]]) -> dict[str, float]:
    store = open_store(db)
    try:
        drafts = []
        for start in range(0, len(items), 100):
            body = orjson.dumps(items[start : start + 100])
            digest = hashlib.sha256(body).hexdigest()
            count = len(items[start : start + 100])
            drafts.append(DeliveryDraft("bench", None, digest, body, "batch", count, (), utc_now()))
        for start in range(0, len(drafts), 50):
            store.append(drafts[start : start + 50])
        began = time.monotonic()
        Projector(store).run_until_caught_up()
        seconds = time.monotonic() - began
    finally:
        store.close()
    return {"events": len(items), "seconds": seconds, "events_per_s": len(items) / seconds}


def measure(url: str, params: dict[str, Any], calls: int) -> dict[str, Any]:
    times = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(5):
            client.get("/api/v1/datasets/runs", params=params).raise_for_status()
        size = 0
        for _ in range(calls):
            began = time.perf_counter()
            r = client.get("/api/v1/datasets/runs", params=params)
            r.raise_for_status()
            body = r.content
            times.append((time.perf_counter() - began) * 1000)
            size = len(body)
        doc = json.loads(body)
    return {
        "p50_ms": statistics.median(times),
        "p99_ms": servers.percentile(times, 99),
        "entries": len(doc["runs"]),
        "bytes": size,
        "schema_changes": sum(1 for r in doc["runs"] if "schema_change" in r),
    }


def run_backend(backend: str, runs: int, calls: int, work: Path) -> dict[str, Any]:
    items = events(runs)
    with database(backend, work) as db:
        projection = fill_and_project(db, items)
        server = servers.start_embrasure(work, None, Path(__file__).resolve().parents[1], db_url=db)
        try:
            server.wait_healthy()
            base = {"namespace": TABLE[0], "name": TABLE[1]}
            others = servers.busy_cores(0.5)
            pages = {
                "first_page": measure(server.url, base, calls),
                "writes_20": measure(server.url, {**base, "role": "output", "limit": 20}, calls),
            }
        finally:
            server.stop()
    return {
        "backend": backend,
        "runs": runs,
        "projection": projection,
        "others_busy_cores": round(others, 2),
        **pages,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# datasets/runs: a dataset written by "
        f"{report['runs']:,} runs ({report['calls']} calls each)",
        "",
        "| backend | page | entries | p50 ms | p99 ms | bytes | projection events/s "
        "| others busy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["results"]:
        for page in ("first_page", "writes_20"):
            m = r[page]
            lines.append(
                f"| {r['backend']} | {page} | {m['entries']} | {m['p50_ms']:.1f} "
                f"| {m['p99_ms']:.1f} | {m['bytes']:,} | {r['projection']['events_per_s']:,.0f} "
                f"| {r['others_busy_cores']} |"
            )
    lines += ["", f"Target: p99 < 50 ms on both backends. {report['when']}", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=10_000, help="runs writing the dataset")
    p.add_argument("--calls", type=int, default=200, help="calls per page measured")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    p.add_argument("--out", type=Path, default=RESULTS / "dataset_runs")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-dataset-runs-"))
    results = [run_backend(b, args.runs, args.calls, work) for b in args.backends.split(",")]
    report = {"runs": args.runs, "calls": args.calls, "when": utc_now(), "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
