"""The load: unique OpenLineage event bodies, and wrk driving them with bench/ingest.lua.

Every event sent is distinct (its runId and output dataset name carry a counter), so a
deduplicating server never answers from its idempotency table and every body hashes
differently. wrk builds the bodies in Lua, per request; ``batch_bodies`` renders the same
bodies in Python for the parse ceiling.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import orjson
from events import run_event

LUA_SCRIPT = Path(__file__).resolve().parent / "ingest.lua"

# The marker bench/ingest.lua replaces with a 12-hex-digit counter, in the runId and in
# the output dataset's name; both stay valid (a UUID, a table name) after substitution.
MARK = "@@U@@"
TEMPLATE_EVENT = 7  # any events.run_event number: one realistic ~4.7 KB COMPLETE event


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    path: str
    events_per_body: int
    connections: int
    threads: int
    timeout_s: int  # wrk's per-request time-out; a time-out is reported as an error


SINGLE = Workload("single", "/api/v1/lineage", 1, 64, 2, 10)
# Fewer connections: each body is ~2.3 MB, and 8 in flight already keep one process busy.
BATCH = Workload("batch", "/api/v1/lineage/batch", 500, 8, 2, 60)


def event_template() -> bytes:
    """One compact RunEvent with MARK where each event's counter goes."""
    event = run_event(TEMPLATE_EVENT, run_id=f"01900000-0000-7000-8000-{MARK}")
    event["outputs"][0]["name"] = f"analytics.public.target_{MARK}"
    body = orjson.dumps(event)
    assert body.count(MARK.encode()) == 2, "the marker must not occur in the event itself"
    return body


def event_id(seed: int, thread: int, seq: int) -> bytes:
    """The counter bench/ingest.lua writes: seed | wrk thread | sequence, 48 bits."""
    return b"%04x%08x" % (seed * 4096 + thread * 256 + seq // 2**32, seq % 2**32)


def batch_bodies(template: bytes, count: int, per_body: int, seed: int) -> list[bytes]:
    """``count`` bodies as wrk thread 0 sends them: JSON arrays of distinct events."""
    parts = template.split(MARK.encode())
    bodies = []
    seq = 0
    for _ in range(count):
        events = []
        for _ in range(per_body):
            seq += 1
            events.append(event_id(seed, 0, seq).join(parts))
        bodies.append(b"[" + b",".join(events) + b"]")
    return bodies


def ensure_wrk() -> str:
    """wrk's path; installs Debian's package when missing (the project installs what it
    needs: nothing is assumed to be installed by hand)."""
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk not found: installing it with apt-get", flush=True)
    install = ["apt-get", "install", "-y", "-qq", "wrk"]
    if subprocess.run(install, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
        subprocess.run(install, check=True, capture_output=True)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk is still not on PATH after apt-get install wrk")
    return found


@dataclasses.dataclass(frozen=True)
class WrkResult:
    duration_s: float
    statuses: dict[int, int]  # every response, by HTTP status
    socket_errors: dict[str, int]  # connect, read, write, timeout
    latency_ms: dict[str, float]  # p50, p90, p99, max, mean
    sample_ids: list[str]  # delivery ids from a few 202 receipts
    wrk_cpu_s: float

    def count(self, status: int) -> int:
        return self.statuses.get(status, 0)


SEEDS = 16  # bench/ingest.lua: the seed is the counter's top 4 bits


def wrk_argv(
    wrk: str,
    url: str,
    workload: Workload,
    seconds: int,
    seed: int,
    template: Path,
    headers: Sequence[str] = (),
) -> list[str]:
    if not 0 <= seed < SEEDS:
        # A wider seed widens the counter past the runId's 12 hex digits: every event
        # is then quarantined, and a server's projector has nothing to do.
        raise ValueError(f"wrk seed {seed} is not in 0-{SEEDS - 1} (bench/ingest.lua)")
    return [
        wrk,
        f"-t{workload.threads}",
        f"-c{workload.connections}",
        f"-d{seconds}s",
        f"--timeout={workload.timeout_s}s",
        "--latency",
        *(f"--header={h}" for h in headers),  # wrk.format sends them with each request
        f"--script={LUA_SCRIPT}",
        url + workload.path,
        "--",
        str(template),
        str(workload.events_per_body),
        str(seed),
    ]


def parse_wrk(stdout: str, wrk_cpu_s: float) -> WrkResult:
    """The WRK_RESULT line that bench/ingest.lua's done() prints."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith("WRK_RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no WRK_RESULT line:\n{stdout}")
    raw = json.loads(line.removeprefix("WRK_RESULT "))
    errors = raw["errors"]
    return WrkResult(
        duration_s=raw["duration_us"] / 1e6,
        statuses={int(k): v for k, v in raw["statuses"].items()},
        # errors["status"] counts HTTP statuses >= 400, which `statuses` already has.
        socket_errors={k: errors[k] for k in ("connect", "read", "write", "timeout")},
        latency_ms={k: v / 1000 for k, v in raw["latency_us"].items()},
        sample_ids=raw["sample_ids"],
        wrk_cpu_s=wrk_cpu_s,
    )


def run_wrk(
    wrk: str,
    url: str,
    workload: Workload,
    seconds: int,
    seed: int,
    template: Path,
    headers: Sequence[str] = (),
) -> WrkResult:
    """One bounded wrk run against ``url`` (a loopback server the harness started);
    ``headers`` ("Name: value") go with every request."""
    argv = wrk_argv(wrk, url, workload, seconds, seed, template, headers)
    # wrk's own CPU: the children's rusage grows by it once it has been waited for.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return parse_wrk(proc.stdout, cpu)
