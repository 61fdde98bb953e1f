"""The measurements, each run the same way against every target (bench/peers/targets.py).

- ``ingest``: wrk with bench/ingest.lua (bench/ingest_load.py's SINGLE load: 64
  connections, one ~4.7 KB event per POST, every runId and output unique), a warm-up run
  first (a JVM compiles as it goes; Embrasure warms its pools); 2xx answers per second and
  wrk's latency percentiles. Embrasure also takes the BATCH load (500 events a POST),
  which Marquez has no route for. The bytes the database grew by, per event stored.
- ``visibility``: one event POSTed, then its output dataset's lineage asked for until
  the answer shows the event's job writing it: the time from the POST to that answer, idle
  and while wrk keeps 8 connections of other events going.
- ``load_platform`` and ``queries``: bench/query.py's generated platform, POSTed one event
  at a time by 4 clients (Marquez has no batch route), then lineage at depth 5 and 20,
  column lineage of a field, a job's runs: cold (one call per root, first after a
  restart of the server on its database) and warm.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import signal
import statistics
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import query
import servers
from events import run_event
from ingest_load import BATCH, MARK, SINGLE, Workload, WrkResult, parse_wrk, run_wrk, wrk_argv

from peers.peer_api import JSON, Ask, api_of
from peers.targets import Target

BACKGROUND = Workload("background", SINGLE.path, 1, 8, 2, 10)
PROBE_TIMEOUT_S = 60.0
POLL_PAUSE_S = 0.002
CALL_TIMEOUT_S = 300.0
SLOW_CALL_MS = 1000.0
PROBE_NS = "postgres://warehouse:5432"


def _ok(result: WrkResult) -> int:
    return sum(n for status, n in result.statuses.items() if 200 <= status < 300)


def _wrk_summary(result: WrkResult, events_per_body: int) -> dict[str, Any]:
    ok = _ok(result)
    return {
        "events_per_s": ok * events_per_body / result.duration_s,
        "requests_per_s": ok / result.duration_s,
        "seconds": result.duration_s,
        "ok_requests": ok,
        "statuses": {str(k): v for k, v in sorted(result.statuses.items())},
        "socket_errors": {k: v for k, v in result.socket_errors.items() if v},
        "latency_ms": result.latency_ms,
    }


def distinct_jobs_template(template: bytes) -> bytes:
    """The same event with the counter in its job's name too: every event another job
    (the template's events all name one job)."""
    job = orjson.loads(template)["job"]["name"]
    named = f'"name":"{job}"'.encode()
    assert template.count(named) == 1, "the job's name must occur once"
    return template.replace(named, f'"name":"{job}_{MARK}"'.encode())


def _loaded(
    target: Target, wrk: str, workload: Workload, seconds: int, seed: int, template: Path
) -> dict[str, Any]:
    """One wrk run, then the wait until the graph has it and the server is idle; besides
    wrk's 2xx answers a second, the events the server stored a second from the start of
    the load until its process was idle (a server that answers more slowly than the load
    arrives goes on storing what was sent after wrk stops counting)."""
    before = target.events_stored()
    result = run_wrk(wrk, target.url, workload, seconds, seed, template)
    caught_up = target.wait_graph()
    settled = target.settle()
    stored = target.events_stored() - before
    return _wrk_summary(result, workload.events_per_body) | {
        "graph_caught_up_s": round(caught_up, 2),
        "settled_s": round(settled, 2),
        "stored_events": stored,
        # The last second of the settling is the idle one; the projection is not storing
        # (Embrasure's receipts are sent once the delivery is durable).
        "stored_per_s": stored / (result.duration_s + max(0.0, settled - 1.0)),
    }


def ingest(target: Target, wrk: str, template: Path, seconds: int, warmup_s: int) -> dict[str, Any]:
    """The SINGLE load, all events of one job, then every event another job (and BATCH
    for Embrasure); the growth of the database per event stored."""
    empty = target.db_bytes()
    others = servers.busy_cores(1.0)
    warm = _loaded(target, wrk, SINGLE, warmup_s, 1, template)
    before = servers.cpu_snapshot(target.server.pid)
    single = _loaded(target, wrk, SINGLE, seconds, 2, template)
    after = servers.cpu_snapshot(target.server.pid)
    stored = target.events_stored()
    grown = target.db_bytes() - empty
    wall = after.wall - before.wall
    distinct = template.with_name("template-jobs.json")
    distinct.write_bytes(distinct_jobs_template(template.read_bytes()))
    out: dict[str, Any] = {
        "others_busy_cores_before": round(others, 2),
        "machine_busy_cores": round((after.system_busy - before.system_busy) / wall, 2),
        "server_process_cpu_cores": round((after.process - before.process) / wall, 2),
        "warmup": warm,
        "single": single,
        "single_distinct_jobs": _loaded(target, wrk, SINGLE, seconds, 4, distinct),
        "db_empty_bytes": empty,
        "db_grown_bytes": grown,
        "events_stored": stored,
        "bytes_per_event": grown / stored if stored else None,
    }
    if target.kind == "embrasure":
        out["batch"] = _loaded(target, wrk, BATCH, seconds, 3, template)
    return out


# -- time until a posted event is answered ------------------------------------------------


def probe_event(n: int, tag: str) -> tuple[bytes, str, tuple[str, str]]:
    """A unique event: its body, its output dataset's name and its job."""
    event = run_event(n, run_id=str(uuid.uuid4()))
    name = f"analytics.public.visible_{tag}_{n}"
    event["outputs"][0]["name"] = name
    job = event["job"]
    return orjson.dumps(event), name, (job["namespace"], job["name"])


def _probe(client: httpx.Client, target: Target, n: int, tag: str) -> dict[str, float | None]:
    api = api_of(target.kind)
    body, name, job = probe_event(n, tag)
    ask = api.lineage(PROBE_NS, name, 1)
    started = time.perf_counter()
    posted = client.post("/api/v1/lineage", content=body, headers=JSON)
    acked = time.perf_counter()
    if not 200 <= posted.status_code < 300:
        return {
            "ack_ms": (acked - started) * 1000,
            "visible_ms": None,
            "polls": 0,
            "refused": posted.status_code,
        }
    polls = 0
    while time.perf_counter() - started < PROBE_TIMEOUT_S:
        if polls:
            # As a client would poll: a loop without a pause would contend with the
            # projector for Embrasure's GIL and measure that instead.
            time.sleep(POLL_PAUSE_S)
        polls += 1
        answer = client.get(ask.path, params=ask.params)
        if answer.status_code == 200 and api.shows_writer(answer.json(), job):
            visible = time.perf_counter()
            return {
                "ack_ms": (acked - started) * 1000,
                "visible_ms": (visible - started) * 1000,
                "polls": polls,
            }
    return {"ack_ms": (acked - started) * 1000, "visible_ms": None, "polls": polls}


def _percentiles(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50": servers.percentile(values, 50),
        "p90": servers.percentile(values, 90),
        "p99": servers.percentile(values, 99),
        "max": max(values),
        "n": len(values),
    }


def _probes(target: Target, count: int, tag: str) -> dict[str, Any]:
    with httpx.Client(base_url=target.url, timeout=30) as client:
        found = [_probe(client, target, n, tag) for n in range(count)]
    visible = [f["visible_ms"] for f in found if f["visible_ms"] is not None]
    return {
        "visible_ms": _percentiles(visible),
        "ack_ms": _percentiles([f["ack_ms"] for f in found if f["ack_ms"] is not None]),
        "never_visible": count - len(visible),
        # Of those, the POSTs answered with an error (the rest were not in the answer
        # within PROBE_TIMEOUT_S).
        "refused": [f["refused"] for f in found if f.get("refused") is not None],
        "polls_median": statistics.median(f["polls"] or 0 for f in found),
    }


def visibility(target: Target, wrk: str, template: Path, probes: int) -> dict[str, Any]:
    """Idle, then under a background load of 8 wrk connections (stopped with SIGINT, on
    which wrk prints its summary)."""
    idle = _probes(target, probes, "idle")
    argv = wrk_argv(wrk, target.url, BACKGROUND, 600, 5, template)
    load = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(2.0)  # let the load settle first
        loaded = _probes(target, probes, "loaded")
    finally:
        load.send_signal(signal.SIGINT)
        stdout, _ = load.communicate(timeout=60)
    background: dict[str, Any] | None = None
    try:
        background = _wrk_summary(parse_wrk(stdout, 0.0), 1)
    except RuntimeError:
        background = None
    target.wait_graph()
    return {"idle": idle, "under_load": loaded, "background_load": background}


# -- the platform, and the queries on it ---------------------------------------------------


async def _post_singles(url: str, bodies: Sequence[bytes], clients: int) -> Counter[str]:
    statuses: Counter[str] = Counter()
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            body = queue.pop()
            for attempt in range(30):  # as a producer would: 429 / 503 are retried
                response = await client.post("/api/v1/lineage", content=body, headers=JSON)
                if response.status_code not in (429, 503) or attempt == 29:
                    break
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            statuses[str(response.status_code)] += 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=300) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    return statuses


