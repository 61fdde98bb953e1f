"""A command that runs until SIGTERM stops on it whichever of its threads the kernel
hands the signal to (embrasure/processes/stopping.py)."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.lifecycle.archive import Archive
from embrasure.settings import Settings
from embrasure.store import open_store

from conftest import sqlite_url, stacks
from graph_api import Api, daily_run

# tgkill(2): a signal to one thread of another process (os.kill picks the thread).
TGKILL = {"x86_64": 234, "aarch64": 131}


def tgkill(pid: int, tid: int, sig: int) -> None:
    number = TGKILL.get(platform.machine())
    if number is None:
        pytest.skip(f"tgkill's syscall number on {platform.machine()} is not listed")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def test_sigterm_to_a_thread_other_than_the_main_one_stops_project(tmp_path: Path) -> None:
    """CPython runs the handler in the main thread only; delivered to another thread,
    the signal only trips it. `project` (with its retention thread, as it hung once)
    used to sleep through it in a bare ``Event.wait()``."""
    url, archive = sqlite_url(tmp_path / "embrasure.db"), tmp_path / "archive"
    store = open_store(url)
    with TestClient(build_app(Settings(db=url), store)) as client:
        Api(client).post(daily_run(1), single=True)
    store.close()
    flags = ["--retain-log", "0s", "--archive", str(archive), "--retention-interval", "1s"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "project", "--db", url, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # A pass has archived the delivery: the handlers are installed, the threads run.
        deadline = time.monotonic() + 30
        while not Archive(str(archive)).segments():
            assert time.monotonic() < deadline, "no retention pass within 30 s"
            assert proc.poll() is None, f"project exited with {proc.returncode}"
            time.sleep(0.2)
        others = [t for t in map(int, os.listdir(f"/proc/{proc.pid}/task")) if t != proc.pid]
        assert others, "project runs no thread besides the main one"
        tgkill(proc.pid, others[0], signal.SIGTERM)
        try:
            assert proc.wait(15) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running 15 s after SIGTERM:\n{stacks(proc.pid)}") from None
    finally:
        proc.kill()
