"""Producers' benchmark: what a producer sees when it sends to Embrasure.

1. Single events, one per request, to ``POST /api/v1/lineage`` of one `embrasure serve
   --no-projector` (the receiver alone, as bench/ingest.py measures it), sequentially as
   an integration sends them: the real openlineage-python client (pinned in pyproject's
   dev extras) with its sync HttpTransport, beside raw httpx posting the same events
   serialised beforehand, on one keep-alive connection; and, for context, the client's
   AsyncHttpTransport (its default 100 requests in flight). Repeats are interleaved
   (client, httpx, async, client, …) on the same server; every event is distinct (its
   runId), so no answer comes from the idempotency table.
2. A dbt-sized run: 20,002 events (an invocation and 10,000 models, START and COMPLETE
   each, shaped like the corpus's dbt events: tests/producer_events.py) written as JSONL
   and loaded with `embrasure ingest FILE --url` into a fresh `embrasure serve` (receiver
   and projector) per repeat: the time to send every batch (500 events a request), and
   the time until the last one is projected.

Medians of ``--repeats`` (default 3). The machine is shared: each row records the CPU
the rest of the machine used meanwhile ("others busy", in cores), i.e. the whole
machine's busy time less the server's, this process's and its children's.

    .venv/bin/python bench/producers.py            # about 3 minutes
    .venv/bin/python bench/producers.py --quick    # a smoke test, into results/tmp/
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import servers
from openlineage.client.serde import Serde
from openlineage.client.transport.async_http import AsyncHttpConfig, AsyncHttpTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

sys.path.insert(0, str(servers.REPO_DIR / "tests"))  # the events the tests send
import olclient
import producer_events

RESULTS = servers.BENCH_DIR / "results"
SINGLE_ROUTE = "/api/v1/lineage"


def _own_cpu() -> float:
    """CPU seconds of this process and its finished children (the ingest command)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Window:
    """Wall time and the CPU the rest of the machine used over one measurement."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.start = servers.cpu_snapshot(server_pid)
        self.own = _own_cpu()

    def close(self) -> dict[str, float]:
        end = servers.cpu_snapshot(self.pid)
        wall = end.wall - self.start.wall
        ours = (end.process - self.start.process) + (_own_cpu() - self.own)
        others = (end.system_busy - self.start.system_busy) - ours
        return {
            "seconds": wall,
            "server_cores": (end.process - self.start.process) / wall,
            "sender_cpu_s": _own_cpu() - self.own,
            "others_busy_cores": max(0.0, others / wall),
        }


# -- 1. single events ------------------------------------------------------------------------


def _events(n: int) -> list[Any]:
    return [olclient.completed_run(str(uuid.uuid4())) for _ in range(n)]


def run_client(url: str, events: list[Any]) -> None:
    transport = HttpTransport(HttpConfig(url=url))
    client = olclient.client(transport)
    for event in events:
        client.emit(event)  # raises on anything but 2xx
    transport.close()


def run_async_client(url: str, events: list[Any]) -> None:
    transport = AsyncHttpTransport(AsyncHttpConfig(url=url))
    client = olclient.client(transport)
    for event in events:
        client.emit(event)
    if not transport.wait_for_completion(timeout=600):
        raise RuntimeError("the async transport did not finish")
    stats = dict(transport.get_stats())
    transport.close(timeout=10)
    if stats["failed"] or stats["success"] != len(events):
        raise RuntimeError(f"the async transport failed events: {stats}")


def run_httpx(url: str, bodies: list[bytes]) -> None:
    headers = {"Content-Type": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        for body in bodies:
            reply = http.post(SINGLE_ROUTE, content=body)
            if reply.status_code != 202:
                raise RuntimeError(f"{reply.status_code}: {reply.text}")


def single_events(work: Path, source: Path, n: int, repeats: int) -> dict[str, Any]:
    db = work / "single.db"
    server = servers.start_embrasure(work, db, source)
    rows: dict[str, list[dict[str, float]]] = {"client": [], "httpx": [], "async": []}
    try:
        # Warm-up: the server's first requests, the client's imports and pools.
        run_client(server.url, _events(50))
        for _ in range(repeats):
            # The same event shape each time, new runIds; httpx gets them as the client
            # serialises them (Serde.to_json), ready to send.
            raw = [Serde.to_json(event).encode() for event in _events(n)]
            kinds: list[tuple[str, Callable[[], None]]] = [
                ("client", functools.partial(run_client, server.url, _events(n))),
                ("httpx", functools.partial(run_httpx, server.url, raw)),
                ("async", functools.partial(run_async_client, server.url, _events(n))),
            ]
            for kind, run in kinds:
                servers.wait_for_quiet(8)
                window = Window(server.pid)
                run()
                row = window.close()
                row["events_per_s"] = n / row["seconds"]
                row["sender_us_per_event"] = row["sender_cpu_s"] / n * 1e6
                rows[kind].append(row)
                print(f"  {kind:6} {row['events_per_s']:8.0f} events/s", file=sys.stderr)
    finally:
        server.stop()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        stored = conn.execute("SELECT count(*) FROM deliveries").fetchone()
    expected = 50 + 3 * n * repeats
    if stored[0] != expected:
        raise RuntimeError(f"{stored[0]} deliveries stored, {expected} acknowledged")
    return {"events_per_run": n, "runs": rows}


# -- 2. a dbt-sized run ---------------------------------------------------------------------


def dbt_run(work: Path, source: Path, models: int, repeats: int) -> dict[str, Any]:
    path = work / "dbt-ol.jsonl"
    events = producer_events.dbt_sized_run(models)
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    rows = []
    for i in range(repeats):
        db = work / f"dbt-{i}.db"
        server = servers.start_embrasure(work, db, source, projector=True)
        try:
            servers.wait_for_quiet(8)
            window = Window(server.pid)
            env = {**os.environ, "PYTHONPATH": str(source)}
            argv = [sys.executable, "-m", "embrasure", "ingest", str(path), "--url", server.url]
            sent = subprocess.run(
                [*argv, "--no-wait", "--json"], capture_output=True, env=env, cwd=work, check=True
            )
            send_s = time.monotonic() - window.start.wall
            summary = json.loads(sent.stdout)
            if summary["accepted"] != len(events):
                raise RuntimeError(f"ingest: {summary}")
            last = summary["deliveries"][-1]
            while True:  # the projector follows the log in order: the last one is last
                view = httpx.get(f"{server.url}/api/v1/deliveries/{last}", timeout=30).json()
                if view["state"] != "accepted":
                    break
                time.sleep(0.05)
            row = window.close()
            row["send_seconds"] = send_s
            row["events_per_s_projected"] = len(events) / row["seconds"]
            row["events_per_s_sent"] = len(events) / send_s
            rows.append(row)
            print(
                f"  dbt    sent in {send_s:.1f} s, projected in {row['seconds']:.1f} s",
                file=sys.stderr,
            )
        finally:
            server.stop()
    return {"events": len(events), "models": models, "bytes": path.stat().st_size, "runs": rows}


# -- report ------------------------------------------------------------------------------


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report(results: dict[str, Any]) -> str:
    facts = results["machine"]
    single = results["single"]
    n = single["events_per_run"]
    lines = [
        "# Producers' benchmark",
        "",
        f"`bench/producers.py`, {facts['date']}, {facts['commit']}; {facts['nproc']} cores "
        f"({facts['cpu']}), Python {facts['python']}, SQLite {facts['sqlite']}, "
        f"openlineage-python {results['client_version']}. Medians of {results['repeats']} "
        'runs; all runs are in producers.json. The machine is shared: "others busy" is '
        "the CPU the rest of the machine used during each run, in cores (max over the runs).",
        "",
        f"## Single events, one per request ({n:,} distinct events a run)",
        "",
        "To `POST /api/v1/lineage` of one `embrasure serve --no-projector` (SQLite, group "
        "commit, 202 after the fsync), sequentially from one process.",
        "",
        "| sender | events/s (median) | runs | sender CPU per event (µs) | server CPU "
        "(cores) | others busy (cores, max) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    names = {
        "client": "openlineage-python HttpTransport (sync, `client.emit`)",
        "httpx": "raw httpx, the same events serialised beforehand, one connection",
        "async": "openlineage-python AsyncHttpTransport (100 in flight), for context",
    }
    for kind, rows in single["runs"].items():
        runs = ", ".join(f"{r['events_per_s']:.0f}" for r in rows)
        lines.append(
            f"| {names[kind]} | {_median(rows, 'events_per_s'):,.0f} | {runs} | "
            f"{_median(rows, 'sender_us_per_event'):,.0f} | "
            f"{_median(rows, 'server_cores'):.2f} | "
            f"{max(r['others_busy_cores'] for r in rows):.2f} |"
        )
    client = _median(single["runs"]["client"], "events_per_s")
    raw = _median(single["runs"]["httpx"], "events_per_s")
    cost = {k: _median(v, "sender_us_per_event") for k, v in single["runs"].items()}
    lines += [
        "",
        f"The sync client sends {client / raw:.0%} of raw httpx's rate to the same server; "
        f"in the sending process it spends {cost['client']:,.0f} µs of CPU per event "
        f"against httpx's {cost['httpx']:,.0f} (building the event's dicts, "
        "`Serde.to_json`, requests and urllib3), work done on the producer's side. Sent "
        "one at a time, each event waits for its own fsync'd commit: the rate is the "
        "round trip's, not the server's capacity (bench/results/ingest.md, 64 "
        "connections).",
        "",
    ]
    dbt = results["dbt"]
    rows = dbt["runs"]
    lines += [
        f"## A dbt-sized run: {dbt['events']:,} events ({dbt['models']:,} models), "
        f"{dbt['bytes'] / 1e6:.1f} MB of JSONL",
        "",
        "`embrasure ingest FILE --url` (batches of 500 events) into a fresh `embrasure serve` "
        "(receiver and projector in one process, SQLite) per run.",
        "",
        "| measure | median | runs |",
        "|---|---:|---|",
        f"| all batches acknowledged (s) | {_median(rows, 'send_seconds'):.1f} | "
        + ", ".join(f"{r['send_seconds']:.1f}" for r in rows)
        + " |",
        f"| last event projected (s) | {_median(rows, 'seconds'):.1f} | "
        + ", ".join(f"{r['seconds']:.1f}" for r in rows)
        + " |",
        f"| events/s, sent | {_median(rows, 'events_per_s_sent'):,.0f} | "
        + ", ".join(f"{r['events_per_s_sent']:.0f}" for r in rows)
        + " |",
        f"| events/s, projected | {_median(rows, 'events_per_s_projected'):,.0f} | "
        + ", ".join(f"{r['events_per_s_projected']:.0f}" for r in rows)
        + " |",
        f"| others busy (cores, max) | {max(r['others_busy_cores'] for r in rows):.2f} | |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small run, into results/tmp/")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=2000, help="single events per run")
    parser.add_argument("--models", type=int, default=10_000, help="dbt models (2 events each)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.events, args.models = 1, 200, 500
    out = RESULTS / "tmp" if args.quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    from importlib.metadata import version

    with tempfile.TemporaryDirectory(prefix="bench-producers-") as tmp:
        work = Path(tmp)
        code = servers.copy_source(work / "src", None)
        print(f"measuring {code}", file=sys.stderr)
        results: dict[str, Any] = {
            "machine": servers.machine_facts(code),
            "client_version": version("openlineage-python"),
            "repeats": args.repeats,
        }
        results["single"] = single_events(work, work / "src", args.events, args.repeats)
        results["dbt"] = dbt_run(work, work / "src", args.models, args.repeats)
    (out / "producers.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "producers.md").write_text(report(results))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