def platform_events(platform: query.Platform) -> list[bytes]:
    """Every event of the platform, one body each, in the platform's stream order."""
    return [orjson.dumps(e) for task in platform.tasks for e in platform.events(task)]


def load_platform(target: Target, bodies: Sequence[bytes], clients: int) -> dict[str, Any]:
    empty = target.db_bytes()
    started = time.monotonic()
    statuses = asyncio.run(_post_singles(target.url, bodies, clients))
    seconds = time.monotonic() - started
    caught_up = target.wait_graph()
    grown = target.db_bytes() - empty
    stored = sum(n for s, n in statuses.items() if s.startswith("2"))
    return {
        "events": len(bodies),
        "clients": clients,
        "seconds": seconds,
        "events_per_s": len(bodies) / seconds,
        "statuses": dict(statuses),
        "graph_caught_up_after_load_s": round(caught_up, 2),
        "visible_after_s": round(seconds + caught_up, 2),
        "db_grown_bytes": grown,
        "bytes_per_event": grown / stored if stored else None,
    }


@dataclasses.dataclass(frozen=True)
class Root:
    """What a question is about: a dataset, one of its fields, or a job."""

    namespace: str
    name: str
    field: str | None = None
    # Marquez names a job whose run has a ParentRunFacet "{parent job}.{job}".
    marquez_name: str | None = None


