"""Projection benchmark: how fast the projector turns the delivery log into the graph.

Three measurements (the issue's), each a part that can be run alone:

- ``--throughput``: a log pre-filled through the store's real append path
  (``SQLiteStore.append`` of 500-event batch deliveries) is projected by
  ``Projector(store).run_until_caught_up()`` in this process, on a fresh copy of the
  pre-filled file for every repeat, with the default ``ProjectorLimits`` and two other
  batch sizes. Target: >= 5,000 events/s in one process.
- ``--lag``: ``embrasure serve`` (receiver and projector in one process, as users run
  it) takes 100-event batches ten times a second (1,000 events/s, paced by the clock,
  open loop) over HTTP on 127.0.0.1; every delivery's lag is the time from its receipt
  (the server's ``received_at``) until ``GET /api/v1/deliveries/{id}`` no longer says
  ``accepted``. Target: lag p99 < 1 s.
- ``--reproject N``: a log of N events is pre-filled, then ``embrasure reproject`` (the
  CLI) rebuilds the graph from it; the fill, the rebuild and the file sizes are reported.

``--backends`` measures SQLite beside PostgreSQL instead: ``embrasure project`` with 1 and
2 processes over a pre-filled log (bench/backends.py).

``--profile`` samples a throughput run with py-spy and times the projector's SQL per
table, to say where the time goes.

The workload is a platform, not one event repeated: 500 Spark jobs in 50 Airflow DAGs of
10 chained tasks (task k reads task k-1's output), each job writing one table and reading
its upstream table plus one of 5 rotating source tables: about 3,050 datasets, 3,500
dataset edges and 12,000 column edges, which every run names again. Every event is the
~4.7 KB RunEvent of bench/events.py (parent facet, sql facet, schema facets on every
dataset, columnLineage over 8 fields); every run sends a START and a COMPLETE, both
complete events (the heavier case: Spark sends datasets and column lineage on START too),
and a delivery carries the STARTs of one chunk of runs and the COMPLETEs of the previous.

The embrasure package is copied at the start and every child process (the server, the
CLI, the profiled run) imports that copy, so one run measures one version while people
edit the working tree; this process imports it before that, at start-up.

Run ``python bench/projection.py`` (all parts, about 30 minutes with the 100k reprojection;
writes bench/results/projection.{md,json}, merging with the parts already there) or
``python bench/projection.py --quick`` (small sizes, for a smoke test; writes under
bench/results/tmp/). Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import hashlib
import heapq
import itertools
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import servers
from events import run_event

from embrasure.model import DeliveryDraft, utc_now
from embrasure.projector import worker
from embrasure.projector.worker import Projector, ProjectorLimits
from embrasure.store import sqlite_graph
from embrasure.store.sqlite import SQLiteStore

# The one module this harness imports that moved in the package per stage (the others
# kept their paths), so that --rev measures either side of it (bench/ab.py).
tune_gc: Callable[[], None] = servers.moved("embrasure.cli.main", "embrasure.cli").tune_gc

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
# Set for the harness's re-run of itself on the copied package (see ``main``).
WORK_ENV = "EMBRASURE_BENCH_WORK"
CODE_ENV = "EMBRASURE_BENCH_CODE"

THROUGHPUT_TARGET = 5_000.0  # events/s projected in one process
LAG_TARGET_S = 1.0  # p99 at 1,000 events/s
LAG_RATE = 1_000  # events/s offered

# -- the platform ---------------------------------------------------------------------

JOBS = 500  # bench/events.py names job i "etl.job_{i % 500}": one template per job
CHAIN = 10  # tasks per Airflow DAG; task k reads task k-1's output
ROTATING = 5  # source tables a job's second input rotates through, run after run
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
RUN_ID_BASE = 0x0190_0000_0000_7000_8000_0000_0000_0000  # UUIDv7-shaped, as events.py
DAG_RUN_BASE = 0x0190_0000_0000_7000_9000_0000_0000_0000


def _job_template(job: int, variant: int) -> dict[str, Any]:
    """bench/events.py's event for ``job``, with its inputs rewired into the platform:
    input 0 is the upstream task's output (or a raw feed for a DAG's first task) with the
    upstream's own schema; input 1 is one of the job's rotating source tables."""
    event = run_event(job)
    first, second = event["inputs"]
    output = event["outputs"][0]
    renamed = {second["name"]: f"analytics.raw.source_{job * ROTATING + variant}"}
    upstream = job % CHAIN != 0
    if upstream:
        renamed[first["name"]] = f"analytics.public.target_{job - 1}"
        # The upstream wrote its table with the same 8-column schema as this job's output.
        first["facets"]["schema"] = output["facets"]["schema"]
    else:
        renamed[first["name"]] = f"analytics.raw.feed_{job // CHAIN}"
    for dataset in (first, second):
        dataset["name"] = renamed[dataset["name"]]
    for column in output["facets"]["columnLineage"]["fields"].values():
        for source in column["inputFields"]:
            source["name"] = renamed[source["name"]]
            if upstream and source["field"].startswith("s0_"):
                source["field"] = "out_" + source["field"].removeprefix("s0_")
    event["run"]["facets"]["parent"]["job"]["name"] = f"dag_{job // CHAIN}"
    return event


@dataclasses.dataclass
class Platform:
    """Builds run ``r``'s START or COMPLETE event from per-job templates (building each
    event from scratch costs ~300 µs; a shallow copy of a template ~5 µs)."""

    templates: dict[tuple[int, int], dict[str, Any]] = dataclasses.field(default_factory=dict)

    def event(self, run: int, event_type: str) -> dict[str, Any]:
        job, cycle = run % JOBS, run // JOBS
        key = (job, cycle % ROTATING)
        template = self.templates.get(key)
        if template is None:
            template = self.templates[key] = _job_template(*key)
        event = dict(template)
        event["eventType"] = event_type
        event["eventTime"] = _event_time(run, event_type)
        parent = dict(template["run"]["facets"]["parent"])
        parent["run"] = {"runId": str(uuid.UUID(int=DAG_RUN_BASE | (cycle << 16) | job // CHAIN))}
        event["run"] = {
            "runId": str(uuid.UUID(int=RUN_ID_BASE | run)),
            "facets": {"parent": parent},
        }
        return event


def _event_time(run: int, event_type: str) -> str:
    # Every job runs hourly, a few seconds apart; a run lasts 30 s to a little over 2 min.
    job, cycle = run % JOBS, run // JOBS
    seconds = cycle * 3600 + job * 7 + (0 if event_type == "START" else 30 + run % 97)
    moment = EPOCH + timedelta(seconds=seconds, milliseconds=run % 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def delivery_plan(
    first_run: int, events: int, per_delivery: int
) -> Iterator[list[tuple[int, str]]]:
    """(run, eventType) per item of each delivery: a delivery holds the STARTs of one chunk
    of runs and the COMPLETEs of the chunk before, interleaved, so a run's two events
    land in consecutive deliveries (and usually in different projection transactions)."""
    half = per_delivery // 2
    runs = events // 2
    chunks = -(-runs // half)
    for chunk in range(chunks + 1):
        starts = range(first_run + chunk * half, first_run + min((chunk + 1) * half, runs))
        completes = range(first_run + (chunk - 1) * half, first_run + min(chunk * half, runs))
        if chunk == chunks:
            starts = range(0)
        if chunk == 0:
            completes = range(0)
        items: list[tuple[int, str]] = []
        for s, c in itertools.zip_longest(starts, completes):
            if s is not None:
                items.append((s, "START"))
            if c is not None:
                items.append((c, "COMPLETE"))
        yield items


def batch_bodies(
    platform_: Platform, first_run: int, events: int, per_delivery: int
) -> Iterator[tuple[bytes, int]]:
    """The deliveries' bodies (JSON arrays, as producers send them) and item counts."""
    for items in delivery_plan(first_run, events, per_delivery):
        yield orjson.dumps([platform_.event(run, kind) for run, kind in items]), len(items)


