"""Shared fixtures: real SQLite files, a real server process over real HTTP."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import settings
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.receiver import Limits
from embrasure.settings import Settings
from embrasure.store import open_store

# No per-example deadline: these tests check behaviour, not speed (bench/ measures that),
# and on a loaded 2-core machine a pure function can take longer than hypothesis's 200 ms.
settings.register_profile("embrasure", deadline=None)
settings.load_profile("embrasure")

SHARED = Path(__file__).resolve().parents[2] / "shared"
OPENLINEAGE = SHARED / "openlineage"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`embrasure serve` in a child process, on a free port, with its own database."""

    def __init__(self, db_path: Path, *extra: str, wrapper: tuple[str, ...] = ()) -> None:
        self.db_path = db_path
        self.extra = extra
        self.wrapper = wrapper
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = db_path.with_suffix(f".{self.port}.log")

    def start(self, timeout: float = 20.0) -> ServerProcess:
        cmd = [
            *self.wrapper,
            sys.executable,
            "-m",
            "embrasure",
            "serve",
            "--db",
            f"sqlite:///{self.db_path}",
            "--port",
            str(self.port),
            *self.extra,
        ]
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        """SIGKILL: a crash, no chance to clean up."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "embrasure.db"


@pytest.fixture
def server(db_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(db_path).start()
    try:
        yield proc
    finally:
        proc.stop()


def make_client(db_path: Path, limits: Limits | None = None) -> TestClient:
    store = open_store(f"sqlite:///{db_path}")
    app = build_app(Settings(db=f"sqlite:///{db_path}"), store, limits)
    return TestClient(app)


@pytest.fixture
def client(db_path: Path) -> Iterator[TestClient]:
    """The app in-process (ASGI) on a real SQLite file, lifespan running."""
    with make_client(db_path) as c:
        yield c
    c.app.state.store.close()  # type: ignore[attr-defined]


def requires_shared() -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not OPENLINEAGE.is_dir(), reason=f"{OPENLINEAGE} is absent (conformance data)"
    )


os.environ.setdefault("EMBRASURE_LOG_LEVEL", "warning")
