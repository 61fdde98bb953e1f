"""Backlog read benchmark: what the receiver's once-a-second overload check costs as the
unprojected log grows (receiver.Backpressure → GraphReader.backlog).

Before migration 5 the backlog was counted over every delivery past the projector's
position (``SCAN_SQL`` below, the old query, kept here as the reference): with no
projector running, or one far behind, that is the whole log, read through its covering
index every second. Now it is two rows of the running totals (log_sql.record_totals) and the
first pending delivery. Both are timed side by side, in one process, on the same SQLite
file, at several log lengths; the answers must agree.

The log is filled through the store's real append path (``SQLiteStore.append``, 1,000
small single-event deliveries per transaction), and nothing is projected, which is the
case the bound exists for.

Run: ``python bench/backlog.py`` (writes bench/results/backlog.{md,json}); ``--quick``
for a smoke test (writes under bench/results/tmp/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from embrasure.model import DeliveryDraft, utc_now
from embrasure.store import Store, open_store

RESULTS = Path(__file__).parent / "results"

SCAN_SQL = """
    SELECT COALESCE(SUM(CASE WHEN item_count > invalid_item_count THEN 1 ELSE 0 END), 0),
        COALESCE(SUM(item_count - invalid_item_count), 0),
        MIN(CASE WHEN item_count > invalid_item_count THEN received_at END),
        COALESCE(SUM(CASE WHEN item_count > invalid_item_count THEN 0 ELSE 1 END), 0)
    FROM deliveries WHERE seq > (SELECT seq FROM g1_position)"""


def fill(store: Store, start: int, count: int) -> None:
    for base in range(start, start + count, 1000):
        drafts = []
        for i in range(base, min(base + 1000, start + count)):
            body = b'{"eventTime":"2026-11-30T00:00:00Z","n":%d}' % i
            drafts.append(
                DeliveryDraft(
                    "bench",
                    None,
                    hashlib.sha256(body).hexdigest(),
                    body,
                    "single",
                    1,
                    (),
                    utc_now(),
                )
            )
        store.append(drafts)


def scan(conn: Any) -> tuple[Any, ...]:
    return tuple(conn.execute(SCAN_SQL).fetchone())


def timed(work: Any, repeats: int) -> tuple[float, Any]:
    samples = []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = work()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]
    out = RESULTS / ("tmp/backlog" if args.quick else "backlog")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/backlog.db")
        filled = 0
        for size in sizes:
            t0 = time.perf_counter()
            fill(store, filled, size - filled)
            fill_s = time.perf_counter() - t0
            filled = size
            with store.reader() as reader:
                now_ms, now = timed(reader.backlog, args.repeats)
                conn = reader.conn  # type: ignore[attr-defined]
                scan_ms, scanned = timed(lambda: scan(conn), args.repeats)  # noqa: B023
            assert now == scanned, (now, scanned)
            rows.append(
                {
                    "deliveries": size,
                    "totals_ms": now_ms,
                    "scan_ms": scan_ms,
                    "ratio": scan_ms / now_ms,
                    "fill_s": fill_s,
                }
            )
            print(
                f"{size:>9,} unprojected deliveries: totals {now_ms:.3f} ms, "
                f"scan {scan_ms:.1f} ms ({scan_ms / now_ms:,.0f}x)",
                flush=True,
            )
        store.close()
    doc = {"date": utc_now(), "loadavg_1min_at_start": load, "repeats": args.repeats, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Backlog read: running totals against the scan they replaced",
        "",
        f"`python bench/backlog.py`, {doc['date']}; medians of {args.repeats} reads each, "
        f"side by side on one SQLite file, nothing projected (the whole log is the "
        f"backlog). 1-minute load average at start: {load:.2f} (2 cores).",
        "",
        "| unprojected deliveries | running totals (now) | scan (before migration 5) | ratio |",
        "|---:|---:|---:|---:|",
        *(
            f"| {r['deliveries']:,} | {r['totals_ms']:.3f} ms | {r['scan_ms']:.1f} ms "
            f"| {r['ratio']:,.0f}x |"
            for r in rows
        ),
        "",
        "The receiver reads the backlog at most once a second (receiver.Backpressure), so the "
        "scan's figure is also the share of a second one core spent on it.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
