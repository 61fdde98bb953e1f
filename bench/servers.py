"""Server processes for the benchmarks, and what /proc says about them.

Each measured server is a fresh child process on a free loopback port: the null receiver
(bench/null_receiver.py) or ``embrasure serve`` on its own new SQLite file. The harness
reads CPU, memory and disk-write counters from /proc (Linux only) rather than from the
server, so both servers are measured the same way and nothing is added to their hot path.
``percentile`` is the one every benchmark reports with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
NULL_RECEIVER = BENCH_DIR / "null_receiver.py"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def sqlite_files(db: Path) -> list[Path]:
    """Every file of a SQLite store at ``db``: the log's and, from migration 17, the
    graph's beside it (store/sqlite_files.py), each with its WAL and shared memory."""
    return [
        Path(f"{db}{part}{suffix}") for part in ("", "-graph") for suffix in ("", "-wal", "-shm")
    ]


def sqlite_reader(db: Path, timeout: float = 30) -> sqlite3.Connection:
    """A read-only connection that names the tables of either file unqualified: the
    graph's file (or, before migration 17, the one file) with the log's attached."""
    graph = Path(f"{db}-graph")
    main = graph if graph.exists() else db
    conn = sqlite3.connect(f"file:{main}?mode=ro", uri=True, timeout=timeout)
    if main != db:
        conn.execute("ATTACH DATABASE ? AS log", (f"file:{db}?mode=ro",))
    return conn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Server:
    """A server child process; ``db_path`` is set for Embrasure only."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path
    db_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log_path.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not become healthy:\n{self.log_path.read_text()}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait, as an operator stops it (Embrasure commits what is queued)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_null_receiver(work_dir: Path) -> Server:
    port = free_port()
    argv = [sys.executable, str(NULL_RECEIVER), "--port", str(port)]
    return _start("null", argv, port, work_dir, None)


def start_embrasure(
    work_dir: Path,
    db_path: Path | None,
    source: Path,
    *,
    projector: bool = False,
    db_url: str | None = None,
    extra: Sequence[str] = (),
    single_process: bool = False,
) -> Server:
    """``embrasure serve`` importing the package from ``source`` (a copy of it taken at
    the start of the run), so every repeat measures the same code while people edit.
    ``db_url`` replaces the SQLite file ``db_path`` (PostgreSQL); ``extra`` are more
    ``serve`` flags (bench/storage.py's retention flags); ``single_process`` runs its
    stages as threads of one process (``--single-process``), not a process each."""
    if db_url is None:
        if db_path is None:
            raise ValueError("start_embrasure needs db_path or db_url")
        db_url = f"sqlite:///{db_path}"
    port = free_port()
    # --no-projector by default: the receiver alone is measured (the ingest issue's
    # condition); the soak runs the whole server.
    # --log-level warning: the default info level logs nothing per request either, but
    # keep the server's log quiet so a real warning stands out in it.
    argv = [
        sys.executable,
        "-m",
        "embrasure",
        "serve",
        "--db",
        db_url,
        "--port",
        str(port),
        *([] if projector else ["--no-projector"]),
        *(["--single-process"] if single_process else []),
        "--log-level",
        "warning",
        *extra,
    ]
    return _start("embrasure", argv, port, work_dir, db_path, child_env(source))


def child_env(source: Path) -> dict[str, str]:
    """The environment of a child that imports embrasure from ``source``: PYTHONPATH comes
    before the editable install's import hook (and the child runs in the work
    directory, because `python -m` puts its working directory first on sys.path)."""
    path = [str(source), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _start(
    name: str,
    argv: list[str],
    port: int,
    work_dir: Path,
    db: Path | None,
    env: dict[str, str] | None = None,
) -> Server:
    log_path = work_dir / f"{name}-{port}.log"
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work_dir, env=env)
    server = Server(name, proc, f"http://127.0.0.1:{port}", log_path, db)
    server.wait_healthy()
    return server


# -- /proc ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds used so far, to subtract two snapshots over a measured window."""

    wall: float
    process: float  # all threads of the server
    main_thread: float  # the event loop: every request's Python work runs here
    system_busy: float  # every process on the machine (from /proc/stat)


