"""The soak part of bench/storage.py: a steady load against ``serve`` with retention on.

``embrasure serve`` (receiver and projector, SQLite) runs with ``--retain-log``,
``--retain-runs``, ``--retention-interval`` and ``--archive`` (JSON log lines at info
level, so its retention passes can be found), and takes ``--soak-batch``-event batches
at ``--soak-rate`` events/s, each POST at its planned time whatever the earlier ones are
doing (open loop: bench/projection.py's ``drive_load``, which also watches every
delivery until it is projected). The events are bench/projection.py's platform with
every eventTime set to the moment the body is built, so runs age out of the
``--retain-runs`` horizon as they would in production. Every ``--soak-sample`` seconds
the harness samples the database's size (file + WAL), the server's RSS and CPU, the
machine's CPU and the retention lines of ``/metrics``.

Reported: the size's slope over the last third of the run (% of the mean size per 10
minutes; target ≤ 2), receipt p99 for POSTs in flight during a retention pass against
those between passes (target ≤ 2x), RSS in the second tenth of the run, after the first
third and in the last tenth (flat: the last within 10% of the one after the first third),
and the passes found. A pass is found from the server's log lines naming
retention (a line with a duration, or a start line and the next line after it), else
from a retention counter of ``/metrics`` (the sampling interval around its increment).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import re
import shutil
import statistics
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, overload

import backends
import httpx
import orjson
import projection
import psycopg
import query
import servers
import soak
import storage_sizes

TARGET_SLOPE_PCT_PER_10_MIN = 2.0
TARGET_P99_RATIO = 2.0
_RETENTION_METRIC = re.compile(r"^(embrasure_\w*(retention|archive)\w*)(\{[^}]*\})? (\S+)$")
# What of the RSS is SQLite's (its page caches): web/metrics.py, SQLite only.
_SQLITE_MEMORY = re.compile(r"^embrasure_sqlite_memory_bytes (\S+)$")
_DURATION_KEYS = {"seconds": 1.0, "duration_s": 1.0, "elapsed_s": 1.0, "duration_ms": 1e-3}


@dataclasses.dataclass(frozen=True)
class SoakConfig:
    minutes: float
    rate: int  # events/s offered
    batch: int  # events per POST
    retain_log: str
    retain_runs: str
    interval: str
    sample_s: float
    quiet_wait_s: float
    retention: bool  # False: the same load without the retention flags (a control)
    log_level: str = "info"
    backend: str = "sqlite"
    keep: str | None = None  # a folder: the server's log, the samples and the POSTs go there


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--soak-minutes", type=float, help="default 30; quick 3")
    p.add_argument("--soak-rate", type=int, default=500, help="events/s offered")
    p.add_argument("--soak-batch", type=int, default=50, help="events per POST")
    p.add_argument("--retain-log", help="serve's --retain-log (default 5m; quick 30s)")
    p.add_argument(
        "--retain-runs", help="serve's --retain-runs (default 10m; quick 1m; off: not given)"
    )
    p.add_argument("--retention-interval", help="default 1m; quick 6s")
    p.add_argument("--soak-sample", type=float, help="seconds between samples (5; quick 2)")
    p.add_argument(
        "--soak-backend",
        default="sqlite",
        choices=("sqlite", "postgresql"),
        help="the soak's database (postgresql: a new database on bench/backends.py's server)",
    )
    p.add_argument(
        "--soak-log-level",
        default="info",
        choices=("info", "debug"),
        help="serve's --log-level (debug: every retention step's hold on the write lock)",
    )
    p.add_argument(
        "--soak-keep",
        help="a folder to copy the server's log, the raw samples and each POST's times to"
        " (to profile a soak)",
    )
    p.add_argument(
        "--soak-without-retention",
        action="store_true",
        help="the soak's load without the retention flags: a control (how fast it grows)",
    )


def soak_config(args: argparse.Namespace, quick: bool) -> SoakConfig:
    # --quick keeps the run's shape: a tenth of the time, horizons a tenth as long.
    return SoakConfig(
        minutes=args.soak_minutes or (3.0 if quick else 30.0),
        rate=args.soak_rate,
        batch=args.soak_batch,
        retain_log=args.retain_log or ("30s" if quick else "5m"),
        retain_runs=args.retain_runs or ("1m" if quick else "10m"),
        interval=args.retention_interval or ("6s" if quick else "1m"),
        sample_s=args.soak_sample or (2.0 if quick else 5.0),
        quiet_wait_s=10 if quick else 60,
        retention=not args.soak_without_retention,
        log_level=args.soak_log_level,
        backend=args.soak_backend,
        keep=args.soak_keep,
    )


class LiveBodies(Sequence[bytes]):
    """``count`` batch bodies of bench/projection.py's platform, built as they are sent
    (30 minutes at 500 events/s is 4 GB of JSON: too much to build beforehand), every
    eventTime the moment of building. Read once, in order, as ``drive_load`` does."""

    def __init__(self, count: int, batch: int) -> None:
        self.total = count
        self._plan = projection.delivery_plan(0, (count + 2) * batch, batch)
        next(self._plan)  # the plan's first delivery is STARTs only: half a batch
        self._platform = projection.Platform()
        self._next = 0

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice) or index != self._next:
            raise TypeError("LiveBodies are read once, in order")
        if index >= self.total:
            raise IndexError(index)
        self._next += 1
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        events = []
        for run, kind in next(self._plan):
            event = self._platform.event(run, kind)
            event["eventTime"] = now
            events.append(event)
        return orjson.dumps(events)


OBJECTS_EVERY_S = 60.0  # PostgreSQL: bytes by table and index, once a minute


class Sampler(threading.Thread):
    """Samples the database files, the server's memory and CPU, and /metrics."""

    def __init__(
        self, server: servers.Server, db: Path, db_url: str | None, every_s: float
    ) -> None:
        super().__init__(daemon=True)
        self.server, self.db, self.db_url, self.every_s = server, db, db_url, every_s
        self.samples: list[dict[str, Any]] = []
        self.metric_errors = 0
        self.objects_at = 0.0  # when the bytes by table were last read (PostgreSQL)
        self.stopping = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=self.every_s) as client:
            while not self.stopping.is_set():
                self.samples.append(self.sample(client))
                self.stopping.wait(self.every_s)

    def sample(self, client: httpx.Client) -> dict[str, Any]:
        files = db_files(self.db) if self.db_url is None else postgres_size(self.db_url)
        objects: dict[str, int] | None = None
        if self.db_url is not None and time.time() - self.objects_at >= OBJECTS_EVERY_S:
            # Which tables and indexes make the size's slope (PostgreSQL reuses a table's
            # deleted rows only after autovacuum visits it: docs/operations.md).
            self.objects_at = time.time()
            found = storage_sizes.postgres_objects(self.db_url)["objects"]
            objects = {name: int(o["bytes"]) for name, o in found.items()}
        metrics: dict[str, float] = {}
        sqlite_bytes: float | None = None
        try:
            for line in client.get("/metrics").text.splitlines():
                if found := _RETENTION_METRIC.match(line):
                    metrics[found[1] + (found[3] or "")] = float(found[4])
                elif found := _SQLITE_MEMORY.match(line):
                    sqlite_bytes = float(found[1])
        except (httpx.HTTPError, ValueError):
            self.metric_errors += 1
        return {
            "t": time.time(),
            **files,
            "rss_kib": servers.memory_kib(self.server.pid).get("VmRSS", 0),
            "sqlite_bytes": sqlite_bytes,  # None: PostgreSQL, or a revision without it
            "server_cpu_s": projection.process_cpu_seconds(self.server.pid),
            "machine_busy_s": projection.system_busy_seconds(),
            "harness_cpu_s": time.process_time(),  # the load, the watcher, this sampler
            "retention_metrics": metrics,
            **({"objects": objects} if objects is not None else {}),
        }


