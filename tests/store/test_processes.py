"""Receiver and projector as separate processes, and a projector killed mid-projection:
the graph after a restart equals a reprojection of the same log
(docs/architecture.md#invariants, docs/projection.md, docs/architecture.md#storage)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from conftest import ServerProcess, crash, sqlite_files

pytestmark = pytest.mark.slow

JSON = {"Content-Type": "application/json"}
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from events import run_event  # noqa: E402  (bench/events.py: realistic RunEvents)


def embrasure(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "embrasure", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **kw,
    )


def pending(http: httpx.Client, ids: list[str]) -> int:
    return sum(http.get(f"/api/v1/deliveries/{i}").json()["summary"]["pending"] for i in ids)


def wait_until(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.1)


def post_batches(http: httpx.Client, batches: int, size: int) -> list[str]:
    ids = []
    for b in range(batches):
        events = [
            run_event(b * size + i, "START" if i % 3 == 0 else "COMPLETE") for i in range(size)
        ]
        r = http.post("/api/v1/lineage/batch", content=orjson.dumps(events))
        assert r.status_code == 202, r.text
        ids.append(r.json()["delivery_id"])
    return ids


def export(db: str) -> bytes:
    done = subprocess.run(
        [sys.executable, "-m", "embrasure", "export", "--db", db],
        capture_output=True,
        timeout=300,
        check=True,
    )
    return done.stdout


def test_receiver_alone_then_a_separate_projector(db_url: str, tmp_path: Path) -> None:
    server = ServerProcess(db_url, "--no-projector", log_dir=tmp_path).start()
    try:
        with httpx.Client(base_url=server.url, headers=JSON, timeout=30) as http:
            ids = post_batches(http, 5, 20)
            time.sleep(0.5)
            assert pending(http, ids) == 100  # nobody projects
            projector = embrasure("project", "--db", db_url)
            try:
                wait_until(lambda: pending(http, ids) == 0)
                views = [http.get(f"/api/v1/deliveries/{i}").json() for i in ids]
                assert {v["state"] for v in views} == {"projected"}
            finally:
                projector.send_signal(signal.SIGTERM)
                assert projector.wait(30) == 0
    finally:
        server.stop()


def test_projector_killed_mid_projection_recovers_to_the_same_graph(
    db_url: str, tmp_path: Path
) -> None:
    server = ServerProcess(db_url, "--no-projector", log_dir=tmp_path).start()
    try:
        with httpx.Client(base_url=server.url, headers=JSON, timeout=60) as http:
            ids = post_batches(http, 40, 250)
            for _ in range(3):  # kill -9 the projector three times while it works
                projector = embrasure("project", "--db", db_url)
                time.sleep(0.7)
                crash(projector.pid)  # with any process it runs
                projector.wait()
            assert pending(http, ids) > 0, "the projector finished before it was killed"
            projector = embrasure("project", "--db", db_url)
            try:
                wait_until(lambda: pending(http, ids) == 0, timeout=180)
            finally:
                projector.send_signal(signal.SIGTERM)
                projector.wait(30)
    finally:
        server.stop()
    recovered = export(db_url)
    rebuilt = subprocess.run(
        [sys.executable, "-m", "embrasure", "reproject", "--db", db_url],
        capture_output=True,
        timeout=600,
        check=True,
    )
    assert b"generation 2" in rebuilt.stdout
    assert export(db_url) == recovered
    assert len(orjson.loads(recovered)["runs"]) == 10_000


def test_reproject_killed_midway_leaves_the_served_graph_and_can_run_again(db_path: Path) -> None:
    """kill -9 during `embrasure reproject`: readers keep the old generation, whole; the
    half-built one is dropped by the next reproject, which ends with the same graph."""
    server = ServerProcess(db_path).start()
    try:
        with httpx.Client(base_url=server.url, headers=JSON, timeout=60) as http:
            # Long enough that a reproject (~3,500 events/s) is still building 1.5 s in.
            ids = post_batches(http, 80, 250)
            wait_until(lambda: pending(http, ids) == 0, timeout=180)
    finally:
        server.terminate()
    served = export(f"sqlite:///{db_path}")
    for _ in range(2):
        reproject = embrasure("reproject", "--db", f"sqlite:///{db_path}")
        time.sleep(1.5)
        assert reproject.poll() is None, "the reproject finished before it was killed"
        crash(reproject.pid)
        reproject.wait()
        assert export(f"sqlite:///{db_path}") == served  # still the old generation, untouched
    rebuilt = subprocess.run(
        [sys.executable, "-m", "embrasure", "reproject", "--db", f"sqlite:///{db_path}"],
        capture_output=True,
        timeout=600,
        check=True,
    )
    assert b"generation" in rebuilt.stdout
    assert export(f"sqlite:///{db_path}") == served
    with contextlib.closing(sqlite_files(db_path)) as conn:
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    generations = {n.split("_")[0] for (n,) in names if re.fullmatch(r"g\d+_.*", n)}
    assert len(generations) == 1, generations  # no half-built generation left behind


def test_two_servers_on_one_sqlite_file(db_path: Path) -> None:
    """docs/operations.md#two-servers-on-one-sqlite-file: two whole `serve` processes
    (receiver and projector each) on one file, 400 single events posted to both at once.
    Every one is acknowledged, stored once and projected once (the projectors take the
    one write lock in turn), and the graph is what a reprojection of the log builds."""
    servers = [ServerProcess(db_path).start() for _ in range(2)]
    try:

        def post(worker: int) -> list[str]:
            server = servers[worker % 2]
            with httpx.Client(base_url=server.url, headers=JSON, timeout=60) as http:
                ids = []
                for i in range(50):
                    body = orjson.dumps(run_event(worker * 50 + i, "COMPLETE"))
                    r = http.post("/api/v1/lineage", content=body)
                    assert r.status_code == 202, r.text
                    ids.append(r.json()["delivery_id"])
                return ids

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = [i for batch in pool.map(post, range(8)) for i in batch]
        assert len(set(ids)) == 400
        with httpx.Client(base_url=servers[1].url, timeout=60) as http:
            wait_until(lambda: pending(http, ids) == 0)
            states = {http.get(f"/api/v1/deliveries/{i}").json()["state"] for i in ids}
            assert states == {"projected"}
    finally:
        for server in servers:
            server.terminate()
    served = export(f"sqlite:///{db_path}")
    assert len(orjson.loads(served)["runs"]) == 400
    subprocess.run(
        [sys.executable, "-m", "embrasure", "reproject", "--db", f"sqlite:///{db_path}"],
        capture_output=True,
        timeout=300,
        check=True,
    )
    assert export(f"sqlite:///{db_path}") == served