def _task_cpu_seconds(stat_path: Path) -> float:
    # Fields after the ")" that ends the command name; utime and stime are 14 and 15.
    fields = stat_path.read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _system_busy_seconds() -> float:
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / CLOCK_TICKS  # guest time is already in user


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it: ``embrasure serve`` runs a process per stage
    (docs/operations.md#processes), and a server's cost is all of theirs."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def receiver_pid(pid: int) -> int:
    """The process that serves HTTP: serve's receiver process (the one given the listening
    sockets), or ``pid`` itself (one process, or another server)."""
    for child in process_tree(pid)[1:]:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if any(a.startswith(b"--listen-fd") for a in argv):
            return child
    return pid


def _tree_cpu_seconds(pid: int) -> float:
    total = 0.0
    for member in process_tree(pid):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += _task_cpu_seconds(Path(f"/proc/{member}/stat"))
    return total


def cpu_snapshot(pid: int) -> CpuSnapshot:
    """CPU of ``pid`` and its processes; the main thread is the receiver's."""
    receiver = receiver_pid(pid)
    return CpuSnapshot(
        wall=time.monotonic(),
        process=_tree_cpu_seconds(pid),
        main_thread=_task_cpu_seconds(Path(f"/proc/{receiver}/task/{receiver}/stat")),
        system_busy=_system_busy_seconds(),
    )


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds so far of the threads of ``pid``'s processes by kind: ``main`` (the
    receiver's event loop), ``rdk`` (librdkafka's, named ``rdk:…`` in ``/proc/…/comm``)
    and ``other`` (every other thread, the other processes' main threads included:
    Python 3.11 names none of them apart). A thread that has ended is in none of them."""
    kinds = dict.fromkeys(("main", "rdk", "other"), 0.0)
    receiver = receiver_pid(pid)
    for member in process_tree(pid):
        tasks: list[Path] = []
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            tasks = list(Path(f"/proc/{member}/task").iterdir())
        for task in tasks:
            try:
                name = (task / "comm").read_text()
                seconds = _task_cpu_seconds(task / "stat")
            except FileNotFoundError:  # ended meanwhile
                continue
            if task.name == str(receiver):
                kinds["main"] += seconds
            else:
                kinds["rdk" if name.startswith("rdk:") else "other"] += seconds
    return kinds


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak resident set) in KiB, summed over ``pid``'s processes
    (the peaks of each: an upper bound on the tree's peak)."""
    wanted = {"VmRSS", "VmHWM"}
    found = dict.fromkeys(wanted, 0)
    for member in process_tree(pid):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in wanted:
                    found[key] += int(value.split()[0])
    return found


def write_bytes(pid: int) -> int:
    """Bytes ``pid``'s processes caused to be sent to the block layer (WAL, DB,
    checkpoints)."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for line in Path(f"/proc/{member}/io").read_text().splitlines():
                if line.startswith("write_bytes:"):
                    total += int(line.split()[1])
    return total


def busy_cores(seconds: float = 1.0) -> float:
    """Cores the whole machine kept busy over the next ``seconds``."""
    before = _system_busy_seconds()
    time.sleep(seconds)
    return (_system_busy_seconds() - before) / seconds


def wait_for_quiet(max_wait_s: float, threshold_cores: float = 0.3) -> float:
    """Wait (at most ``max_wait_s``) until other jobs use under ``threshold_cores``; return
    the seconds waited. This machine is shared: a measurement taken while someone's test
    suite runs measures their suite too."""
    start = time.monotonic()
    while time.monotonic() - start < max_wait_s and busy_cores() > threshold_cores:
        pass
    return time.monotonic() - start


# -- the code under test ------------------------------------------------------------------

REPO_DIR = Path(__file__).resolve().parent.parent


def working_tree() -> str:
    """Which code the working tree's embrasure package is, as the results say it."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--", "embrasure")
    return f"working tree at {head}" + (" with uncommitted changes" if dirty else "")


def copy_source(dest: Path, rev: str | None) -> str:
    """Copy the embrasure package into ``dest``; return which code that is."""
    if rev is None:
        shutil.copytree(
            REPO_DIR / "embrasure",
            dest / "embrasure",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        return working_tree()
    head = _git("rev-parse", "--short", rev) or "unknown"
    archive = subprocess.run(
        ["git", "archive", rev, "embrasure"], cwd=REPO_DIR, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return f"git {head}"


def moved(*names: str) -> ModuleType:
    """The first of ``names`` that the imported embrasure package has: a harness that
    imports the measured copy in-process names a module at its path since the package
    per stage (9c9fd67), then at its path before it (68555ca: flat modules), so that
    ``--rev`` works on both sides of an A/B (bench/ab.py). Only a missing module falls
    through to the next name; an error inside one that exists is raised."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            # "No module named 'embrasure.cli.main'; 'embrasure.cli' is not a package"
            # also names the module asked for.
            if error.name != name:
                raise
    raise ModuleNotFoundError(f"none of {', '.join(names)} in this embrasure")


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True)
    return result.stdout.strip()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def machine_facts(code: str) -> dict[str, Any]:
    """What a report says about the machine and the code it measured."""
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "commit": code,
    }


def write_results(
    out: Path, results: dict[str, Any], markdown: Callable[[dict[str, Any]], str]
) -> None:
    """A benchmark's current result: ``out``.json (the raw numbers) and ``out``.md (its
    report, also printed); one of each per benchmark (bench/README.md)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(results, indent=2) + "\n")
    report = markdown(results)
    Path(f"{out}.md").write_text(report)
    print(report)
