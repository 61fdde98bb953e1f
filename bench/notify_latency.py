"""How long a notification takes (issue 43): from the POST of a failing check's event to
its webhook's arrival at a receiver on loopback, through the whole ``embrasure serve``
(receiver, projector, notifier processes) on SQLite.

Each measured event is a check run whose assertion fails for the first time (a cause of
its own). Two phases, each on a fresh server and database:

- idle: the events alone, one every 200 ms;
- under load: the same while wrk sends single events as fast as the receiver takes them
  (bench/ingest_load.py's workload), so the projector has a backlog to work through.

Run with ``--notify-settle-seconds 0``: the default settle time (10 s) is a wait by
design (docs/notifications.md#order) and would be most of the figure; what is left is
the receipt, the projector reaching the event, the sender's poll (every 0.25 s when idle)
and the POST. Results: bench/results/notify-latency.{md,json}. Usage:
``bench/notify_latency.py [--events N]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import servers
from ingest_load import SINGLE, ensure_wrk, event_template, run_wrk
from notify_cost import WAREHOUSE, check_event

from embrasure.notify.listener import WebhookReceiver

RESULTS = Path(__file__).parent / "results" / "notify-latency"
LOAD_SECONDS = 40


class Receiver(WebhookReceiver):
    """Keeps when each notification arrived, by its check's assertion (not verified: the
    benchmark times the delivery, not the receiver's HMAC)."""

    def __init__(self) -> None:
        super().__init__("", verify=False)
        self.arrived_at: dict[str, float] = {}
        self.start()

    def take(self, webhook_id: str, doc: dict[str, Any]) -> None:
        self.arrived_at.setdefault(doc["check"]["assertion"], time.time())


def phase(work: Path, source: Path, name: str, events: int, load: bool) -> dict[str, Any]:
    db = work / f"{name}.db"
    receiver = Receiver()
    subscribed = subprocess.run(
        [sys.executable, "-m", "embrasure", "subscriptions", "add", "--db", f"sqlite:///{db}",
         "--namespace", WAREHOUSE, "--events", "check.failed", "--url", receiver.url],
        capture_output=True, text=True, env=servers.child_env(source), cwd=work,
    )  # fmt: skip
    if subscribed.returncode != 0:
        raise RuntimeError(subscribed.stderr)
    server = servers.start_embrasure(
        work, db, source, projector=True, extra=["--notify-settle-seconds", "0"]
    )
    wrk_result: dict[str, Any] = {}
    try:
        loader = None
        if load:
            template = work / "template.json"
            template.write_bytes(event_template())

            def hammer() -> None:
                run = run_wrk(ensure_wrk(), server.url, SINGLE, LOAD_SECONDS, 3, template)
                wrk_result["events_per_s"] = run.count(202) / run.duration_s

            loader = threading.Thread(target=hammer)
            loader.start()
            time.sleep(3)  # the load under way
        posted: dict[str, float] = {}
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for n in range(events):
                check = f"{name}_{n:04d}"
                body = orjson.dumps(check_event(n, "analytics.orders", check, ok=False))
                posted[check] = time.time()
                reply = client.post(
                    "/api/v1/lineage", content=body, headers={"Content-Type": "application/json"}
                )
                if reply.status_code != 202:
                    raise RuntimeError(f"{reply.status_code}: {reply.text}")
                time.sleep(0.2)
        deadline = time.monotonic() + 180
        while len(receiver.arrived_at) < events and time.monotonic() < deadline:
            time.sleep(0.1)
        if loader is not None:
            loader.join()
    finally:
        server.stop()
        receiver.server.shutdown()
    latencies = sorted(
        receiver.arrived_at[c] - t for c, t in posted.items() if c in receiver.arrived_at
    )
    if len(latencies) < events:
        raise RuntimeError(f"{name}: {events - len(latencies)} notifications did not arrive")
    return {
        "phase": name,
        "events": events,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000,
        "max_ms": latencies[-1] * 1000,
        "load_events_per_s": wrk_result.get("events_per_s"),
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Notification latency, {results['date']}",
        "",
        "Written by `python bench/notify_latency.py`; how and why: bench/README.md, *How long"
        " a notification takes*. Raw numbers: [notify-latency.json](notify-latency.json)."
        f" Code: {results['code']}. `embrasure serve` on SQLite with"
        " `--notify-settle-seconds 0`; from the POST of a failing check's event to the"
        " webhook's arrival on loopback, one event every 200 ms.",
        "",
        "| phase | events | p50 ms | p99 ms | max ms | load (wrk, events/s acknowledged) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        load = f"{r['load_events_per_s']:,.0f}" if r["load_events_per_s"] else "none"
        lines.append(
            f"| {r['phase']} | {r['events']} | {r['p50_ms']:,.0f} | {r['p99_ms']:,.0f} |"
            f" {r['max_ms']:,.0f} | {load} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100, help="measured events per phase")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="embrasure-notify-latency-"))
    source = work / "source"
    code = servers.copy_source(source, None)
    try:
        rows = [
            phase(work, source, "idle", args.events, load=False),
            phase(work, source, "under_load", args.events, load=True),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": code,
        "rows": rows,
    }
    servers.write_results(RESULTS, results, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