@dataclasses.dataclass(frozen=True)
class QueryGroup:
    name: str
    title: str
    roots: list[Root]
    depth: int


def query_plan(platform: query.Platform, roots: int = 10) -> list[QueryGroup]:
    """Half hubs (read by many jobs), half tables of the deepest chains; fields of those
    chain tables; jobs that ran more than once. Every dataset by its warehouse name (the
    name its writer uses: Marquez does not resolve symlink aliases the way Embrasure does)."""
    lengths = platform.lengths
    hubs = [Root(query.WAREHOUSE, platform.table(p, lengths[p] - 1)) for p in range(query.HUBS)]
    deep = sorted(range(query.HUBS, len(lengths)), key=lambda p: -lengths[p])[: roots // 2]
    chain = [Root(query.WAREHOUSE, platform.table(p, lengths[p] // 2)) for p in deep]
    datasets = hubs[: roots - len(chain)] + chain
    rng = random.Random(17)
    fields = [
        Root(query.WAREHOUSE, platform.table(p, k), platform.fields(p)[rng.randrange(query.FIELDS)])
        for p in deep
        for k in (lengths[p] // 3, 2 * lengths[p] // 3)
    ][:roots]
    twice = [t for t in platform.tasks if t.index % query.SECOND_RUN_EVERY == query.SECOND_RUN_AT][
        :roots
    ]
    jobs = []
    for t in twice:
        name = platform.job_name(t.p, t.k)
        jobs.append(Root(query.JOB_NS, name, None, f"{platform.dag(t.p)}.{name}"))
    return [
        QueryGroup("lineage_d5", "lineage around a dataset, depth 5", datasets, 5),
        QueryGroup("lineage_d20", "lineage around a dataset, depth 20", datasets, 20),
        QueryGroup("column_lineage", "column lineage of a field, depth 10, both ways", fields, 10),
        QueryGroup("job_runs", "a job's runs (the first page)", jobs, 0),
    ]


def ask_of(target: Target, group: QueryGroup, root: Root) -> Ask:
    api = api_of(target.kind)
    if group.name == "job_runs":
        name = root.name
        if target.kind == "marquez" and root.marquez_name is not None:
            name = root.marquez_name
        return api.job_runs(root.namespace, name)
    if root.field is not None:
        return api.column_lineage(root.namespace, root.name, root.field, group.depth)
    return api.lineage(root.namespace, root.name, group.depth)


def _call(client: httpx.Client, target: Target, ask: Ask) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = client.get(ask.path, params=ask.params, timeout=CALL_TIMEOUT_S)
    except httpx.TimeoutException:
        return {"ms": CALL_TIMEOUT_S * 1000, "status": "timeout"}
    ms = (time.perf_counter() - started) * 1000
    out: dict[str, Any] = {"ms": ms, "status": response.status_code}
    if response.status_code == 200:
        out |= dataclasses.asdict(api_of(target.kind).size(orjson.loads(response.content)))
    return out


def _group_summary(calls: list[dict[str, Any]]) -> dict[str, Any]:
    times = [c["ms"] for c in calls]
    sizes = {
        key: statistics.median(values)
        for key in ("nodes", "edges", "runs")
        if (values := [c[key] for c in calls if c.get(key) is not None])
    }
    return {
        "calls": len(calls),
        "p50_ms": servers.percentile(times, 50),
        "p99_ms": servers.percentile(times, 99),
        "max_ms": max(times),
        "not_200": Counter(str(c["status"]) for c in calls if c["status"] != 200),
        "median_size": sizes,
    }


def queries(target: Target, plan: Sequence[QueryGroup], calls: int) -> dict[str, Any]:
    """Cold: the server restarted on its database, then each root asked once, group by
    group. Warm: one more pass, then ``calls`` calls per group cycling over its roots
    (a sixth as many, at least one per root, when that pass averaged over a second)."""
    restart_s = target.restart()
    out: dict[str, Any] = {"restart_s": round(restart_s, 1), "groups": {}}
    with httpx.Client(base_url=target.url) as client:
        for group in plan:
            cold = [_call(client, target, ask_of(target, group, r)) for r in group.roots]
            out["groups"][group.name] = {"title": group.title, "cold": _group_summary(cold)}
        for group in plan:
            warmup = [_call(client, target, ask_of(target, group, r)) for r in group.roots]
            # A question that takes seconds gets fewer calls, so one slow walk cannot
            # take the run's whole budget (the calls made are in the summary).
            slow = statistics.fmean(c["ms"] for c in warmup) > SLOW_CALL_MS
            count = max(len(group.roots), calls // 6) if slow else calls
            servers.wait_for_quiet(5.0)
            others = servers.busy_cores(0.5)
            plan_calls = [group.roots[i % len(group.roots)] for i in range(count)]
            warm = [_call(client, target, ask_of(target, group, r)) for r in plan_calls]
            summary = _group_summary(warm) | {"others_busy_cores_before": round(others, 2)}
            out["groups"][group.name]["warm"] = summary
    return out
