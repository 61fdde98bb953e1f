"""The server under real load: how much `serve` turns into graph, and whether readers
slow ingest. Each figure side by side, in one run, for a baseline revision (A, ``--a``)
and the working tree (B).

Two parts (``--parts``), each on `embrasure serve` as users run it (a process per
stage), on a fresh SQLite database:

- ``sustained``: the highest rate of 500-event batches `serve` holds for ``--seconds``
  (60) with the graph never more than 5 s behind. The events are bench/projection.py's
  platform (500 Spark jobs running hourly, a START and a COMPLETE per run, 4.7 KB each).
  A load is open loop: a batch is due every 500/rate seconds whatever the answers; lag
  is sampled every 0.25 s from the database (read-only) as the age of the oldest
  delivery past the graph's position (its ``received_at``, the server's clock). A rate
  holds when the graph was never more than 5 s behind, nothing was refused, and the
  load kept its schedule (batches sent late by more than 1 s are counted). Rates climb
  a ladder (``--rates``) per side until one fails; each rate on a fresh database.
- ``reads``: bench/query.py's platform (``--scale``, 0.2: 10,400 jobs) is loaded and
  projected; then ingest alone, then ingest while ``--readers`` (16) clients loop heavy
  reads: lineage at depth 20 around the platform's hubs (limit 10,000), the export,
  and Marquez's ``lineage?nodeId=`` at depth 20 (``serve --marquez-port``). Ingest is
  wrk (bench/ingest.lua's unique 4.7 KB events): single events on 16 connections,
  then 500-event batches on 4, ``--wrk-seconds`` each. A reader honours 429's
  Retry-After and times out at 60 s. Reported per side: ingest's rate and p99 with and
  without readers and their ratio; the readers' answers, p50/p99, refusals and errors.

The machine is shared: each window records the CPU the rest of the machine used.
Run ``python bench/serve_load.py --a 82ab432`` (about 35 minutes here); results go to
bench/results/serve-load.{md,json}; ``--quick`` (short windows, a small platform)
writes under bench/results/tmp/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import ingest_load
import projection
import query
import servers

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
MAX_LAG_S = 5.0
LATE_S = 1.0
BATCH = 500
JSON = {"content-type": "application/json"}


# -- a side: one revision's code, one server at a time ------------------------------------


class Side:
    def __init__(self, name: str, rev: str | None, work: Path) -> None:
        self.name = name
        self.source = work / f"code-{name}"
        self.source.mkdir(parents=True)
        self.code = servers.copy_source(self.source, rev)
        self.work = work

    @contextlib.contextmanager
    def serve(self, label: str) -> Iterator[tuple[servers.Server, Path, str]]:
        """`serve` on a fresh database, with Marquez's API on a port of its own: the
        server, its database, the Marquez port's URL."""
        place = self.work / f"{self.name}-{label}"
        place.mkdir()
        db = place / "embrasure.db"
        marquez = servers.free_port()
        extra = ["--marquez-port", str(marquez)]
        server = servers.start_embrasure(place, db, self.source, projector=True, extra=extra)
        try:
            yield server, db, f"http://127.0.0.1:{marquez}"
        finally:
            server.stop()


def cores(before: servers.CpuSnapshot, after: servers.CpuSnapshot) -> tuple[float, float]:
    """The server's cores over a window, and the rest of the machine's."""
    wall = after.wall - before.wall
    server = (after.process - before.process) / wall
    machine = (after.system_busy - before.system_busy) / wall
    return round(server, 2), round(max(0.0, machine - server), 2)


# -- lag ------------------------------------------------------------------------------------


def lag_s(db: Path) -> float | None:
    """How long the oldest delivery past the graph's position has waited (0: none)."""
    try:
        conn = servers.sqlite_reader(db, timeout=1)
    except Exception:
        return None
    try:
        generation = conn.execute("SELECT generation FROM graph_meta").fetchone()[0]
        position = conn.execute(f"SELECT seq FROM g{generation}_position").fetchone()[0]
        row = conn.execute(
            "SELECT received_at FROM deliveries WHERE seq > ? ORDER BY seq LIMIT 1", (position,)
        ).fetchone()
    except Exception:
        return None
    finally:
        conn.close()
    if row is None:
        return 0.0
    received = datetime.fromisoformat(row[0].replace("Z", "+00:00")).timestamp()
    return max(0.0, time.time() - received)