def postgres_size(url: str) -> dict[str, int]:
    """pg_database_size (tables, indexes, TOAST, catalogs) as the soak's "database";
    PostgreSQL's own WAL is the cluster's, not this database's, and is left out."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return {"db_bytes": int(row[0]) if row else 0, "wal_bytes": 0, "shm_bytes": 0}


def db_files(db: Path) -> dict[str, int]:
    """Bytes of the store's files (the log's and the graph's together) by kind."""
    sizes = query.db_files(db)
    return {"db_bytes": sizes["main"], "wal_bytes": sizes["wal"], "shm_bytes": sizes["shm"]}


# -- retention passes -----------------------------------------------------------------


def log_lines(text: str) -> list[dict[str, Any]]:
    """The server's JSON log lines that name retention, each with its time as a float."""
    found = []
    for raw in text.splitlines():
        if "retention" not in raw.lower() and "archive" not in raw.lower():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(line, dict) and "time" in line:
            line["t"] = projection.parse_utc(str(line["time"]))
            found.append(line)
    return found


def passes_from_log(lines: list[dict[str, Any]]) -> list[tuple[float, float]]:
    windows = []
    opened: float | None = None
    for line in lines:
        if "held_ms" in line:  # a step of a pass (--soak-log-level debug): step_holds
            continue
        duration = next(
            (
                float(line[k]) * scale
                for k, scale in _DURATION_KEYS.items()
                if isinstance(line.get(k), int | float)
            ),
            None,
        )
        message = str(line.get("message", "")).lower()
        if duration is not None:
            windows.append((line["t"] - duration, line["t"]))
            opened = None
        elif re.search(r"\b(start|starting|begin)", message):
            opened = line["t"]
        elif opened is not None:
            windows.append((opened, line["t"]))
            opened = None
    return windows


