"""``embrasure serve``'s processes (embrasure/processes/, docs/operations.md#processes):
the receiver and the projector each in a process, supervised; one killed with -9 is
started again and nothing acknowledged is lost; SIGTERM stops them all; /readyz and
/metrics report each, on both backends."""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from conftest import MINIMAL_EVENT, ServerProcess, stacks
from http_client import HTTP

pytestmark = pytest.mark.slow
JSON = {"Content-Type": "application/json"}


def event(n: int) -> bytes:
    doc: dict[str, Any] = copy.deepcopy(MINIMAL_EVENT)
    doc["run"]["runId"] = f"01943c00-0000-7000-8000-{n:012x}"
    return orjson.dumps(doc)


def processes(server: ServerProcess) -> dict[str, Any]:
    table: dict[str, Any] = HTTP.get(server.url + "/readyz", timeout=10).json()["processes"]
    return table


def wait_for(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def projected(server: ServerProcess) -> bool:
    backlog = HTTP.get(server.url + "/api/v1/overview", params={"runs": 0}).json()["backlog"]
    return bool(backlog["deliveries"] == 0 and backlog["items"] == 0)


def delivery_ids(db_url: str) -> set[str]:
    from embrasure.store import open_store

    store = open_store(db_url, create=False)
    try:
        with store.reader() as reader:
            return {d.delivery_id for d in reader.deliveries(None, None, None, 1_000_000)}
    finally:
        store.close()


class Sender(threading.Thread):
    """POSTs events one at a time until stopped; keeps every receipt it got."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.acknowledged: list[str] = []
        self.failures = 0
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.stop.is_set():
                n += 1
                try:
                    r = client.post("/api/v1/lineage", content=event(n), headers=JSON)
                except httpx.HTTPError:
                    self.failures += 1  # the connection the killed receiver held
                    continue
                if r.status_code == 202:
                    self.acknowledged.append(r.json()["delivery_id"])


def test_serve_runs_a_process_per_stage(db_url: str, tmp_path: Path) -> None:
    server = ServerProcess(db_url, log_dir=tmp_path).start()
    try:
        table = wait_for(lambda: processes(server))
        # reads-1 answers the receiver's forwarded reads (docs/operations.md#reads-under-load)
        assert set(table) == {"receiver", "projector", "notifier", "reads-1"}
        pids = {row["pid"] for row in table.values()}
        assert server.proc is not None and server.proc.pid not in pids and len(pids) == 4
        for pid in pids:  # children of serve's supervisor
            assert int(Path(f"/proc/{pid}/stat").read_text().split()[3]) == server.proc.pid
        r = HTTP.post(server.url + "/api/v1/lineage", content=event(1), headers=JSON)
        assert r.status_code == 202
        wait_for(lambda: projected(server))  # the projector process projected it
        metrics = HTTP.get(server.url + "/metrics").text
        assert 'embrasure_process_up{process="projector"} 1.0' in metrics
        assert 'embrasure_process_restarts_total{process="receiver"} 0.0' in metrics
        assert server.terminate() == 0
        for pid in pids:
            wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30)
    finally:
        server.stop()


@pytest.mark.parametrize("stage", ["receiver", "projector"])
def test_a_process_killed_is_started_again_and_nothing_acknowledged_is_lost(
    db_url: str, tmp_path: Path, stage: str
) -> None:
    server = ServerProcess(db_url, log_dir=tmp_path).start()
    sender = Sender(server.url)
    try:
        wait_for(lambda: processes(server))
        sender.start()
        wait_for(lambda: len(sender.acknowledged) >= 20)
        victim = processes(server)[stage]["pid"]
        os.kill(victim, signal.SIGKILL)
        again = wait_for(
            lambda: (
                (row := processes(server)[stage])["restarts"] == 1
                and row["state"] == "running"
                and row
            ),
            30,
        )
        assert again["pid"] != victim and again["last_exit"] == -signal.SIGKILL
        count = len(sender.acknowledged)
        wait_for(lambda: len(sender.acknowledged) >= count + 20)  # taking deliveries again
        sender.stop.set()
        sender.join()
        wait_for(lambda: projected(server))
        assert server.terminate() == 0
        # Every receipt sent names a delivery in the log, whichever process died.
        assert set(sender.acknowledged) <= delivery_ids(db_url)
        log = server.log_path.read_text()
        assert f"the {stage} (pid {victim}) was killed by signal 9" in log
    finally:
        sender.stop.set()
        server.stop()


def test_not_ready_until_its_read_process_serves(db_path: Path, tmp_path: Path) -> None:
    """docs/operations.md#health: a read process that (re)starts makes /readyz 503, naming
    it, until it serves; ingest is accepted meanwhile."""
    server = ServerProcess(db_path, log_dir=tmp_path).start()  # waits for it: conftest.py
    try:
        assert HTTP.get(server.url + "/readyz").status_code == 200
        os.kill(processes(server)["reads-1"]["pid"], signal.SIGKILL)
        starting = wait_for(
            lambda: (r := HTTP.get(server.url + "/readyz")).status_code == 503 and r
        )
        assert starting.json()["starting"] == ["reads-1"], starting.json()
        assert starting.headers["Retry-After"] == "1"
        r = HTTP.post(server.url + "/api/v1/lineage", content=event(1), headers=JSON)
        assert r.status_code == 202
        wait_for(lambda: HTTP.get(server.url + "/readyz").status_code == 200, 30)
        assert processes(server)["reads-1"]["restarts"] == 1
        assert HTTP.get(server.url + "/api/v1/namespaces", timeout=5).status_code == 200
    finally:
        server.stop()


def test_serve_killed_takes_its_processes_with_it(db_path: Path, tmp_path: Path) -> None:
    server = ServerProcess(db_path, log_dir=tmp_path).start()
    try:
        pids = [row["pid"] for row in wait_for(lambda: processes(server)).values()]
        assert server.proc is not None
        server.proc.kill()  # the supervisor alone, with -9
        server.proc.wait()
        for pid in pids:  # each asked the kernel for SIGTERM when it dies
            try:
                wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30)
            except AssertionError:
                log = server.log_path.read_text()[-4000:]  # did it hear the signal?
                raise AssertionError(
                    f"still running 30 s after SIGTERM:\n{stacks(pid)}\nthe log:\n{log}"
                ) from None
        # and the port is free for the next serve on the same file
        again = ServerProcess(db_path)
        again.port, again.url = server.port, server.url
        again.start()
        again.terminate()
    finally:
        server.stop()


def test_single_process_runs_threads(db_path: Path) -> None:
    server = ServerProcess(db_path, "--single-process").start()
    try:
        assert "processes" not in HTTP.get(server.url + "/readyz").json()
        r = HTTP.post(server.url + "/api/v1/lineage", content=event(1), headers=JSON)
        assert r.status_code == 202
        wait_for(lambda: projected(server))
    finally:
        server.stop()


def test_retention_runs_in_its_own_process(db_path: Path, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    server = ServerProcess(
        db_path, "--retain-log", "0s", "--archive", str(archive), "--retention-interval", "1s"
    ).start()
    try:
        table = wait_for(lambda: processes(server))
        assert set(table) == {"receiver", "projector", "retention", "notifier", "reads-1"}
        r = HTTP.post(server.url + "/api/v1/lineage", content=event(1), headers=JSON)
        assert r.status_code == 202
        wait_for(lambda: projected(server))
        # The retention process's passes, as the receiver's /readyz and /metrics see them.
        state = wait_for(
            lambda: (
                (doc := HTTP.get(server.url + "/readyz").json().get("retention"))
                and doc["bodies_archived"] >= 1
                and doc
            )
        )
        assert state["status"] == "ok"
        assert "embrasure_retention_passes_total" in HTTP.get(server.url + "/metrics").text
        assert server.terminate() == 0
    finally:
        server.stop()