class LagWatch:
    """Samples ``lag_s`` every 0.25 s in a thread until stopped."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            found = lag_s(self.db)
            if found is not None:
                self.samples.append((time.monotonic(), found))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def worst(self, since: float) -> float:
        return max((lag for t, lag in self.samples if t >= since), default=0.0)


# -- the sustained rate ---------------------------------------------------------------------


def platform_bodies(first_run: int) -> Iterator[bytes]:
    """bench/projection.py's platform in 500-event deliveries, run after run."""
    platform = projection.Platform()
    for body, _count in projection.batch_bodies(platform, first_run, 10**9, BATCH):
        yield body


async def open_loop(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """POST a batch every BATCH/rate seconds for ``seconds``; what came back."""
    interval = BATCH / rate
    bodies = platform_bodies(0)
    statuses: dict[int, int] = {}
    late = 0
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def post(body: bytes) -> None:
            try:
                response = await client.post(
                    "/api/v1/lineage/batch",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            except httpx.HTTPError:
                statuses[0] = statuses.get(0, 0) + 1

        started = time.monotonic()
        tasks = []
        for n in itertools.count():
            due = started + n * interval
            if due - started >= seconds:
                break
            body = next(bodies)
            now = time.monotonic()
            if now < due:
                await asyncio.sleep(due - now)
            elif now - due > LATE_S:
                late += 1
            tasks.append(asyncio.create_task(post(body)))
        await asyncio.gather(*tasks)
    return {"sent": len(tasks), "statuses": statuses, "late": late}


def drain_s(db: Path, timeout: float = 300) -> float | None:
    """Seconds until the graph has every delivery (None: not within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if lag_s(db) == 0.0:
            return time.monotonic() - started
        time.sleep(0.25)
    return None


def sustained_trial(side: Side, rate: float, seconds: float) -> dict[str, Any]:
    with side.serve(f"rate-{int(rate)}") as (server, db, _marquez):
        before = servers.cpu_snapshot(server.pid)
        watch = LagWatch(db)
        started = time.monotonic()
        sent = asyncio.run(open_loop(server.url, rate, seconds))
        window = time.monotonic() - started
        worst = watch.worst(started)
        server_cores, other_cores = cores(before, servers.cpu_snapshot(server.pid))
        drained = drain_s(db)
        watch.stop()
    refused = sum(n for status, n in sent["statuses"].items() if status != 202)
    held = worst <= MAX_LAG_S and refused == 0 and sent["late"] == 0
    return {
        "side": side.name,
        "rate": rate,
        "seconds": round(window, 1),
        "acknowledged_events_per_s": round(sent["statuses"].get(202, 0) * BATCH / window),
        "max_lag_s": round(worst, 2),
        "refused": refused,
        "late": sent["late"],
        "drained_s": None if drained is None else round(drained, 1),
        "server_cores": server_cores,
        "other_cores": other_cores,
        "held": held,
    }


def run_sustained(sides: Sequence[Side], rates: Sequence[float], seconds: float) -> dict[str, Any]:
    trials: list[dict[str, Any]] = []
    best: dict[str, float | None] = {}
    for side in sides:
        best[side.name] = None
        for rate in rates:
            trial = sustained_trial(side, rate, seconds)
            trials.append(trial)
            print(f"  {side.name} {rate:>7,.0f} events/s: {trial}", flush=True)
            if not trial["held"]:
                break
            best[side.name] = rate
    return {"trials": trials, "best": best}


# -- ingest under readers ---------------------------------------------------------------------


class Readers:
    """``count`` clients looping heavy reads until stopped, in a process of their own at
    nice 19: people reading from their own machines, whose CPU is not the server's (here
    it shares the server's two cores, and would take them from it at the same priority)."""

    def __init__(self, url: str, marquez_url: str, queries: list[str], count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._results: multiprocessing.Queue[dict[str, Any]] = context.Queue()
        self._process = context.Process(
            target=_readers_main,
            args=(url, marquez_url, queries, count, self._stop, self._results),
            daemon=True,
        )
        self.seen: dict[str, Any] = {}

    def __enter__(self) -> Readers:
        self._process.start()
        time.sleep(3)  # started, and every reader has a read in flight
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.seen = self._results.get(timeout=120)
        self._process.join(30)

    def summary(self, seconds: float) -> dict[str, Any]:
        done = sorted(self.seen["done"])
        return {
            "answers": len(done),
            "answers_per_s": round(len(done) / seconds, 2),
            "p50_ms": round(servers.percentile(done, 50) * 1000) if done else None,
            "p99_ms": round(servers.percentile(done, 99) * 1000) if done else None,
            "refused_429": self.seen["refused"],
            "errors": self.seen["errors"],
            "mb_per_s": round(self.seen["bytes"] / seconds / 1e6, 1),
        }


def _readers_main(
    url: str,
    marquez_url: str,
    queries: list[str],
    count: int,
    stop: Any,
    results: Any,
) -> None:
    os.nice(19)
    seen: dict[str, Any] = {"done": [], "refused": 0, "errors": {}, "bytes": 0}

    async def reader(client: httpx.AsyncClient, n: int) -> None:
        for asked in itertools.islice(itertools.cycle(queries), n, None):
            where, path = asked.split(":", 1)
            started = time.monotonic()
            try:
                response = await client.get((marquez_url if where == "marquez" else url) + path)
                body = await response.aread()
            except httpx.HTTPError as exc:
                seen["errors"][type(exc).__name__] = seen["errors"].get(type(exc).__name__, 0) + 1
                continue
            if response.status_code == 429:
                seen["refused"] += 1
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            elif response.status_code != 200:
                key = str(response.status_code)
                seen["errors"][key] = seen["errors"].get(key, 0) + 1
            else:
                seen["done"].append(time.monotonic() - started)
                seen["bytes"] += len(body)

    async def run() -> None:
        limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            tasks = [asyncio.create_task(reader(client, n)) for n in range(count)]
            while not stop.is_set():
                await asyncio.sleep(0.2)
            for task in tasks:  # reads in flight when the window ends are not counted
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    results.put(seen)


def heavy_queries(platform: query.Platform) -> list[str]:
    """Lineage at depth 20 around the hubs, the export, Marquez's lineage at depth 20."""
    hubs = [
        (query.WAREHOUSE, platform.table(p, platform.lengths[p] - 1)) for p in range(query.HUBS)
    ]
    found = []
    for ns, name in hubs[:4]:
        found.append(
            f"own:/api/v1/lineage?namespace={ns}&name={name}&direction=both&depth=20&limit=10000"
        )
        found.append(f"marquez:/api/v1/lineage?nodeId=dataset:{ns}:{name}&depth=20")
    found.append("own:/api/v1/export")
    return found


def load_platform(url: str, db: Path, scale: float) -> query.Platform:
    platform = query.Platform(scale)
    bodies, events = platform.bodies(platform.tasks, 500)
    query.load(url, bodies, events, clients=4)
    if drain_s(db, timeout=1800) is None:
        raise RuntimeError("the platform was not projected within 30 minutes")
    return platform


def wrk_window(
    wrk: str, url: str, workload: ingest_load.Workload, seconds: int, seed: int, pid: int
) -> dict[str, Any]:
    template = Path(tempfile.mkstemp(suffix=".json")[1])
    template.write_bytes(ingest_load.event_template())
    before = servers.cpu_snapshot(pid)
    result = ingest_load.run_wrk(wrk, url, workload, seconds, seed, template)
    server_cores, other_cores = cores(before, servers.cpu_snapshot(pid))
    template.unlink()
    accepted = result.count(202)
    return {
        "events_per_s": round(accepted * workload.events_per_body / result.duration_s),
        "requests_per_s": round(accepted / result.duration_s),
        "p99_ms": result.latency_ms.get("p99"),
        "non_202": {k: v for k, v in result.statuses.items() if k != 202},
        "socket_errors": result.socket_errors,
        "server_cores": server_cores,
        "other_cores": other_cores,
    }


SINGLE_16 = ingest_load.Workload("single", "/api/v1/lineage", 1, 16, 2, 30)
BATCH_4 = ingest_load.Workload("batch", "/api/v1/lineage/batch", 500, 4, 2, 60)


def reads_side(side: Side, scale: float, readers: int, seconds: int, wrk: str) -> dict[str, Any]:
    with side.serve("reads") as (server, db, marquez_url):
        platform = load_platform(server.url, db, scale)
        queries = heavy_queries(platform)
        out: dict[str, Any] = {"side": side.name, "scale": scale}
        for seed, (label, workload) in enumerate((("single", SINGLE_16), ("batch", BATCH_4))):
            alone = wrk_window(wrk, server.url, workload, seconds, seed * 2, server.pid)
            # (The readers' own CPU, this harness's, counts among the other cores.)
            drain_s(db, timeout=600)
            with Readers(server.url, marquez_url, queries, readers) as reading:
                started = time.monotonic()
                loaded = wrk_window(wrk, server.url, workload, seconds, seed * 2 + 1, server.pid)
                elapsed = time.monotonic() - started
            read = reading.summary(elapsed)
            drain_s(db, timeout=600)
            out[label] = {
                "alone": alone,
                "under_reads": loaded,
                "readers": read,
                "throughput_ratio": round(
                    loaded["events_per_s"] / max(1, alone["events_per_s"]), 3
                ),
                "p99_ratio": round((loaded["p99_ms"] or 0) / max(0.001, alone["p99_ms"] or 0), 2),
            }
            print(f"  {side.name} {label}: {out[label]}", flush=True)
    return out


# -- the report -------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    facts = results["machine"]
    lines = [
        f"# The server under load, {facts['date']}",
        "",
        f"Written by `python bench/serve_load.py` (its docstring says how it measures);"
        f" raw numbers in [serve-load.json](serve-load.json). A: {results['code']['A']};"
        f" B: {results['code']['B']}. Machine: {facts['nproc']} CPUs ({facts['cpu']}),"
        f" Python {facts['python']}, SQLite {facts['sqlite']}. Shared and noisy: every"
        " window says how many cores the rest of the machine used.",
        "",
    ]
    sustained = results.get("sustained")
    if sustained:
        best = sustained["best"]
        a, b = best.get("A"), best.get("B")
        ratio = f"{b / a:.2f}" if a and b else "-"
        lines += [
            "## Sustained end-to-end rate",
            "",
            f"The highest rate of 500-event batches held for {results['seconds']:.0f} s with"
            f" the graph never more than {MAX_LAG_S:.0f} s behind: A {a or 'none'}, B"
            f" {b or 'none'} events/s; **B/A {ratio}**.",
            "",
            "| side | offered events/s | acknowledged/s | max lag s | refused | late | drained in s"
            " | server cores | other cores | held |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for t in sustained["trials"]:
            lines.append(
                f"| {t['side']} | {t['rate']:,.0f} | {t['acknowledged_events_per_s']:,} |"
                f" {t['max_lag_s']} | {t['refused']} | {t['late']} | {t['drained_s']} |"
                f" {t['server_cores']} | {t['other_cores']} | {'yes' if t['held'] else 'no'} |"
            )
        lines.append("")
    reads = results.get("reads")
    if reads:
        lines += [
            "## Ingest under heavy readers",
            "",
            f"{results['readers']} readers looping lineage at depth 20 around the hubs, the"
            " export and Marquez's lineage at depth 20, on bench/query.py's platform at"
            f" scale {reads[0]['scale']}.",
            "",
            "| side | load | alone events/s | p99 ms | under reads events/s | p99 ms |"
            " throughput ratio | p99 ratio | reads answered | reads p50 / p99 ms |"
            " refused (429) | read errors | other cores |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for side in reads:
            for label in ("single", "batch"):
                r = side[label]
                lines.append(
                    f"| {side['side']} | {label} | {r['alone']['events_per_s']:,} |"
                    f" {r['alone']['p99_ms']} | {r['under_reads']['events_per_s']:,} |"
                    f" {r['under_reads']['p99_ms']} | **{r['throughput_ratio']}** |"
                    f" {r['p99_ratio']} | {r['readers']['answers']} |"
                    f" {r['readers']['p50_ms']} / {r['readers']['p99_ms']} |"
                    f" {r['readers']['refused_429']} | {r['readers']['errors'] or 'none'} |"
                    f" {r['under_reads']['other_cores']} |"
                )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default="82ab432", help="the baseline revision (side A)")
    parser.add_argument("--parts", default="sustained,reads")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rates", default="1000,2000,3000,4000,5000,6000,7000,8500,10000,12000")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--readers", type=int, default=16)
    parser.add_argument("--wrk-seconds", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.scale, args.wrk_seconds = 15.0, 0.02, 8
    wrk = ingest_load.ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="embrasure-serve-load-") as tmp:
        work = Path(tmp)
        sides = [Side("A", args.a, work), Side("B", None, work)]
        results: dict[str, Any] = {
            "machine": servers.machine_facts(sides[1].code),
            "code": {s.name: s.code for s in sides},
            "seconds": args.seconds,
            "readers": args.readers,
        }
        parts = args.parts.split(",")
        if "sustained" in parts:
            rates = [float(r) for r in args.rates.split(",")]
            results["sustained"] = run_sustained(sides, rates, args.seconds)
        if "reads" in parts:
            results["reads"] = [
                reads_side(s, args.scale, args.readers, args.wrk_seconds, wrk) for s in sides
            ]
    out = (RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR) / "serve-load"
    servers.write_results(out, results, markdown)


if __name__ == "__main__":
    main()