# -- files and processes --------------------------------------------------------------


def db_files(path: Path) -> list[Path]:
    return servers.sqlite_files(path)


def db_size(path: Path) -> int:
    return sum(p.stat().st_size for p in db_files(path) if p.exists())


def remove_db(path: Path) -> None:
    for p in db_files(path):
        p.unlink(missing_ok=True)


def checkpoint(path: Path) -> None:
    """Fold each file's WAL into it, so that copying the files copies the DB."""
    for file in (path, Path(f"{path}-graph")):
        if file.exists():
            conn = sqlite3.connect(file)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()


def copy_db(source: Path, target: Path) -> None:
    remove_db(target)
    shutil.copyfile(source, target)
    if Path(f"{source}-graph").exists():  # the graph's file (migration 17 on)
        shutil.copyfile(f"{source}-graph", f"{target}-graph")


def child_env(source: Path) -> dict[str, str]:
    # PYTHONPATH comes before the editable install's import hook.
    path = [str(source), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    # utime and stime are fields 14 and 15 of /proc/PID/stat, after the ")" of the name.
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def system_busy_seconds() -> float:
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait_s: float = 90.0, threshold_cores: float = 0.3) -> float:
    """Wait (at most ``max_wait_s``) until the rest of the machine uses under
    ``threshold_cores``; return the seconds waited. The machine is shared: a measurement
    taken while someone's test suite runs measures their suite too."""
    start = time.monotonic()
    while time.monotonic() - start < max_wait_s:
        before = system_busy_seconds()
        time.sleep(1.0)
        if system_busy_seconds() - before < threshold_cores:
            break
    return time.monotonic() - start


# -- pre-filling a log ----------------------------------------------------------------


@dataclasses.dataclass
class Fill:
    events: int
    deliveries: int
    seconds: float
    body_bytes: int
    db_bytes: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def prefill(path: Path, events: int, per_delivery: int = 500, progress: bool = False) -> Fill:
    """Append ``events`` events to a new log through ``SQLiteStore.append``, one delivery
    per call (one durable commit each, like separate requests), as the receiver would."""
    remove_db(path)
    platform_ = Platform()
    store = SQLiteStore(str(path))
    started = time.perf_counter()
    deliveries = body_bytes = done = 0
    try:
        for body, count in batch_bodies(platform_, 0, events, per_delivery):
            digest = hashlib.sha256(body).hexdigest()
            draft = DeliveryDraft("default", None, digest, body, "batch", count, (), utc_now())
            store.append([draft])
            deliveries += 1
            body_bytes += len(body)
            done += count
            if progress and deliveries % 200 == 0:
                rate = done / (time.perf_counter() - started)
                print(f"  filled {done:,} events ({rate:,.0f} events/s)", flush=True)
    finally:
        store.close()
    seconds = time.perf_counter() - started
    checkpoint(path)
    return Fill(events, deliveries, seconds, body_bytes, db_size(path))


# -- throughput -----------------------------------------------------------------------


@dataclasses.dataclass
class ThroughputRun:
    config: str
    events: int
    seconds: float
    cpu_seconds: float
    other_busy_cores: float  # the rest of the machine meanwhile (it is shared)

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def item_outcomes(path: Path) -> dict[str, int]:
    conn = servers.sqlite_reader(path)
    try:
        generation = conn.execute("SELECT generation FROM graph_meta").fetchone()[0]
        # The deliveries' counts, not the items' rows: from graph version 10 a plain
        # projected item has none (docs/architecture.md#storage).
        sums = conn.execute(
            f"SELECT SUM(projected), SUM(quarantined) FROM g{generation}_deliveries"
        ).fetchone()
        return {o: int(n) for o, n in zip(("projected", "quarantined"), sums, strict=True) if n}
    finally:
        conn.close()


