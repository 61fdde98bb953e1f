"""The HTTP server, chosen by measurement (issue 41): Embrasure's receiver alone (no
projector, one process) served by uvicorn with httptools and uvloop, as ``serve`` does,
and by granian (a Rust HTTP server, ASGI interface, one worker, uvloop), the same app and
settings (bench/granian_app.py), on a new SQLite file each run.

wrk with bench/ingest.lua drives both with bench/ingest_load.py's workloads (single
events, 64 connections; 500-event batches, 8 connections), alternated within each repeat
after waiting for a quiet machine; medians of the repeats.

Run: ``.venv/bin/python bench/http_servers.py [--repeats 3]``; writes
bench/results/http-servers.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import servers
from ingest_load import BATCH, SINGLE, ensure_wrk, event_template, run_wrk

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "http-servers"
SERVERS = ("uvicorn", "granian")


def start(kind: str, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    db = work / "embrasure.db"
    port = servers.free_port()
    env = {
        **servers.child_env(BENCH_DIR.parent),
        "EMBRASURE_DB": f"sqlite:///{db}",
        "EMBRASURE_LOG_LEVEL": "warning",
    }
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH_DIR), env["PYTHONPATH"]])
    if kind == "uvicorn":
        argv = [sys.executable, "-m", "embrasure", "serve", "--port", str(port)]
        argv += ["--no-projector", "--single-process"]
    else:
        argv = [str(Path(sys.executable).with_name("granian")), "--interface", "asgi"]
        argv += ["--factory", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        argv += ["--loop", "uvloop", "--no-ws", "--log-level", "warning", "granian_app:app"]
    log = (work / f"{kind}.log").open("wb")
    proc = subprocess.Popen(argv, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{kind} did not start: {(work / f'{kind}.log').read_text()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    wrk = ensure_wrk()
    scratch = Path(tempfile.mkdtemp(prefix="http-servers-"))
    template = scratch / "event-template.json"
    template.write_bytes(event_template())
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for workload in (SINGLE, BATCH):
            for kind in SERVERS:
                waited = servers.wait_for_quiet(10)
                work = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch))
                proc, url = start(kind, work)
                try:
                    run_wrk(wrk, url, workload, 3, 10 + repeat, template)
                    busy0 = servers.cpu_snapshot(proc.pid)
                    run = run_wrk(wrk, url, workload, args.seconds, 20 + repeat, template)
                    busy1 = servers.cpu_snapshot(proc.pid)
                finally:
                    proc.terminate()
                    proc.wait(60)
                events = run.count(202) * workload.events_per_body / run.duration_s
                wall = busy1.wall - busy0.wall
                runs.append(
                    {
                        "repeat": repeat + 1,
                        "workload": workload.name,
                        "server": kind,
                        "events_per_s": events,
                        "p50_ms": run.latency_ms.get("p50"),
                        "p99_ms": run.latency_ms.get("p99"),
                        "non_202": {str(k): v for k, v in run.statuses.items() if k != 202},
                        "server_cpu_cores": (busy1.process - busy0.process) / wall,
                        "waited_for_quiet_s": waited,
                    }
                )
                print(f"[{repeat + 1}] {workload.name:6} {kind:8} {events:9,.0f} events/s")
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "versions": {n: metadata.version(n) for n in ("uvicorn", "granian", "uvloop")},
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {RESULTS.with_suffix('.md')}")
    return 0


def markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    lines = [
        "# uvicorn or granian: the HTTP server, by measurement",
        "",
        f"Run {report['date']} on {report['nproc']} cores, `bench/http_servers.py` "
        f"({', '.join(f'{k} {v}' for k, v in report['versions'].items())}). Embrasure's "
        "receiver alone (no projector, one process, a new SQLite file each run), the same "
        "app and settings under each server; wrk with bench/ingest.lua, single events on "
        "64 connections and 500-event batches on 8; a quiet machine waited for before each "
        "run; medians of the repeats, each repeat alternating the servers.",
        "",
        "| workload | server | events/s (median) | per repeat | p50 / p99 ms | server CPU |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    medians: dict[tuple[str, str], float] = {}
    for workload in ("single", "batch"):
        for kind in SERVERS:
            mine = [r for r in runs if r["workload"] == workload and r["server"] == kind]
            median = statistics.median(r["events_per_s"] for r in mine)
            medians[(workload, kind)] = median
            each = ", ".join(f"{r['events_per_s']:,.0f}" for r in mine)
            p50 = statistics.median(r["p50_ms"] for r in mine)
            p99 = statistics.median(r["p99_ms"] for r in mine)
            cpu = statistics.median(r["server_cpu_cores"] for r in mine)
            lines.append(
                f"| {workload} | {kind} | {median:,.0f} | {each} | {p50:.1f} / {p99:.1f}"
                f" | {cpu:.2f} |"
            )
    lines += [
        "",
        "| workload | granian / uvicorn |",
        "| --- | --- |",
        *(
            f"| {w} | {medians[(w, 'granian')] / medians[(w, 'uvicorn')]:.2f} |"
            for w in ("single", "batch")
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
