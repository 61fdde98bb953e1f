"""SQLite beside PostgreSQL, in one run: ingest with 1 and 2 receiver processes, and
projection with 1 and 2 projector processes (``python bench/ingest.py --backends`` and
``python bench/projection.py --backends`` run their half; ``python bench/backends.py``
both).

- Ingest: ``embrasure serve --no-projector`` processes on one new database; wrk (the
  load of bench/ingest.py: 64 connections of single ~4.7 KB events, or 8 connections of
  500-event batches, every event unique) drives each receiver with its share of the
  connections, as a load balancer would. Figures are 202 answers per second (single) and
  events acknowledged per second (batch), summed over the receivers.
- Projection: a log pre-filled through ``Store.append`` (100-event deliveries of
  bench/events.py's realistic events), then ``embrasure project`` processes started
  together; events per second from the first committed transaction to the last (600
  deliveries: the first of six 10,000-event transactions is not timed, so neither is
  start-up).

Every configuration repeats, interleaved (sqlite, postgresql, sqlite…), and medians are
reported. The machine has 2 cores and is shared: the cores busy before each run are
recorded ("others busy"). PostgreSQL is the local cluster at EMBRASURE_BENCH_PG
(default postgresql://postgres@127.0.0.1:5432/postgres); each run gets a new database.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psycopg
import servers
from events import run_event
from ingest_load import BATCH, SINGLE, Workload, ensure_wrk, event_template, run_wrk

from embrasure.model import DeliveryDraft, utc_now
from embrasure.store import Store, open_store
from embrasure.store.rows import DeliveryOutcome

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
PG_ADMIN = os.environ.get("EMBRASURE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgresql")


@contextlib.contextmanager
def database(backend: str, work: Path) -> Iterator[str]:
    """A new, empty database of ``backend`` for one run."""
    if backend == "sqlite":
        yield f"sqlite:///{tempfile.mkdtemp(dir=work)}/bench.db"
        return
    name = f"embrasure_bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def embrasure(work: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    with open(work / f"{name}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "embrasure", *args, "--log-level", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(60)


# -- ingest ---------------------------------------------------------------------------------


def ingest_run(
    backend: str, receivers: int, workload: Workload, seconds: int, work: Path, wrk: str
) -> dict[str, Any]:
    template = work / "template.json"
    template.write_bytes(event_template())
    share = Workload(
        workload.name,
        workload.path,
        workload.events_per_body,
        max(1, workload.connections // receivers),
        1,
        workload.timeout_s,
    )
    others = servers.busy_cores(0.5)
    with database(backend, work) as db:
        open_store(db).close()  # the schema, before several processes race to make it
        procs, urls = [], []
        for _ in range(receivers):
            port = servers.free_port()
            procs.append(
                embrasure(
                    work,
                    f"serve-{port}",
                    "serve",
                    "--no-projector",
                    "--db",
                    db,
                    "--port",
                    str(port),
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        try:
            for proc, url in zip(procs, urls, strict=True):
                servers.Server("embrasure", proc, url, work / "x.log").wait_healthy()
            for n, url in enumerate(urls):  # warm-up: imports, pools, prepared statements
                run_wrk(wrk, url, share, 2, 8 + n, template)
            with contextlib.ExitStack() as stack:
                from concurrent.futures import ThreadPoolExecutor

                pool = stack.enter_context(ThreadPoolExecutor(len(urls)))
                results = list(
                    pool.map(
                        lambda nu: run_wrk(wrk, nu[1], share, seconds, nu[0], template),
                        enumerate(urls),
                    )
                )
        finally:
            stop(procs)
    accepted = sum(r.count(202) for r in results)
    other = sum(sum(r.statuses.values()) - r.count(202) for r in results)
    elapsed = max(r.duration_s for r in results)
    return {
        "backend": backend,
        "receivers": receivers,
        "workload": workload.name,
        "per_s": accepted * workload.events_per_body / elapsed,
        "requests_per_s": accepted / elapsed,
        "not_202": other,
        "p99_ms": max(r.latency_ms["p99"] for r in results),
        "others_busy_cores": round(others, 2),
    }


# -- projection -----------------------------------------------------------------------------


def fill(db: str, deliveries: int, per_delivery: int) -> None:
    store = open_store(db)
    try:
        drafts = []
        for d in range(deliveries):
            body = orjson.dumps([run_event(d * per_delivery + k) for k in range(per_delivery)])
            drafts.append(
                DeliveryDraft(
                    "bench",
                    None,
                    hashlib.sha256(body).hexdigest(),
                    body,
                    "batch",
                    per_delivery,
                    (),
                    utc_now(),
                )
            )
        for start in range(0, len(drafts), 20):
            store.append(drafts[start : start + 20])
    finally:
        store.close()


def projected(store: Store) -> int:
    with store.reader() as reader:
        return len(reader.rows(DeliveryOutcome))


def projection_run(
    backend: str, projectors: int, deliveries: int, per_delivery: int, work: Path
) -> dict[str, Any]:
    others = servers.busy_cores(0.5)
    with database(backend, work) as db:
        fill(db, deliveries, per_delivery)
        store = open_store(db)
        procs = [
            embrasure(work, f"project-{backend}-{n}", "project", "--db", db)
            for n in range(projectors)
        ]
        try:
            # Counted from the projected deliveries' records, not the position: with
            # several projectors the watermark waits for the slowest transaction.
            first: tuple[float, int] | None = None
            while (done := projected(store)) < deliveries:
                if first is None and done > 0:
                    first = (time.monotonic(), done)
                time.sleep(0.02)
            end = time.monotonic()
        finally:
            stop(procs)
            store.close()
    if first is None:
        raise SystemExit(
            f"{backend}: all {deliveries} deliveries were projected in one transaction: "
            "raise --deliveries to time the ones after the first"
        )
    events = (deliveries - first[1]) * per_delivery
    return {
        "backend": backend,
        "projectors": projectors,
        "per_s": events / (end - first[0]),
        "events": events,
        "others_busy_cores": round(others, 2),
    }


# -- the run ----------------------------------------------------------------------------------


def medians(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return [
        {
            **dict(zip(keys, key, strict=True)),
            "median_per_s": statistics.median(r["per_s"] for r in rs),
            "runs_per_s": [round(r["per_s"]) for r in rs],
            "others_busy_cores": [r["others_busy_cores"] for r in rs],
        }
        for key, rs in groups.items()
    ]


def markdown(report: dict[str, Any]) -> str:
    """The figures as tables: medians, every run's figure, PostgreSQL / SQLite."""
    lines = [f"Run {report['date']} on {report['cores']} cores.", ""]
    if "ingest" in report:
        lines += [
            "| workload | receivers | SQLite /s | PostgreSQL /s | PG / SQLite"
            " | runs SQLite | runs PG |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        by = {(r["workload"], r["receivers"], r["backend"]): r for r in report["ingest"]}
        for workload in ("single", "batch"):
            for receivers in (1, 2):
                lite, pg = (
                    by[(workload, receivers, "sqlite")],
                    by[(workload, receivers, "postgresql")],
                )
                ratio = pg["median_per_s"] / lite["median_per_s"]
                lines.append(
                    f"| {workload} | {receivers} | {lite['median_per_s']:,.0f} |"
                    f" {pg['median_per_s']:,.0f} | {ratio:.0%} |"
                    f" {lite['runs_per_s']} | {pg['runs_per_s']} |"
                )
        lines.append("")
    if "projection" in report:
        lines += [
            "| backend | projectors | events/s (median) | runs | others busy (cores) |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in report["projection"]:
            lines.append(
                f"| {r['backend']} | {r['projectors']} | {r['median_per_s']:,.0f} |"
                f" {r['runs_per_s']} | {r['others_busy_cores']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("ingest", "projection", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=6, help="per ingest run")
    # 600 deliveries of 100 events: six of the projector's default transactions (10,000 events), so
    # the rate is timed from the first one committed (a projector's start-up excluded).
    parser.add_argument("--deliveries", type=int, default=600, help="per projection run")
    parser.add_argument("--out", type=Path, default=RESULTS / "postgres")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-bench-"))
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
    }
    if args.part in ("ingest", "both"):
        wrk = ensure_wrk()
        runs = []
        for repeat in range(args.repeats):
            for workload in (SINGLE, BATCH):
                for receivers in (1, 2):
                    for backend in BACKENDS:
                        r = ingest_run(backend, receivers, workload, args.seconds, work, wrk)
                        print(repeat, r, flush=True)
                        runs.append(r)
        report["ingest_runs"] = runs
        report["ingest"] = medians(runs, ("workload", "receivers", "backend"))
    if args.part in ("projection", "both"):
        runs = []
        for repeat in range(args.repeats):
            for backend, projectors in (("sqlite", 1), ("postgresql", 1), ("postgresql", 2)):
                r = projection_run(backend, projectors, args.deliveries, 100, work)
                print(repeat, r, flush=True)
                runs.append(r)
        report["projection_runs"] = runs
        report["projection"] = medians(runs, ("backend", "projectors"))
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    print(json.dumps({k: report[k] for k in ("ingest", "projection") if k in report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
