"""Soak (issue 7): mixed ingest and queries against one `embrasure serve` (receiver and
projector, SQLite) for ``--seconds`` (600 by default), its resident memory sampled every
few seconds. The question is not speed but whether memory settles: the report compares
the RSS of the first and last minutes and fits a slope to the second half.

Load: ``--ingest-clients`` clients each POST a batch of 20 RunEvents (bench/events.py,
~4.7 KB each, new runs every time over a few hundred tables) then pause ``--pause``
seconds; ``--query-clients`` clients cycle through lineage, column lineage, impact,
search, runs, deliveries, overview and /metrics on the tables the events name.

    .venv/bin/python bench/soak.py                 # 10 minutes; writes bench/results/soak.*
    .venv/bin/python bench/soak.py --seconds 60    # a short look (bench/results/tmp/)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from events import run_event
from servers import (
    copy_source,
    machine_facts,
    memory_kib,
    percentile,
    start_embrasure,
)

RESULTS = Path(__file__).resolve().parent / "results"
JSON_HEADERS = {"Content-Type": "application/json"}
TABLE_NS = "postgres://warehouse:5432"


def queries(n: int) -> tuple[str, str, dict[str, Any]]:
    """The n-th query of the cycle: (kind, path, params)."""
    table = f"analytics.public.source_{n % 500}"
    field = f"s0_col_{n % 8}"
    cycle: list[tuple[str, str, dict[str, Any]]] = [
        ("lineage", "/api/v1/lineage", {"namespace": TABLE_NS, "name": table, "depth": 5}),
        (
            "column_lineage",
            "/api/v1/column-lineage",
            {"namespace": TABLE_NS, "name": table, "field": field, "depth": 5},
        ),
        ("impact", "/api/v1/impact", {"namespace": TABLE_NS, "name": table, "depth": 5}),
        ("search", "/api/v1/search", {"q": f"source_{n % 50}"}),
        ("deliveries", "/api/v1/deliveries", {"limit": 50}),
        ("overview", "/api/v1/overview", {}),
        ("metrics", "/metrics", {}),
    ]
    return cycle[n % len(cycle)]


class Soak:
    def __init__(self, url: str, seconds: float, pause: float) -> None:
        self.url = url
        self.deadline = time.monotonic() + seconds
        self.pause = pause
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.latency: dict[str, list[float]] = {}
        self.events = 0
        self._next_event = 0

    def record(self, kind: str, status: int, seconds: float) -> None:
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1
            self.latency.setdefault(kind, []).append(seconds * 1000)

    def ingest(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while time.monotonic() < self.deadline:
                with self.lock:
                    first, self._next_event = self._next_event, self._next_event + 20
                body = orjson.dumps([run_event(first + i) for i in range(20)])
                started = time.perf_counter()
                r = http.post("/api/v1/lineage/batch", content=body, headers=JSON_HEADERS)
                self.record("ingest", r.status_code, time.perf_counter() - started)
                if r.status_code == 202:
                    with self.lock:
                        self.events += 20
                time.sleep(self.pause)

    def query(self, offset: int) -> None:
        n = offset
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while time.monotonic() < self.deadline:
                kind, path, params = queries(n)
                started = time.perf_counter()
                r = http.get(path, params=params)
                self.record(kind, r.status_code, time.perf_counter() - started)
                n += 1


def slope_mib_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per minute."""
    xs, ys = [s[0] for s in samples], [s[1] for s in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--ingest-clients", type=int, default=2)
    parser.add_argument("--query-clients", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.05, help="seconds between batches")
    parser.add_argument("--sample", type=float, default=5, help="seconds between RSS samples")
    args = parser.parse_args()
    out_dir = RESULTS if args.seconds >= 600 else RESULTS / "tmp"
    out_dir.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="embrasure-soak-") as tmp:
        work = Path(tmp)
        code = copy_source(work, None)
        server = start_embrasure(work, work / "soak.db", work, projector=True)
        soak = Soak(server.url, args.seconds, args.pause)
        threads = [threading.Thread(target=soak.ingest) for _ in range(args.ingest_clients)]
        threads += [
            threading.Thread(target=soak.query, args=(i * 3,)) for i in range(args.query_clients)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        samples: list[tuple[float, float]] = []
        while any(t.is_alive() for t in threads):
            rss = memory_kib(server.pid)["VmRSS"] / 1024
            samples.append((time.monotonic() - started, rss))
            print(f"  {samples[-1][0]:6.0f} s  RSS {rss:7.1f} MiB  events {soak.events:,}")
            time.sleep(args.sample)
        for t in threads:
            t.join()
        with httpx.Client(base_url=server.url, timeout=60) as http:
            overview = http.get("/api/v1/overview").json()
        peak = memory_kib(server.pid)["VmHWM"] / 1024
        server.stop()

    minute = [rss for t, rss in samples if 60 <= t < 120] or [samples[0][1]]
    last = [rss for t, rss in samples if t >= samples[-1][0] - 60]
    half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    result = {
        "machine": machine_facts(code),
        "seconds": args.seconds,
        "clients": {"ingest": args.ingest_clients, "query": args.query_clients},
        "events_accepted": soak.events,
        "overview": overview,
        "rss_mib": {
            "second_minute_median": statistics.median(minute),
            "last_minute_median": statistics.median(last),
            "peak": peak,
            "slope_second_half_mib_per_min": slope_mib_per_min(half),
        },
        "statuses": dict(sorted(soak.statuses.items())),
        "latency_ms": {
            k: {"calls": len(v), "p50": percentile(v, 50), "p99": percentile(v, 99)}
            for k, v in sorted(soak.latency.items())
        },
        "samples": samples,
    }
    (out_dir / "soak.json").write_text(json.dumps(result, indent=1))
    (out_dir / "soak.md").write_text(report(result))
    print(report(result))


def report(r: dict[str, Any]) -> str:
    m, rss = r["machine"], r["rss_mib"]
    lines = [
        "# Soak",
        "",
        f"Run {m['date']}. Machine: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, "
        f"SQLite {m['sqlite']}. Code: {m['commit']}. Produced by `bench/soak.py` (its "
        "docstring describes the load).",
        "",
        f"{r['seconds']:.0f} s of {r['clients']['ingest']} ingest and {r['clients']['query']} "
        f"query clients against one `embrasure serve` (receiver + projector, SQLite): "
        f"{r['events_accepted']:,} events accepted; at the end the backlog was "
        f"{r['overview']['backlog']['items']:,} items.",
        "",
        "| RSS | MiB |",
        "|---|---|",
        f"| median, second minute | {rss['second_minute_median']:.1f} |",
        f"| median, last minute | {rss['last_minute_median']:.1f} |",
        f"| peak (VmHWM) | {rss['peak']:.1f} |",
        f"| slope over the second half | {rss['slope_second_half_mib_per_min']:+.2f} MiB/min |",
        "",
        "| calls | count | p50 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for kind, v in r["latency_ms"].items():
        lines.append(f"| {kind} | {v['calls']:,} | {v['p50']:.1f} | {v['p99']:.1f} |")
    lines += ["", "Statuses: " + ", ".join(f"{k}: {n:,}" for k, n in r["statuses"].items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