def own_cpu_seconds() -> float:
    """CPU of this process and of its children waited for: a projector taking turns
    (projector/turns.py) has its partner process's counted with its own."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def project_copy(
    source: Path, target: Path, config: str, limits: ProjectorLimits, quiet_wait_s: float = 90.0
) -> ThroughputRun:
    """Project a fresh copy of the pre-filled log with ``limits``; check every item."""
    copy_db(source, target)
    wait_for_quiet(quiet_wait_s)
    store = SQLiteStore(str(target))
    try:
        busy, cpu, started = system_busy_seconds(), own_cpu_seconds(), time.perf_counter()
        Projector(store, limits).run_until_caught_up()
        seconds = time.perf_counter() - started
        cpu = own_cpu_seconds() - cpu
        other = max(0.0, (system_busy_seconds() - busy - cpu) / seconds)
    finally:
        store.close()
    outcomes = item_outcomes(target)
    if set(outcomes) != {"projected"}:
        raise RuntimeError(f"{config}: items were not all projected: {outcomes}")
    return ThroughputRun(config, outcomes["projected"], seconds, cpu, other)


THROUGHPUT_CONFIGS = {
    # name → limits. Deliveries are ~2.35 MB (500 events), so each of these ends a
    # transaction on its event bound (the default: 10,000 events, 64 MB).
    "default": ProjectorLimits(),
    "2,000 events per tx (the default before)": ProjectorLimits(
        batch_events=2_000, batch_deliveries=64, batch_bytes=16 * 2**20
    ),
    "5,000 events per tx": ProjectorLimits(batch_events=5_000, batch_bytes=64 * 2**20),
    "20,000 events per tx": ProjectorLimits(batch_events=20_000, batch_bytes=128 * 2**20),
}
TURNS = "two processes taking turns (`--projector-processes 2`)"
if "processes" in {f.name for f in dataclasses.fields(ProjectorLimits)}:  # not in a baseline
    THROUGHPUT_CONFIGS[TURNS] = ProjectorLimits(processes=2)


def prepare_log(work: Path, events: int) -> tuple[Path, Fill]:
    """The pre-filled log that the throughput, lag and profile parts start from."""
    log_db = work / "throughput-log.db"
    print(f"pre-filling {events:,} events", flush=True)
    fill = prefill(log_db, events)
    print(f"  {fill.events_per_s:,.0f} events/s, {fill.db_bytes / 2**20:,.0f} MiB", flush=True)
    return log_db, fill


def run_throughput(
    work: Path, log_db: Path, fill: Fill, repeats: int, configs: Sequence[str]
) -> tuple[dict[str, Any], Path]:
    """Medians over ``repeats`` interleaved rounds of every config; returns the results
    and a projected copy (the lag test starts its server on it)."""
    runs: list[ThroughputRun] = []
    projected = work / "throughput-projected.db"
    for round_ in range(repeats):
        for config in configs:
            run = project_copy(log_db, projected, config, THROUGHPUT_CONFIGS[config])
            runs.append(run)
            print(
                f"  round {round_ + 1} {config}: {run.events_per_s:,.0f} events/s "
                f"({run.seconds:.1f} s, CPU {run.cpu_seconds:.1f} s, "
                f"others {run.other_busy_cores:.2f} cores)",
                flush=True,
            )
    checkpoint(projected)
    summary: dict[str, dict[str, Any]] = {}
    for config in configs:
        mine = [r for r in runs if r.config == config]
        rates = [r.events_per_s for r in mine]
        summary[config] = {
            "median_events_per_s": statistics.median(rates),
            "runs_events_per_s": rates,
            "median_seconds": statistics.median(r.seconds for r in mine),
            "cpu_share": statistics.median(r.cpu_seconds / r.seconds for r in mine),
            "max_other_busy_cores": max(r.other_busy_cores for r in mine),
        }
    default = summary[configs[0]]["median_events_per_s"]
    return {
        "events": fill.events,
        "deliveries": fill.deliveries,
        "repeats": repeats,
        "fill": dataclasses.asdict(fill) | {"events_per_s": fill.events_per_s},
        "configs": summary,
        "target_events_per_s": THROUGHPUT_TARGET,
        "met": default >= THROUGHPUT_TARGET,
        "ratio_to_target": default / THROUGHPUT_TARGET,
    }, projected


# -- lag under steady ingest ----------------------------------------------------------


@dataclasses.dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; SIGKILL only if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(work: Path, source: Path, db: Path, projector: bool = True) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "embrasure", "serve", "--db", f"sqlite:///{db}"]
    argv += ["--port", str(port), "--log-level", "warning"]
    argv += [] if projector else ["--no-projector"]
    log_path = work / f"server-{port}.log"
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=child_env(source)
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited early:\n{log_path.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"the server did not become healthy:\n{log_path.read_text()}")


@dataclasses.dataclass
class Sent:
    """One POST of the load: planned, sent and acknowledged wall-clock times."""

    index: int
    planned: float
    sent: float = 0.0
    acked: float = 0.0
    status: int = 0
    delivery_id: str | None = None
    error: str | None = None


@dataclasses.dataclass
class Seen:
    """When the watcher first saw a delivery's state leave ``accepted``."""

    at: float
    state: str
    received_at: float


def parse_utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Watcher:
    """Polls only the OLDEST acknowledged delivery not yet seen projected, every 50 ms.

    The projector takes deliveries in log order, and delivery ids (ULIDs, made in commit
    order) sort in log order, so when the oldest one leaves ``accepted`` the next is
    asked at once, and so on: every delivery's moment is seen within one interval, at
    about one GET per delivery plus 20 per second, which the server hardly notices.
    """

    def __init__(self, client: httpx.AsyncClient, interval: float = 0.05) -> None:
        self.client = client
        self.interval = interval
        self.pending: list[str] = []  # a heap of delivery ids
        self.seen: dict[str, Seen] = {}
        self.backlog: list[tuple[float, int]] = []  # (time, acked deliveries unprojected)
        self.errors: Counter[str] = Counter()

    def add(self, delivery_id: str) -> None:
        heapq.heappush(self.pending, delivery_id)

    async def _check_oldest(self) -> bool:
        """True when the oldest pending delivery has left ``accepted`` (and was popped)."""
        delivery_id = self.pending[0]
        try:
            response = await self.client.get(f"/api/v1/deliveries/{delivery_id}")
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] += 1
            return False
        if response.status_code != 200:
            self.errors[f"HTTP {response.status_code}"] += 1
            return False
        view = response.json()
        if view["state"] == "accepted":
            return False
        heapq.heappop(self.pending)
        self.seen[delivery_id] = Seen(time.time(), view["state"], parse_utc(view["received_at"]))
        return True

    async def run(self, until: Callable[[], bool]) -> None:
        next_tick = time.monotonic()
        while not until():
            while self.pending and await self._check_oldest():
                pass
            self.backlog.append((time.time(), len(self.pending)))
            next_tick += self.interval
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))


async def _post(client: httpx.AsyncClient, sent: Sent, body: bytes, watcher: Watcher) -> None:
    sent.sent = time.time()
    try:
        response = await client.post(
            "/api/v1/lineage/batch", content=body, headers={"content-type": "application/json"}
        )
    except httpx.HTTPError as exc:
        sent.error = type(exc).__name__
        return
    sent.acked = time.time()
    sent.status = response.status_code
    if response.status_code == 202:
        sent.delivery_id = response.json()["delivery_id"]
        watcher.add(sent.delivery_id)


