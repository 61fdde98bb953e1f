"""Slow clients (issue 7): a body sent a byte a second gets 408 once the body timeout has
passed, and neither they nor clients that never finish their headers stall anyone else."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from conftest import MINIMAL_EVENT as EVENT
from conftest import ServerProcess

pytestmark = pytest.mark.slow


def slow_body(port: int, answers: list[bytes]) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        try:
            for _ in range(20):  # a byte a second, far slower than the 2 s timeout allows
                s.sendall(b" ")
                time.sleep(1)
        except OSError:
            pass  # the server answered and closed: what we want
        answers.append(s.recv(65536))


def slow_headers(port: int, stop: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        while not stop.is_set():  # a header that never ends
            try:
                s.sendall(b"X")
            except OSError:
                return
            time.sleep(1)


def test_slow_clients_time_out_without_stalling_others(db_path: Path) -> None:
    server = ServerProcess(db_path, "--body-timeout-seconds", "2").start()
    stop = threading.Event()
    answers: list[bytes] = []
    slow = [threading.Thread(target=slow_body, args=(server.port, answers)) for _ in range(20)]
    slow += [threading.Thread(target=slow_headers, args=(server.port, stop)) for _ in range(20)]
    try:
        for t in slow:
            t.start()
        served = 0
        with httpx.Client(base_url=server.url, timeout=10) as http:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:  # while all 40 slow clients hang on
                r = http.post(
                    "/api/v1/lineage",
                    content=orjson.dumps(EVENT),
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == 202
                assert http.get("/api/v1/deliveries").status_code == 200
                served += 1
        stop.set()
        for t in slow:
            t.join(30)
    finally:
        stop.set()
        server.stop()
    assert served > 10
    assert len(answers) == 20
    assert all(a.startswith(b"HTTP/1.1 408") and b"body-timeout" in a for a in answers), answers
