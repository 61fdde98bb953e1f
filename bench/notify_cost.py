"""What subscriptions cost the projector (issue 43): the same log projected with 0, 100
and 10,000 notification subscriptions, interleaved A B C C B A in one run.

The log: bench/projection.py's platform (its ~4.7 KB Spark RunEvents, 500 jobs) and,
after it, data-quality runs — a dbt-like test job per platform table reading it with a
``dataQualityAssertions`` input facet, failing one time in three, so checks fail and
recover all along (each check result is a merge the notification hook reads before and
after; so is the schema facet of every dataset the platform's events carry a schema for,
and every run they fail). The subscriptions, each to every kind of notification:

- A: none (the hook asks once per transaction whether there is a subscription, finds
  none, and stops);
- B: 100, one per table of the first 100 jobs (watched datasets: their checks decide
  notifications);
- C: 10,000: one per platform table (500) and 9,500 on datasets no event names, so the
  index of what they watch holds 10,000 entries and every check looks itself up.

Each run projects a fresh copy of the log (``projection.project_copy``, default limits)
in this process; the report gives events/s, CPU µs/event and the notifications decided,
medians and B/A, C/A. The issue's target: B within 5% of A.

Results: bench/results/notify-cost.{md,json}. Usage: ``bench/notify_cost.py [--events N]
[--checks N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import projection
import servers

from embrasure.model import DeliveryDraft, Subscription, utc_now
from embrasure.projector.causes import KINDS
from embrasure.projector.worker import ProjectorLimits
from embrasure.store.sqlite import SQLiteStore

RESULTS = Path(__file__).parent / "results" / "notify-cost"
WAREHOUSE = "postgres://warehouse:5432"
PRODUCER = "https://github.com/dbt-labs/dbt-core/tree/1.10.0"
SIDES = {"A": 0, "B": 100, "C": 10_000}
TARGET = 0.95


def check_event(n: int, name: str, assertion: str, ok: bool) -> dict[str, Any]:
    """Check run ``n`` (a dbt-like test job) of the warehouse table ``name``: one
    ``dataQualityAssertions`` input facet with its result."""
    facet = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/DataQualityAssertionsDatasetFacet.json",
        "assertions": [{"assertion": assertion, "success": ok, "column": "id"}],
    }
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-11-02T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": f"01937a2b-0000-7000-9000-{n:012x}"},
        "job": {"namespace": "dbt", "name": f"test.{assertion}_{name}"},
        "inputs": [
            {
                "namespace": WAREHOUSE,
                "name": name,
                "inputFacets": {"dataQualityAssertions": facet},
            }
        ],
        "outputs": [],
    }


def platform_check(n: int) -> dict[str, Any]:
    """Check run ``n``, of the platform's table n mod 500: fails one time in three."""
    table = n % projection.JOBS
    ok = (n // projection.JOBS + table) % 3 != 0
    return check_event(n, f"analytics.public.target_{table}", "not_null", ok)


def append_checks(path: Path, checks: int, per_delivery: int = 500) -> None:
    store = SQLiteStore(str(path))
    try:
        for start in range(0, checks, per_delivery):
            events = [platform_check(n) for n in range(start, start + per_delivery)]
            body = orjson.dumps(events)
            digest = hashlib.sha256(body).hexdigest()
            store.append(
                [DeliveryDraft("dbt", None, digest, body, "batch", len(events), (), utc_now())]
            )
    finally:
        store.close()


def subscriptions(count: int) -> list[Subscription]:
    """``count`` subscriptions: the platform's tables first, then datasets nobody sends."""
    out = []
    for i in range(count):
        name = f"analytics.public.target_{i}" if i < projection.JOBS else f"elsewhere.table_{i}"
        out.append(
            Subscription(
                f"sub_{i:05d}",
                "dataset",
                WAREHOUSE,
                name,
                KINDS,  # every kind: the hook reads what each needs
                f"http://127.0.0.1:9/hook/{i}",
                "whsec_" + "A" * 32,
                utc_now(),
                None,
            )
        )
    return out


def prepare(work: Path, events: int, checks: int) -> dict[str, Path]:
    base = work / "log.db"
    fill = projection.prefill(base, events)
    print(f"  platform: {fill.events:,} events ({fill.events_per_s:,.0f} events/s)", flush=True)
    append_checks(base, checks)
    print(f"  checks: {checks:,} events", flush=True)
    projection.checkpoint(base)
    logs = {}
    for side, count in SIDES.items():
        logs[side] = work / f"log-{side}.db"
        projection.copy_db(base, logs[side])
        store = SQLiteStore(str(logs[side]))
        try:
            for s in subscriptions(count):
                store.add_subscription(s)
        finally:
            store.close()
        projection.checkpoint(logs[side])
    return logs


def decided(path: Path) -> int:
    with contextlib.closing(servers.sqlite_reader(path)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM notifications").fetchone()[0])


def run(logs: dict[str, Path], work: Path, rounds: int, quiet: float) -> list[dict[str, Any]]:
    records = []
    target = work / "projected.db"
    for side in "ABCCBA" * rounds:
        r = projection.project_copy(logs[side], target, side, ProjectorLimits(), quiet)
        record = {
            "side": side,
            "subscriptions": SIDES[side],
            "events_per_s": r.events_per_s,
            "cpu_us_per_event": r.cpu_seconds / r.events * 1e6,
            "other_busy_cores": r.other_busy_cores,
            "events": r.events,
            "notifications": decided(target),
        }
        records.append(record)
        print(
            f"  {side} ({SIDES[side]:,} subscriptions): {record['events_per_s']:,.0f} events/s,"
            f" {record['cpu_us_per_event']:,.0f} µs CPU/event, {record['notifications']:,}"
            f" notifications, others {record['other_busy_cores']:.2f} cores",
            flush=True,
        )
        projection.remove_db(target)
    return records


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    base = statistics.median(r["events_per_s"] for r in records if r["side"] == "A")
    for side, count in SIDES.items():
        mine = [r for r in records if r["side"] == side]
        rate = statistics.median(r["events_per_s"] for r in mine)
        rows.append(
            {
                "side": side,
                "subscriptions": count,
                "events_per_s": rate,
                "cpu_us_per_event": statistics.median(r["cpu_us_per_event"] for r in mine),
                "notifications": mine[0]["notifications"],
                "over_none": rate / base,
                "runs": [r["events_per_s"] for r in mine],
                "other_busy_cores": max(r["other_busy_cores"] for r in mine),
            }
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Projection with notification subscriptions, {results['date']}",
        "",
        "Written by `python bench/notify_cost.py`; how and why: bench/README.md, *What"
        " subscriptions cost the projector*. Raw numbers: [notify-cost.json]"
        f"(notify-cost.json). Code: {results['code']}. Log: {results['events']:,} platform"
        f" events then {results['checks']:,} check events; A B C C B A, {results['rounds']}"
        " times, a fresh copy of the log each run, default projector limits.",
        "",
        "| side | subscriptions | events/s (median) | speed / none | CPU µs/event"
        " | notifications decided | runs (events/s) | others' CPU (max, cores) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        runs = ", ".join(f"{v:,.0f}" for v in r["runs"])
        lines.append(
            f"| {r['side']} | {r['subscriptions']:,} | {r['events_per_s']:,.0f} |"
            f" {r['over_none']:.3f} | {r['cpu_us_per_event']:,.0f} | {r['notifications']:,} |"
            f" {runs} | {r['other_busy_cores']:.2f} |"
        )
    b = next(r for r in results["rows"] if r["side"] == "B")["over_none"]
    verdict = "met" if b >= TARGET else "MISSED"
    lines += ["", f"Target: 100 subscriptions within 5% of none: {b:.3f}, {verdict}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=30_000, help="platform events in the log")
    p.add_argument("--checks", type=int, default=10_000, help="check events after them")
    p.add_argument("--rounds", type=int, default=2, help="repeats of A B C C B A")
    p.add_argument("--quiet-wait", type=float, default=30.0, help="seconds to wait for quiet")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-notify-cost-"))
    try:
        code = servers.copy_source(work / "source", None)  # what the report names
        logs = prepare(work, args.events, args.checks)
        records = run(logs, work, args.rounds, args.quiet_wait)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": code,
        "events": args.events,
        "checks": args.checks,
        "rounds": args.rounds,
        "rows": summarise(records),
        "records": records,
    }
    servers.write_results(RESULTS, results, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
