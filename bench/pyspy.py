"""Sampling profiles of a running server with py-spy, summarised per thread.

py-spy runs outside the server (it reads the process's memory), so the server needs no
change to be profiled. ``--native`` adds the C frames below the Python ones, which is what
shows where time goes inside orjson, SQLite, the cyclic garbage collector, fdatasync, and
a thread waiting to take the GIL back after a C call. Native unwinding slows the server
down: a profiled run's throughput is not a measurement.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

# A waiting thread's innermost frames: glibc's condition-variable wait, called straight
# from CPython's take_gil (its own frame is inlined away) when a C call such as
# sqlite3_step returns and wants the GIL back. A lock or queue wait goes through
# PyThread_acquire_lock_timed instead, so it is not counted as a GIL wait.
_COND_WAIT = "pthread_cond_timedwait"
_LOCK_WAIT = "PyThread_acquire_lock"
_GC = "gc_collect_main"
_FSYNC = ("fdatasync", "fsync")
_ADDRESS = re.compile(r"^0x[0-9a-f]+ \((.*)\)$")
_LINE = re.compile(r" \(([^():]+):\d+\)$")
# Python frames worth a line in the top list: the project's, less the entry points that
# are in every sample of the main thread (cli/main.py since the package per stage, cli.py
# before it).
_PROJECT = "embrasure/"
_ENTRY_POINTS = ("embrasure/cli/main.py", "embrasure/cli.py", "embrasure/__main__.py")
# C libraries whose time is worth a line of its own, by a substring of their frames.
_NATIVE = {
    "orjson": "[orjson]",
    "libsqlite3": "[SQLite]",
    "libcrypto": "[OpenSSL libcrypto: sha256]",
    "msgspec": "[msgspec]",
    "jiter": "[jiter]",
}


def ensure_py_spy() -> str | None:
    """py-spy's path, installing it from PyPI into this environment if missing."""
    found = shutil.which("py-spy") or _venv_binary("py-spy")
    if found:
        return found
    print("py-spy not found: installing it with pip", flush=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "py-spy"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        print(f"could not install py-spy:\n{result.stderr}", file=sys.stderr)
        return None
    return _venv_binary("py-spy")


def _venv_binary(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else None


def record(py_spy: str, pid: int, seconds: int, out: Path, rate: int = 50) -> None:
    """Collapsed stacks ("thread;frame;frame count" lines) of every thread of ``pid``."""
    subprocess.run(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            str(rate),
            "--native",
            "--threads",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=seconds + 60,
    )


def _frame_name(frame: str) -> str:
    """A frame without its line number; unsymbolised addresses become their library."""
    address = _ADDRESS.match(frame)
    if address:
        return f"[{address.group(1)}]"
    return _LINE.sub(lambda m: f" ({m.group(1)})", frame)


@dataclasses.dataclass
class ThreadProfile:
    """Sample counts of one thread, by what its stack shows."""

    name: str
    samples: int = 0
    gil_wait: int = 0
    gc: int = 0
    fsync: int = 0
    outside_project: int = 0  # the HTTP stack and event loop, or waiting for work
    inclusive: Counter[str] = dataclasses.field(default_factory=Counter)
    leaf: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, frames: list[str], count: int) -> None:
        self.samples += count
        tail = frames[-4:]
        if any(_COND_WAIT in f for f in tail[-2:]) and not any(_LOCK_WAIT in f for f in tail):
            self.gil_wait += count
        if any(_GC in f for f in frames):
            self.gc += count
        if any(f.startswith(_FSYNC) for f in tail):
            self.fsync += count
        # Inclusive time per Python function of the project and per C library of
        # interest; each counted once per sample even when it recurses.
        names = {_frame_name(f) for f in frames if _is_project(f)}
        if not names:
            self.outside_project += count
        names.update(label for f in frames for mark, label in _NATIVE.items() if mark in f)
        for name in names:
            self.inclusive[name] += count
        self.leaf[_frame_name(frames[-1])] += count

    def as_dict(self, top: int) -> dict[str, object]:
        # Frames in (nearly) every sample are the thread's entry points (click, uvicorn's
        # run loop, Thread.run): true but uninformative, so left out of the top list.
        inclusive = [(n, c) for n, c in self.inclusive.most_common() if c < 0.99 * self.samples]
        return {
            "thread": self.name,
            "samples": self.samples,
            "gil_wait_share": self.gil_wait / self.samples if self.samples else 0.0,
            "gc_share": self.gc / self.samples if self.samples else 0.0,
            "fsync_share": self.fsync / self.samples if self.samples else 0.0,
            "outside_project_share": self.outside_project / self.samples if self.samples else 0.0,
            "top_inclusive": [[name, n / self.samples] for name, n in inclusive[:top]],
            "top_leaf": [[name, n / self.samples] for name, n in self.leaf.most_common(top)],
        }


def _is_project(frame: str) -> bool:
    match = _LINE.search(frame)
    if not match:
        return False
    path = match.group(1)
    return path.startswith(_PROJECT) and not path.startswith(_ENTRY_POINTS)


def summarise(raw: Path, top: int = 12) -> list[dict[str, object]]:
    """Per thread, busiest first: sample shares of GIL waits, gc, fsync, top functions.

    The shares are of the samples py-spy recorded for that thread: without ``--idle`` it
    drops the samples in which it judges the thread idle (blocked in epoll_wait, say).
    """
    threads: dict[str, ThreadProfile] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        # "thread (1234): MainThread" → the thread's Python name, stable across runs.
        name = frames[0].partition("): ")[2] or frames[0]
        threads.setdefault(name, ThreadProfile(name)).add(frames[1:], int(count))
    ordered = sorted(threads.values(), key=lambda t: -t.samples)
    return [t.as_dict(top) for t in ordered]