def step_holds(lines: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """How long the passes' steps held the write lock, by kind (the debug lines of
    store/pacing.py, found only with --soak-log-level debug)."""
    held: dict[str, list[float]] = {}
    for line in lines:
        if isinstance(line.get("held_ms"), int | float):
            step = str(line.get("step", ""))
            kinds = ("runs", "pages", "segment", "unnamed shapes", "unnamed facet values")
            kind = next((k for k in kinds if k in step), "other")
            held.setdefault(kind, []).append(float(line["held_ms"]))
    return {
        kind: {
            "steps": len(values),
            "p50_ms": statistics.median(values),
            "p99_ms": _quantile(values, 0.99),
            "max_ms": max(values),
        }
        for kind, values in sorted(held.items())
    }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def passes_from_metrics(samples: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Sampling intervals in which a retention pass counter grew."""
    names = {n for s in samples for n in s["retention_metrics"] if re.search(r"pass\w*_total", n)}
    if not names:
        return []
    name = sorted(names)[0]
    windows = []
    for before, after in itertools.pairwise(samples):
        if after["retention_metrics"].get(name, 0) > before["retention_metrics"].get(name, 0):
            windows.append((before["t"], after["t"]))
    return windows


def receipts_by_pass(
    posts: Sequence[projection.Sent], windows: list[tuple[float, float]], after: float
) -> dict[str, Any]:
    """Receipt latency of POSTs (sent after ``after``) in flight during a pass or not."""
    during: list[float] = []
    between: list[float] = []
    for p in posts:
        if p.status != 202 or p.sent < after:
            continue
        ms = (p.acked - p.sent) * 1000
        inside = any(p.sent < end and p.acked > start for start, end in windows)
        (during if inside else between).append(ms)

    def summary(values: list[float]) -> dict[str, Any]:
        if not values:
            return {"posts": 0, "p50_ms": None, "p99_ms": None}
        p50, p99 = servers.percentile(values, 50), servers.percentile(values, 99)
        return {"posts": len(values), "p50_ms": p50, "p99_ms": p99}

    d, b = summary(during), summary(between)
    ratio = d["p99_ms"] / b["p99_ms"] if d["p99_ms"] and b["p99_ms"] else None
    return {
        "during": d,
        "between": b,
        "p99_ratio": ratio,
        "met": ratio is not None and ratio <= TARGET_P99_RATIO,
    }


# -- the run --------------------------------------------------------------------------


def run(cfg: SoakConfig, side: Any, work: Path) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        url = None
        if cfg.backend == "postgresql":
            url = stack.enter_context(backends.database("postgresql", work))
        return _run(cfg, side, work, url)


def _run(cfg: SoakConfig, side: Any, work: Path, db_url: str | None) -> dict[str, Any]:
    db, archive = work / "soak.db", work / "soak-archive"
    retention = [
        "--retain-log",
        cfg.retain_log,
        *(["--retain-runs", cfg.retain_runs] if cfg.retain_runs != "off" else []),
        "--retention-interval",
        cfg.interval,
        "--archive",
        str(archive),
    ]
    retention = retention if cfg.retention else []
    # JSON lines at info level or finer: the retention passes are found in them.
    flags = [*retention, "--log-format", "json", "--log-level", cfg.log_level]
    projection.wait_for_quiet(cfg.quiet_wait_s)
    try:
        server = servers.start_embrasure(
            work, db, side.source, projector=True, db_url=db_url, extra=flags
        )
    except RuntimeError as error:
        raise SystemExit(
            f"soak: side {side.label} ({side.code}) would not serve with {' '.join(flags)}; "
            f"does this revision have the retention settings? The server said:\n{error}"
        ) from None
    seconds = cfg.minutes * 60
    count = round(seconds * cfg.rate / cfg.batch)
    print(
        f"  {cfg.minutes:g} min at {cfg.rate} events/s ({cfg.batch}-event POSTs), "
        f"{' '.join(retention) or 'no retention flags (the control)'}",
        flush=True,
    )
    sampler = Sampler(server, db, db_url, cfg.sample_s)
    sampler.start()
    try:
        posts, watcher, start = asyncio.run(
            projection.drive_load(
                server.url, LiveBodies(count, cfg.batch), cfg.rate / cfg.batch, 60.0
            )
        )
    finally:
        sampler.stopping.set()
        sampler.join()
        exit_code = server.stop()
    if cfg.keep:
        keep = Path(cfg.keep)
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(server.log_path, keep / "server.log")
        samples = {"start": start, "samples": sampler.samples}
        (keep / "samples.json").write_bytes(orjson.dumps(samples))
        # Each POST's times, to match a slow receipt with the step that held the lock
        # meanwhile (the server log's, at --soak-log-level debug).
        (keep / "posts.json").write_bytes(orjson.dumps([dataclasses.asdict(p) for p in posts]))
    return summarise(cfg, posts, watcher, start, sampler, server, archive) | {
        "server_exit_code": exit_code,
        "retention_flags": retention,
    }


def _pct_slope(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope as % of the mean value per 10 minutes."""
    if len(samples) < 3:
        return None
    mean = statistics.fmean(v for _, v in samples)
    return soak.slope_mib_per_min(samples) * 10 / mean * 100 if mean else None


def _at_points(series: list[tuple[float, float]], seconds: float) -> dict[str, float]:
    """A memory series' medians over the second tenth of the run, the tenth after its
    first third, and its last tenth."""
    tenth = seconds / 10

    def median(low: float, high: float) -> float:
        return statistics.median([v for t, v in series if low <= t < high] or [0.0])

    return {
        "start": median(tenth, 2 * tenth),
        "after_first_third": median(seconds / 3, seconds / 3 + tenth),
        "end": median(seconds - tenth, float("inf")),
    }


def summarise(
    cfg: SoakConfig,
    posts: list[projection.Sent],
    watcher: projection.Watcher,
    start: float,
    sampler: Sampler,
    server: servers.Server,
    archive: Path,
) -> dict[str, Any]:
    seconds = cfg.minutes * 60
    samples = sampler.samples
    rel = [(s["t"] - start, s) for s in samples]
    size = [(t, (s["db_bytes"] + s["wal_bytes"]) / 2**20) for t, s in rel if t >= 0]
    rss = [(t, s["rss_kib"] / 1024) for t, s in rel if t >= 0]
    # SQLite's own memory (its page caches), where the server reports it: how much of
    # the RSS's rise is a cache filling up to its bound.
    engine = [(t, s["sqlite_bytes"] / 2**20) for t, s in rel if t >= 0 and s.get("sqlite_bytes")]
    last_third = [(t, v) for t, v in size if t >= seconds * 2 / 3]
    tenth = seconds / 10
    lines = log_lines(server.log_path.read_text(errors="replace"))
    failed = [line for line in lines if line.get("level") in ("error", "warning", "critical")]
    windows, found_by = passes_from_log(lines), "server log"
    if not windows:
        windows, found_by = passes_from_metrics(samples), "/metrics counter"
    slope = _pct_slope(last_third)
    cores = {"server_cpu_s": 0.0, "machine_busy_s": 0.0, "harness_cpu_s": 0.0}
    if len(samples) > 1:
        wall = samples[-1]["t"] - samples[0]["t"]
        cores = {k: (samples[-1][k] - samples[0][k]) / wall for k in cores}
    overall = projection._lag_summary(posts, watcher, (start + tenth, start + seconds), cfg.batch)
    return {
        "soak_config": dataclasses.asdict(cfg),
        "offered_events": len(posts) * cfg.batch,
        "overall": overall,
        "size_mib": {
            "end": size[-1][1] if size else None,
            "max": max((v for _, v in size), default=None),
            "slope_last_third_pct_per_10_min": slope,
            "target_pct_per_10_min": TARGET_SLOPE_PCT_PER_10_MIN,
            "met": slope is not None and slope <= TARGET_SLOPE_PCT_PER_10_MIN,
        },
        "rss_mib": {
            # After the first third (the first horizons, as the size's slope), the graph
            # has reached its steady size, so memory should have too.
            **_at_points(rss, seconds),
            "slope_second_half_mib_per_min": soak.slope_mib_per_min(
                [(t, v) for t, v in rss if t >= seconds / 2]
            ),
            "sqlite": _at_points(engine, seconds) if engine else None,
        },
        "receipts": receipts_by_pass(posts, windows, start + tenth),
        "passes": {
            "found_by": found_by if windows else None,
            "count": len(windows),
            # A pass that stopped (archive or store failure) logs an error or a warning.
            "failed": len(failed),
            "failure_example": failed[0].get("message") if failed else None,
            "seconds": [end - begin for begin, end in windows],
            "log_lines": len(lines),
            "log_examples": [{k: v for k, v in line.items() if k != "t"} for line in lines[:3]],
            "step_holds": step_holds(lines),
        },
        "server_cpu_cores": cores["server_cpu_s"],
        "harness_cpu_cores": cores["harness_cpu_s"],
        "others_busy_cores": max(
            0.0, cores["machine_busy_s"] - cores["server_cpu_s"] - cores["harness_cpu_s"]
        ),
        "metric_errors": sampler.metric_errors,
        "archive_bytes": sum(p.stat().st_size for p in archive.rglob("*") if p.is_file()),
        "samples": [
            {
                "t": round(t, 1),
                "db_and_wal_mib": round((s["db_bytes"] + s["wal_bytes"]) / 2**20, 2),
                "wal_mib": round(s["wal_bytes"] / 2**20, 2),
                "rss_mib": round(s["rss_kib"] / 1024, 1),
            }
            | ({"sqlite_mib": round(s["sqlite_bytes"] / 2**20, 1)} if s.get("sqlite_bytes") else {})
            for t, s in rel
            if t >= 0
        ],
        "retention_metrics_last": samples[-1]["retention_metrics"] if samples else {},
        "objects": [
            {"t": round(t, 1), "bytes": s["objects"]} for t, s in rel if t >= 0 and "objects" in s
        ],
    }