async def drive_load(
    url: str, bodies: Sequence[bytes], per_second: float, drain_s: float
) -> tuple[list[Sent], Watcher, float]:
    """Post ``bodies`` at ``per_second``, each at its planned time whatever the earlier
    ones are doing (open loop: a slow server gets late answers, not a slower offer),
    then watch until every acknowledged delivery is seen projected or ``drain_s`` pass
    after the last post. Returns the posts, the watcher and the load's start time."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with (
        httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client,
        httpx.AsyncClient(base_url=url, timeout=30) as watch_client,
    ):
        watcher = Watcher(watch_client)
        start = time.time() + 0.2
        posts = [Sent(i, start + i / per_second) for i in range(len(bodies))]
        deadline = [float("inf")]  # set when the last post is answered

        def done() -> bool:
            return time.time() > deadline[0] or (deadline[0] < float("inf") and not watcher.pending)

        watch_task = asyncio.create_task(watcher.run(done))
        tasks = []
        for sent, body in zip(posts, bodies, strict=True):
            await asyncio.sleep(max(0.0, sent.planned - time.time()))
            tasks.append(asyncio.create_task(_post(client, sent, body, watcher)))
        await asyncio.gather(*tasks)
        deadline[0] = time.time() + drain_s
        await watch_task
    return posts, watcher, start


def _lag_summary(
    posts: Sequence[Sent], watcher: Watcher, window: tuple[float, float], batch: int
) -> dict[str, Any]:
    """Lags and ingest figures of the posts planned inside the measured window."""
    measured = [p for p in posts if window[0] <= p.planned < window[1]]
    duration = window[1] - window[0]
    acked = [p for p in measured if p.status == 202 and p.delivery_id]
    lags, lags_from_ack, unseen = [], [], []
    now = time.time()
    for p in acked:
        assert p.delivery_id is not None
        seen = watcher.seen.get(p.delivery_id)
        if seen is None:
            unseen.append(now - p.acked)
            continue
        lags.append(seen.at - seen.received_at)
        lags_from_ack.append(seen.at - p.acked)
    # A delivery never seen projected has a lag of at least "now - ack": counting it
    # with that lower bound keeps a percentile honest (as a lower bound, flagged).
    all_lags = lags + unseen
    statuses = Counter(str(p.status or p.error) for p in measured if p.status != 202)
    ack_ms = [(p.acked - p.sent) * 1000 for p in acked]
    return {
        "deliveries_offered": len(measured),
        "deliveries_acknowledged": len(acked),
        "events_acknowledged_per_s": len(acked) * batch / duration,
        # Answered inside the window: a 202 that comes a minute late did not keep up.
        "events_acknowledged_in_window_per_s": sum(
            batch for p in acked if window[0] <= p.acked < window[1]
        )
        / duration,
        "offered_events_per_s": len(measured) * batch / duration,
        "non_202": dict(statuses),
        "ack_ms_p50": servers.percentile(ack_ms, 50) if ack_ms else None,
        "ack_ms_p99": servers.percentile(ack_ms, 99) if ack_ms else None,
        "max_send_slip_ms": max(((p.sent - p.planned) * 1000 for p in measured), default=0.0),
        "lag_s_p50": servers.percentile(all_lags, 50) if all_lags else None,
        "lag_s_p99": servers.percentile(all_lags, 99) if all_lags else None,
        "lag_s_max": max(all_lags) if all_lags else None,
        "lag_from_ack_s_p50": servers.percentile(lags_from_ack, 50) if lags_from_ack else None,
        "lag_from_ack_s_p99": servers.percentile(lags_from_ack, 99) if lags_from_ack else None,
        "not_seen_projected": len(unseen),
        "percentiles_are_lower_bounds": bool(unseen),
        "states_seen": dict(Counter(s.state for s in watcher.seen.values())),
    }


def _backlog_by_second(watcher: Watcher, start: float) -> list[int | None]:
    """Acknowledged-but-unprojected deliveries, the maximum in each second of the run;
    None for a second without a sample (the watcher's GET was waiting on the server)."""
    peaks: dict[int, int] = {}
    for at, pending in watcher.backlog:
        second = int(at - start)
        peaks[second] = max(peaks.get(second, 0), pending)
    return [peaks.get(s) for s in range(max(peaks, default=-1) + 1)]


@dataclasses.dataclass
class LoadRun:
    posts: list[Sent]
    watcher: Watcher
    start: float  # wall-clock time of the first planned post
    server_cores: float  # CPU the server used over the run
    machine_cores: float  # CPU the whole machine used (this harness and others included)


def serve_and_load(
    work: Path, source: Path, db: Path, bodies: Sequence[bytes], drain_s: float, projector: bool
) -> LoadRun:
    per_second = LAG_RATE / BATCH
    wait_for_quiet()
    server = start_server(work, source, db, projector)
    try:
        cpu_before = process_cpu_seconds(server.proc.pid)
        busy_before, wall_before = system_busy_seconds(), time.monotonic()
        posts, watcher, start = asyncio.run(drive_load(server.url, bodies, per_second, drain_s))
        wall = time.monotonic() - wall_before
        server_cores = (process_cpu_seconds(server.proc.pid) - cpu_before) / wall
        machine_cores = (system_busy_seconds() - busy_before) / wall
    finally:
        server.stop()
    return LoadRun(posts, watcher, start, server_cores, machine_cores)


BATCH = 100  # events per POST in the lag part


def run_lag(
    work: Path, source: Path, projected: Path, warmup_s: float, measure_s: float, drain_s: float
) -> dict[str, Any]:
    """``embrasure serve`` on a copy of the projected throughput log (so the graph is
    already populated), fed 100-event batches at 10 per second; then, as a control, the
    same load on ``serve --no-projector`` (what ingest alone costs on this machine now)."""
    db = work / "lag.db"
    copy_db(projected, db)
    first_run = item_outcomes(db)["projected"] // 2 + 1  # new runs, after the pre-filled ones
    total = round((warmup_s + measure_s) * LAG_RATE / BATCH)
    plan = batch_bodies(Platform(), first_run, (total + 1) * BATCH, BATCH)
    # The plan's first and last deliveries are half-size (STARTs only, COMPLETEs only).
    bodies = [body for body, _ in itertools.islice(plan, 1, total + 1)]
    print(f"lag: {len(bodies)} batches of {BATCH} at {LAG_RATE // BATCH}/s", flush=True)
    run = serve_and_load(work, source, db, bodies, drain_s, projector=True)
    print("lag: the same load without the projector (control)", flush=True)
    copy_db(projected, db)
    control = serve_and_load(work, source, db, bodies, 0.0, projector=False)

    def window(r: LoadRun) -> tuple[float, float]:
        return (r.start + warmup_s, r.start + warmup_s + measure_s)

    summary = _lag_summary(run.posts, run.watcher, window(run), BATCH)
    ingest_only = _lag_summary(control.posts, control.watcher, window(control), BATCH)
    return {
        "load": f"{BATCH}-event batches, {LAG_RATE // BATCH} per second, one POST per batch "
        "at its planned time (open loop), httpx on asyncio",
        "warmup_s": warmup_s,
        "measured_s": measure_s,
        "graph_before_events": first_run * 2,
        "poll_interval_ms": run.watcher.interval * 1000,
        "watcher_errors": dict(run.watcher.errors),
        "server_cpu_cores": run.server_cores,
        "machine_busy_cores": run.machine_cores,
        "backlog_deliveries_by_second": _backlog_by_second(run.watcher, run.start),
        "target_p99_s": LAG_TARGET_S,
        "met": (
            summary["lag_s_p99"] is not None
            and summary["lag_s_p99"] < LAG_TARGET_S
            and not summary["not_seen_projected"]
            and summary["events_acknowledged_per_s"] >= 0.99 * LAG_RATE
        ),
        **summary,
        "control_no_projector": {
            key: ingest_only[key]
            for key in (
                "events_acknowledged_per_s",
                "non_202",
                "ack_ms_p50",
                "ack_ms_p99",
                "max_send_slip_ms",
            )
        }
        | {"server_cpu_cores": control.server_cores, "machine_busy_cores": control.machine_cores},
    }


# -- reproject ------------------------------------------------------------------------


def _generation_progress(db: Path) -> tuple[int, int] | None:
    """(generation being built, its position) while a reproject runs, if readable."""
    try:
        conn = servers.sqlite_reader(db, timeout=1)
        try:
            served = conn.execute("SELECT generation FROM graph_meta").fetchone()[0]
            row = conn.execute(f"SELECT seq FROM g{served + 1}_position").fetchone()
            return served + 1, int(row[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def run_reproject(work: Path, source: Path, events: int, timeout_s: float) -> dict[str, Any]:
    """Pre-fill ``events`` events, then time ``embrasure reproject --db`` on them."""
    db = work / f"reproject-{events}.db"
    print(f"reproject {events:,}: pre-filling", flush=True)
    fill = prefill(db, events, progress=events >= 100_000)
    print(
        f"  filled in {fill.seconds:,.0f} s ({fill.events_per_s:,.0f} events/s), "
        f"{fill.db_bytes / 2**30:.2f} GiB",
        flush=True,
    )
    argv = [sys.executable, "-m", "embrasure", "reproject", "--db", f"sqlite:///{db}"]
    wait_for_quiet()
    busy_before = system_busy_seconds()
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=work, env=child_env(source)
    )
    progress: list[tuple[float, int]] = []
    timed_out = False
    while proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
            break
        elapsed = time.monotonic() - started
        now = _generation_progress(db)
        if now is not None:
            progress.append((elapsed, now[1]))
            done = now[1] * events / fill.deliveries
            print(f"  {elapsed:,.0f} s: ~{done:,.0f} events ({done / elapsed:,.0f}/s)", flush=True)
        if elapsed > timeout_s:
            proc.kill()  # our own child, by its handle
            proc.wait()
            timed_out = True
    seconds = time.monotonic() - started
    machine_cores = (system_busy_seconds() - busy_before) / seconds
    output = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0 and not timed_out:
        raise RuntimeError(f"embrasure reproject failed ({proc.returncode}):\n{output}")
    size = db_size(db)
    outcomes = {} if timed_out else item_outcomes(db)
    result: dict[str, Any] = {
        "events": events,
        "fill": dataclasses.asdict(fill) | {"events_per_s": fill.events_per_s},
        "reproject_seconds": seconds,
        "reproject_events_per_s": events / seconds,
        "machine_busy_cores": machine_cores,  # the reproject's one core, plus others' work
        "cli_output": output.strip(),
        "db_bytes_after": size,
        "items": outcomes,
        "timed_out": timed_out,
        "progress": progress,
    }
    if timed_out and progress:
        elapsed, position = progress[-1]
        result["partial_events_per_s"] = position * events / fill.deliveries / elapsed
    remove_db(db)
    return result


# -- profile --------------------------------------------------------------------------

# Exclusive attribution of a py-spy sample: its innermost frame that matches a rule (file
# suffix, function or "*"), so that the categories add up to 100%. SQL issued by a merge
# counts as SQL, the merge's own Python as the merge.
PROFILE_RULES: list[tuple[str, str, str]] = [
    ("store/sqlite.py", "*", "store: BEGIN, COMMIT (WAL fsync), generation lookup"),
    ("store/sqlite_graph.py", "read_log", "SQL: read the log"),
    ("store/sqlite_graph.py", "insert_new", "SQL: insert_new (per-row INSERT … ON CONFLICT)"),
    ("store/sqlite_graph.py", "save", "SQL: save (executemany INSERT OR REPLACE)"),
    ("store/sqlite_graph.py", "load", "SQL: load (SELECT … IN (VALUES …))"),
    ("store/sqlite_graph.py", "select_by", "SQL: select_by"),
    ("store/sqlite_graph.py", "*", "SQL: other"),
    ("projector/canonical.py", "event_id", "event identity: canonical JSON + SHA-256"),
    ("projector/graph_rows.py", "dumps", "canonical JSON of facet values"),
    ("projector/facet_schemas.py", "*", "facet schema checks (jsonschema-rs)"),
    ("projector/column_lineage.py", "edge_of", "column edge merges (column_lineage)"),
    ("projector/column_lineage.py", "merge_edges", "column edge merges (column_lineage)"),
    ("projector/column_lineage.py", "*", "column lineage extraction"),
    ("projector/times.py", "*", "eventTime parsing"),
    ("projector/validate.py", "*", "validation (other)"),
    ("projector/pipeline.py", "*", "pipeline (other)"),
    ("projector/worker.py", "split_items", "orjson.loads of delivery bodies"),
    ("projector/graph_rows.py", "*", "contributions (graph_rows)"),
    ("projector/facets.py", "*", "facet merge rules"),
    ("projector/runs.py", "*", "run state rules"),
    ("projector/symlinks.py", "*", "symlink rules"),
    ("projector/worker.py", "*", "worker: merges and row building"),
]
# Inclusive shares of the projector's stages (a sample counts for every stage on its stack).
PROFILE_STAGES = [
    "project_event",
    "event_id",
    "facets_of",
    "check_facets",
    "datasets_of",
    "extract",
    "split_items",
    "merge_edges",
    "_apply_facts",
    "contributions",
    "_merge_jobs",
    "_merge_edges",
    "_merge_run_io",
    "_merge_facets",
    "_merge_columns",
    "_resolve_runs",
    "_resolve_identities",
    "insert_new",
    "save",
    "load",
    "select_by",
    "read_log",
]


def _frame_parts(frame: str) -> tuple[str, str]:
    """``"Class.method (embrasure/x.py:12)"`` → ("method", "embrasure/x.py"); a
    comprehension or closure (``f.<locals>.<listcomp>``) counts as its function ``f``."""
    name, _, rest = frame.partition(" (")
    return name.split(".<locals>")[0].rpartition(".")[2], rest.rpartition(":")[0]


def _category(frames: Sequence[str]) -> str:
    """The category of the innermost run of frames from one file that a rule matches; a
    rule naming a function beats its file's "*" rule anywhere in that run, so that a
    helper (``ColumnEdge.key``) counts for its caller in the same file (``merge_edges``)."""
    parts = [_frame_parts(f) for f in reversed(frames)]
    for _path, group in itertools.groupby(parts, key=lambda part: part[1]):
        names = [name for name, _ in group]
        path = _path
        for function in [*names, "*"]:
            for suffix, rule, label in PROFILE_RULES:
                if path.endswith(suffix) and rule == function:
                    return label
    return "other (interpreter, gc, outside the projector)"


def summarise_profile(raw: Path) -> dict[str, Any]:
    """Shares of the samples taken while the projector ran (start-up left out)."""
    exclusive: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = outside = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames, count = stack.split(";"), int(count_text)
        parts = [_frame_parts(f) for f in frames]
        if not any(name == "run_until_caught_up" for name, _ in parts):
            outside += count  # importing, opening the store
            continue
        total += count
        exclusive[_category(frames)] += count
        names = {name for name, path in parts if path.startswith("embrasure/")}
        for stage in PROFILE_STAGES:
            if stage in names:
                inclusive[stage] += count
        leaf[frames[-1]] += count
    return {
        "samples": total,
        "samples_outside_projection": outside,
        "exclusive": [[k, v / total] for k, v in exclusive.most_common()],
        "inclusive": [[s, inclusive[s] / total] for s in PROFILE_STAGES if inclusive[s]],
        "top_lines": [[k, v / total] for k, v in leaf.most_common(20)],
    }


class SqlTimer:
    """Wall time and calls per (ProjectionTx method, table), by wrapping the SQLite
    transaction's methods in this process only (the profiled child); plus the time in
    the projector's phases, whichever of them this version has (``apply``, or
    ``prepare`` outside the write lock and ``commit`` inside it; reading the log)."""

    METHODS = ("insert_new", "load", "save", "select_by", "delete")
    # Functions the worker module calls through its globals, so that patching the
    # module's name is enough; looked up by name because versions differ.
    PHASES = ("apply", "prepare", "commit")

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.gc_seconds: defaultdict[str, float] = defaultdict(float)
        self.gc_calls: Counter[str] = Counter()
        self._gc_started = 0.0

    def install(self) -> None:
        tx_class = sqlite_graph.SQLiteProjectionTx
        for method in self.METHODS:
            setattr(tx_class, method, self._wrap_table_method(method, getattr(tx_class, method)))
        targets: list[tuple[object, str, str]] = [
            (worker, name, name) for name in self.PHASES if hasattr(worker, name)
        ]
        targets += [(Projector, "step", "step"), (tx_class, "read_log", "read_log")]
        if hasattr(SQLiteStore, "read_log"):  # read before the write lock, where it is
            targets.append((SQLiteStore, "read_log", "read_log"))
        for owner, attribute, label in targets:
            setattr(owner, attribute, self._wrap_plain(label, getattr(owner, attribute)))

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A gc.callbacks hook: the cyclic collector's time, by generation. py-spy shows
        no gc frame (it samples Python frames), so its time hides in the frame that
        allocated when a collection started."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            key = f"gc generation {info['generation']}"
            self.gc_seconds[key] += time.perf_counter() - self._gc_started
            self.gc_calls[key] += 1

    def _wrap_table_method(self, method: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(tx: Any, table: str, *args: Any) -> Any:
            rows = list(args[-1])  # the rows, keys or values: the last argument of each
            started = time.perf_counter()
            try:
                return func(tx, table, *args[:-1], rows)
            finally:
                key = f"{method} {table}"
                self.seconds[key] += time.perf_counter() - started
                self.calls[key] += 1
                self.rows[key] += len(rows)

        return timed

    def _wrap_plain(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started
                self.calls[name] += 1

        return timed

    def as_dict(self, total: float) -> dict[str, Any]:
        sql = {k: v for k, v in self.seconds.items() if " " in k}
        return {
            "total_seconds": total,
            "phases": [[k, v / total] for k, v in self.seconds.items() if " " not in k],
            "sql_share": sum(sql.values()) / total,
            "gc_share": sum(self.gc_seconds.values()) / total,
            "gc": [[k, v / total, self.gc_calls[k]] for k, v in sorted(self.gc_seconds.items())],
            "by_table": [
                [k, v / total, self.calls[k], self.rows[k]]
                for k, v in sorted(sql.items(), key=lambda kv: -kv[1])
            ],
        }


def profile_child(db: Path, out: Path) -> None:
    """Runs in the profiled child process: project ``db`` with SQL and gc timing on."""
    timer = SqlTimer()
    timer.install()
    tune_gc()  # as `embrasure project` runs
    gc.callbacks.append(timer.on_gc)
    store = SQLiteStore(str(db))
    started = time.perf_counter()
    try:
        Projector(store).run_until_caught_up()
    finally:
        store.close()
    total = time.perf_counter() - started
    out.write_bytes(orjson.dumps(timer.as_dict(total)))


def run_profile(work: Path, source: Path, log_db: Path, stacks: Path) -> dict[str, Any]:
    """py-spy (sampling, Python frames) over a child projecting a fresh copy of the
    throughput log with default limits; the same child times its SQL per table."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "py-spy"], check=True)
    db, raw, sql_out = work / "profile.db", work / "profile.txt", work / "profile-sql.json"
    copy_db(log_db, db)
    argv = [py_spy, "record", "--idle", "--format", "raw", "--rate", "250", "--output", str(raw)]
    argv += ["--"]
    argv += [sys.executable, str(Path(__file__).resolve()), "--profile-child", str(db)]
    argv += ["--profile-out", str(sql_out)]
    print("profile: py-spy record of a default-limits projection", flush=True)
    wait_for_quiet()
    subprocess.run(argv, check=True, capture_output=True, cwd=work, env=child_env(source))
    shutil.copyfile(raw, stacks)
    sql = orjson.loads(sql_out.read_bytes())
    return {
        "method": "py-spy record --rate 250 --format raw (Python frames, wall-clock samples "
        "of the projecting thread) of one default-limits projection of the throughput log; "
        "SQL timed per table by wrapping SQLiteProjectionTx's methods in that child "
        "(which slows it a little: its rate is not a measurement)",
        "events_per_s_while_profiled": item_outcomes(db)["projected"] / sql["total_seconds"],
        "py_spy": summarise_profile(raw),
        "sql": sql,
        "raw_stacks": str(stacks),
    }


# -- report ---------------------------------------------------------------------------


def _f(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _throughput_md(t: dict[str, Any]) -> list[str]:
    rows = [
        [
            name,
            _f(c["median_events_per_s"]),
            ", ".join(_f(r) for r in c["runs_events_per_s"]),
            _f(c["median_seconds"], 1),
            _pct(c["cpu_share"]),
            _f(c["max_other_busy_cores"], 2),
        ]
        for name, c in t["configs"].items()
    ]
    fill = t["fill"]
    verdict = "met" if t["met"] else f"MISSED: {t['ratio_to_target']:.2f}x of the target"
    return [
        f"## Projection throughput ({t['run']['date']}, {t['run']['commit']})",
        "",
        f"{t['events']:,} events in {t['deliveries']} deliveries, projected from an empty "
        f"graph on a fresh copy of the pre-filled log, {t['repeats']} interleaved rounds, "
        f"medians. Pre-fill through `SQLiteStore.append`: {_f(fill['events_per_s'])} "
        f"events/s, {fill['db_bytes'] / 2**20:,.0f} MiB.",
        "",
        *table(
            ["limits", "events/s (median)", "runs", "seconds", "CPU", "others busy (max cores)"],
            rows,
        ),
        "",
        f"Target >= {THROUGHPUT_TARGET:,.0f} events/s with the default limits: **{verdict}**.",
        "",
    ]


def _lag_md(lag: dict[str, Any]) -> list[str]:
    bound = " (lower bounds: some deliveries were never seen projected)"
    control = lag["control_no_projector"]
    verdict = "met" if lag["met"] else "MISSED"
    rows = [
        ["offered", f"{_f(lag['offered_events_per_s'])} events/s"],
        ["acknowledged (202), at any time", f"{_f(lag['events_acknowledged_per_s'])} events/s"],
        [
            "acknowledged (202) within the window",
            f"{_f(lag.get('events_acknowledged_in_window_per_s'))} events/s",
        ],
        ["non-202 / errors", str(lag["non_202"] or "none")],
        ["ack latency p50 / p99", f"{_f(lag['ack_ms_p50'], 1)} / {_f(lag['ack_ms_p99'], 1)} ms"],
        ["max send slip", f"{_f(lag['max_send_slip_ms'], 1)} ms"],
        [
            "lag from receipt p50 / p99 / max"
            + (bound if lag["percentiles_are_lower_bounds"] else ""),
            f"{_f(lag['lag_s_p50'], 2)} / {_f(lag['lag_s_p99'], 2)} / {_f(lag['lag_s_max'], 2)} s",
        ],
        [
            "lag from the 202 p50 / p99",
            f"{_f(lag['lag_from_ack_s_p50'], 2)} / {_f(lag['lag_from_ack_s_p99'], 2)} s",
        ],
        ["deliveries never seen projected", str(lag["not_seen_projected"])],
        [
            "server CPU / whole machine busy",
            f"{lag['server_cpu_cores']:.2f} / {lag['machine_busy_cores']:.2f} cores",
        ],
        [
            "control, `serve --no-projector`, same load: acknowledged; ack p50 / p99",
            f"{_f(control['events_acknowledged_per_s'])} events/s; "
            f"{_f(control['ack_ms_p50'], 1)} / {_f(control['ack_ms_p99'], 1)} ms",
        ],
    ]
    backlog = lag["backlog_deliveries_by_second"]
    step = max(1, len(backlog) // 15)
    return [
        f"## Projection lag at {LAG_RATE:,} events/s ({lag['run']['date']}, "
        f"{lag['run']['commit']})",
        "",
        f"`embrasure serve` (receiver + projector in one process) on a copy of the "
        f"projected throughput log ({lag['graph_before_events']:,} events already in the "
        f"graph); load: {lag['load']}; {lag['warmup_s']:.0f} s warm-up, then "
        f"{lag['measured_s']:.0f} s measured. Lag = the moment "
        "`GET /api/v1/deliveries/{id}` first shows a state other than `accepted` minus the "
        "delivery's `received_at`; only the oldest unprojected delivery is polled, every "
        f"{lag['poll_interval_ms']:.0f} ms (resolution).",
        "",
        *table(["measure", "value"], rows),
        "",
        "Acknowledged-but-unprojected deliveries (peak per second, every "
        f"{step} s; ? where the watcher got no answer that second): "
        + ", ".join("?" if b is None else str(b) for b in backlog[::step]),
        "",
        f"Target p99 < {LAG_TARGET_S:.0f} s while ingest keeps up: **{verdict}**.",
        "",
    ]


def _reproject_md(runs: dict[str, Any]) -> list[str]:
    rows = []
    for key in sorted(runs, key=int):
        r = runs[key]
        fill = r["fill"]
        time_text = (
            f"stopped after {_f(r['reproject_seconds'])} s"
            if r["timed_out"]
            else f"{_f(r['reproject_seconds'])} s"
        )
        rate = r.get("partial_events_per_s", r["reproject_events_per_s"])
        rows.append(
            [
                f"{r['events']:,}",
                f"{_f(fill['seconds'])} s ({_f(fill['events_per_s'])}/s)",
                f"{fill['db_bytes'] / 2**30:.2f} GiB",
                time_text,
                _f(rate),
                f"{r['db_bytes_after'] / 2**30:.2f} GiB",
                _f(r.get("machine_busy_cores"), 2),
                r["run"]["date"],
            ]
        )
    return [
        "## Reproject",
        "",
        "A log pre-filled through `SQLiteStore.append` (500-event deliveries, one commit "
        "each), then `embrasure reproject --db sqlite:///…` (the CLI, timed from the "
        "outside, process start included). The served graph before it is empty (the log "
        "was never projected), so dropping the old generation costs nothing here.",
        "",
        *table(
            [
                "events",
                "fill",
                "log on disk",
                "reproject",
                "events/s",
                "DB after",
                "machine busy (cores)",
                "run",
            ],
            rows,
        ),
        "",
    ]


def _profile_md(p: dict[str, Any]) -> list[str]:
    spy, sql = p["py_spy"], p["sql"]
    excl = [[name, _pct(share)] for name, share in spy["exclusive"]]
    incl = [[name, _pct(share)] for name, share in spy["inclusive"]]
    by_table = [
        [name, _pct(share), f"{calls:,}", f"{rows:,}"]
        for name, share, calls, rows in sql["by_table"][:15]
    ]
    return [
        f"## Profile ({p['run']['date']}, {p['run']['commit']})",
        "",
        f"{p['method']}. {spy['samples']:,} samples; "
        f"{_f(p['events_per_s_while_profiled'])} events/s while profiled. Raw stacks: "
        f"`{p['raw_stacks']}` (collapsed: speedscope or flamegraph.pl read it).",
        "",
        "Where the time goes (each sample counted once, by its innermost matching frame):",
        "",
        *table(["category", "share"], excl),
        "",
        "Stages, inclusive (a sample counts for every stage on its stack):",
        "",
        *table(["function", "share"], incl),
        "",
        "Timed in the child, inclusive: "
        + ", ".join(f"`{name}` {_pct(share)}" for name, share in _phases(sql))
        + "; SQL through the transaction's methods "
        f"{_pct(sql['sql_share'])} of the wall time. The cyclic garbage collector: "
        f"{_pct(sql['gc_share'])} of the wall time ("
        + ", ".join(f"{name}: {_pct(share)} in {n:,} runs" for name, share, n in sql["gc"])
        + "), hidden inside the categories above. SQL by method and table:",
        "",
        *table(["call", "share of wall time", "calls", "rows"], by_table),
        "",
    ]


def _phases(sql: dict[str, Any]) -> list[tuple[str, float]]:
    if "phases" in sql:
        return [(name, share) for name, share in sql["phases"]]
    # Results written before phases were timed generically.
    return [("apply", sql["apply_share"]), ("read_log", sql["read_log_share"])]


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Projection benchmark",
        "",
        f"Last updated {m['date']}. Machine: {m['nproc']} CPUs ({m['cpu']}), Python "
        f"{m['python']}, SQLite {m['sqlite']}. Code: {m['commit']}. This machine is shared "
        "and noisy (±30% between runs, ../shared/MEASURED.md). Produced by "
        "`bench/projection.py` (its docstring describes the workload: 500 jobs, ~3,050 "
        "datasets, ~4.7 KB RunEvents with schema, parent, sql and columnLineage facets, "
        "a START and a COMPLETE per run).",
        "",
    ]
    parts = results["parts"]
    if "throughput" in parts:
        lines += _throughput_md(parts["throughput"])
    if "lag" in parts:
        lines += _lag_md(parts["lag"])
    if parts.get("reproject"):
        lines += _reproject_md(parts["reproject"])
    if "profile" in parts:
        lines += _profile_md(parts["profile"])
    return "\n".join(lines)


def print_summary(results: dict[str, Any]) -> None:
    parts = results["parts"]
    print()
    if "throughput" in parts:
        for name, c in parts["throughput"]["configs"].items():
            print(f"throughput {name:<36} {c['median_events_per_s']:>9,.0f} events/s")
    if "lag" in parts:
        lag = parts["lag"]
        print(
            f"lag at {LAG_RATE} events/s: p50 {_f(lag['lag_s_p50'], 2)} s, p99 "
            f"{_f(lag['lag_s_p99'], 2)} s; acknowledged "
            f"{lag['events_acknowledged_per_s']:,.0f} events/s"
        )
    for key, r in sorted(parts.get("reproject", {}).items(), key=lambda kv: int(kv[0])):
        print(
            f"reproject {int(key):>9,} events: {r['reproject_seconds']:,.0f} s "
            f"({r.get('partial_events_per_s', r['reproject_events_per_s']):,.0f} events/s), "
            f"fill {r['fill']['seconds']:,.0f} s, DB {r['db_bytes_after'] / 2**30:.2f} GiB"
        )
    if "profile" in parts:
        for name, share in parts["profile"]["py_spy"]["exclusive"][:10]:
            print(f"profile {_pct(share):>6} {name}")


def save(results: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "projection.json").write_bytes(
        orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n"
    )
    (out_dir / "projection.md").write_text(markdown(results) + "\n")
    print(f"wrote {out_dir / 'projection.md'} and projection.json")


def merged(previous: Path, machine: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
    """This run's parts over the ones already in ``previous`` (each part keeps the date
    and commit it was measured at), so parts can be measured in separate runs."""
    results: dict[str, Any] = {"parts": {}}
    if previous.exists():
        results = json.loads(previous.read_text())
    results["machine"] = machine
    for name, part in parts.items():
        if name == "reproject":
            results["parts"].setdefault("reproject", {}).update(part)
        else:
            results["parts"][name] = part
    return results


# -- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    p.add_argument("--throughput", action="store_true", help="run the throughput part")
    p.add_argument("--lag", action="store_true", help="run the lag part")
    p.add_argument("--profile", action="store_true", help="run the profile part")
    p.add_argument(
        "--reproject",
        type=int,
        action="append",
        metavar="N",
        help="pre-fill N events and time `embrasure reproject` (repeatable)",
    )
    p.add_argument("--events", type=int, help="events in the throughput log")
    p.add_argument("--repeats", type=int, help="throughput rounds")
    p.add_argument("--lag-seconds", type=float, help="measured seconds of the lag part")
    p.add_argument(
        "--reproject-timeout", type=float, default=3600.0, help="stop a reproject after this"
    )
    p.add_argument("--rev", help="measure this git revision (default: the working tree)")
    p.add_argument("--workdir", type=Path, help="where the DB files go (default: a temp dir)")
    p.add_argument(
        "--profile-stacks",
        type=Path,
        default=Path(tempfile.gettempdir()) / "embrasure-projection-profile.txt",
        help="where the profile's raw collapsed stacks are kept (speedscope reads them)",
    )
    p.add_argument("--profile-child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["--backends"]:  # SQLite beside PostgreSQL: bench/backends.py
        import backends

        backends.main(["--part", "projection", *given[1:]])
        return
    args = parse_args(argv)
    if args.profile_child:
        profile_child(args.profile_child, args.profile_out)
    elif WORK_ENV in os.environ:
        measure(args, Path(os.environ[WORK_ENV]))
    else:
        sys.exit(rerun_on_copy(args, sys.argv[1:] if argv is None else list(argv)))


def rerun_on_copy(args: argparse.Namespace, argv: list[str]) -> int:
    """Copy the package, then run this harness again in a child that imports the copy,
    so that every part, in-process ones included, measures the same code; the work
    directory (the copy and every DB file) is removed afterwards, however it ended."""
    work = Path(tempfile.mkdtemp(prefix="embrasure-projection-", dir=args.workdir))
    try:
        code = servers.copy_source(work / "src", args.rev)
        env = child_env(work / "src") | {WORK_ENV: str(work), CODE_ENV: code}
        print(f"measuring {code}; work directory {work}", flush=True)
        return subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *argv], env=env
        ).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, work: Path) -> None:
    source = work / "src"
    imported = Path(worker.__file__).resolve()
    if not imported.is_relative_to(source.resolve()):
        raise RuntimeError(f"embrasure was imported from {imported}, not from the copy")
    everything = not (args.throughput or args.lag or args.profile or args.reproject)
    out_dir = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
    machine = servers.machine_facts(os.environ.get(CODE_ENV, "unknown"))
    run_info = {"date": machine["date"], "commit": machine["commit"]}
    parts: dict[str, Any] = {}
    # The collector settings of `embrasure serve`, `project` and `reproject`, which the
    # in-process throughput part would otherwise run without.
    tune_gc()
    if everything or args.throughput or args.lag or args.profile:
        log_db, fill = prepare_log(work, args.events or (6_000 if args.quick else 20_000))
        configs = list(THROUGHPUT_CONFIGS)
        if not (everything or args.throughput):
            configs, repeats = configs[:1], 1  # the lag part needs one projected copy
        elif args.quick:
            configs, repeats = configs[:1], args.repeats or 1
        else:
            repeats = args.repeats or 3
        projected = log_db  # replaced by a projected copy when one is made
        if everything or args.throughput or args.lag:
            throughput, projected = run_throughput(work, log_db, fill, repeats, configs)
            if everything or args.throughput:
                parts["throughput"] = throughput | {"run": run_info}
        if everything or args.lag:
            measure_s = args.lag_seconds or (5.0 if args.quick else 60.0)
            warmup, drain = (2.0, 30.0) if args.quick else (10.0, 180.0)
            lag = run_lag(work, source, projected, warmup, measure_s, drain)
            parts["lag"] = lag | {"run": run_info}
        if everything or args.profile:
            profile = run_profile(work, source, log_db, args.profile_stacks)
            parts["profile"] = profile | {"run": run_info}
    sizes = args.reproject or ([10_000 if args.quick else 100_000] if everything else [])
    for size in sizes:
        result = run_reproject(work, source, size, args.reproject_timeout)
        parts.setdefault("reproject", {})[str(size)] = result | {"run": run_info}
    results = merged(out_dir / "projection.json", machine, parts)
    print_summary(results)
    save(results, out_dir)


if __name__ == "__main__":
    main()
