"""docs/postgres.md, the scale-out path: three receivers (`serve --no-projector`) and two
projectors (`embrasure project`) on one PostgreSQL database, loaded by concurrent
clients spread over the receivers as a load balancer would; one receiver and one
projector are killed with SIGKILL mid-load and restarted. Every acknowledged delivery
must be stored, and the export must equal a single-process reprojection of the log."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from embrasure.store import open_store

from conftest import ServerProcess, crash, run_sql

pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from events import run_event  # noqa: E402  (bench/events.py: realistic RunEvents)

JSON = {"Content-Type": "application/json"}


def event(i: int) -> dict[str, Any]:
    """A realistic RunEvent; one in four also names its output's warehouse table by a
    TABLE symlink shared by several outputs, so symlink groups merge across projection
    transactions (and projectors)."""
    doc = run_event(i, "START" if i % 5 == 0 else "COMPLETE")
    if i % 4 == 0:
        doc["outputs"][0]["facets"]["symlinks"] = {
            "_producer": doc["producer"],
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
            "identifiers": [
                {"namespace": "hive://metastore", "name": f"dw.table_{i % 9}", "type": "TABLE"}
            ],
        }
    return doc


class Clients:
    """Client threads posting unique events (single and 20-event batches) round-robin
    to the receivers that are up; a receiver that fails a request is skipped for it
    and the next receiver is tried (a load balancer's retry), with the same body."""

    def __init__(self, receivers: list[ServerProcess], threads: int = 6) -> None:
        self.receivers = receivers
        self.acked: dict[str, bytes] = {}  # delivery_id → body
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.numbers = itertools.count()
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(threads)]

    def __enter__(self) -> Clients:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _run(self, n: int) -> None:
        with httpx.Client(timeout=15, headers=JSON) as http:
            turn = n
            while not self.stop.is_set():
                first = next(self.numbers) * 20
                if first % 60 == 0:
                    path, body = "/api/v1/lineage", orjson.dumps(event(first))
                else:
                    batch = [event(first + k) for k in range(20)]
                    path, body = "/api/v1/lineage/batch", orjson.dumps(batch)
                for _attempt in range(len(self.receivers) + 1):
                    turn += 1
                    receiver = self.receivers[turn % len(self.receivers)]
                    try:
                        r = http.post(receiver.url + path, content=body)
                    except httpx.TransportError:
                        continue  # killed or restarting: the next receiver
                    if r.status_code == 202:
                        with self.lock:
                            self.acked[r.json()["delivery_id"]] = body
                        break
                    with self.lock:
                        self.errors.append(f"{r.status_code} {r.text[:200]}")
                    break

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def project(db: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "embrasure", "project", "--db", db],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def projected(db: str) -> int:
    [(generation,)] = run_sql(db, "SELECT generation FROM graph_meta")
    [(count,)] = run_sql(db, f"SELECT COUNT(*) FROM g{generation}_deliveries")
    return int(count)


def unprojected(db: str) -> int:
    [(generation,)] = run_sql(db, "SELECT generation FROM graph_meta")
    [(count,)] = run_sql(
        db,
        f"SELECT COUNT(*) FROM deliveries d WHERE NOT EXISTS"
        f" (SELECT 1 FROM g{generation}_deliveries p WHERE p.seq = d.seq)",
    )
    return int(count)


def test_three_receivers_two_projectors_killed_and_restarted(pg_db: str, tmp_path: Path) -> None:
    receivers = [ServerProcess(pg_db, "--no-projector", log_dir=tmp_path).start() for _ in range(3)]
    projectors = [project(pg_db, tmp_path / f"project{n}.log") for n in range(2)]
    try:
        with Clients(receivers) as clients:
            deadline = time.monotonic() + 20
            # Mid-load and mid-projection: some deliveries projected, more arriving.
            while (clients.count() < 150 or projected(pg_db) == 0) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert projected(pg_db) > 0, "the projectors did not start"
            receivers[0].kill()
            crash(projectors[0].pid)  # SIGKILL, mid-projection, with any process it runs
            projectors[0].wait()
            time.sleep(1.0)
            receivers[0] = ServerProcess(pg_db, "--no-projector", log_dir=tmp_path).start()
            projectors[0] = project(pg_db, tmp_path / "project0.log")
            at_restart = clients.count()
            while clients.count() < at_restart + 150 and time.monotonic() < deadline + 20:
                time.sleep(0.1)
        assert not clients.errors, clients.errors[:5]
        acked = dict(clients.acked)
        assert len(acked) >= 300

        # Every acknowledged delivery is stored, byte for byte (read back through the
        # store: bodies are stored compressed).
        seqs = dict(run_sql(pg_db, "SELECT delivery_id, seq FROM deliveries"))
        missing = [d for d in acked if d not in seqs]
        assert not missing, f"{len(missing)} acknowledged deliveries are not stored"
        store = open_store(pg_db)
        try:
            with store.reader() as reader:
                assert all(reader.body(seqs[d]) == body for d, body in acked.items())
        finally:
            store.close()

        wait_deadline = time.monotonic() + 60
        while unprojected(pg_db) and time.monotonic() < wait_deadline:
            time.sleep(0.2)
        assert unprojected(pg_db) == 0
    finally:
        for p in projectors:
            p.send_signal(signal.SIGTERM)
        for p in projectors:
            p.wait(30)
    try:
        with httpx.Client(base_url=receivers[1].url, timeout=60) as http:
            shared = http.get("/api/v1/export").content
            # A single process projects the same log again from scratch.
            subprocess.run(
                [sys.executable, "-m", "embrasure", "reproject", "--db", pg_db],
                capture_output=True,
                timeout=120,
                check=True,
            )
            alone = http.get("/api/v1/export").content
    finally:
        for r in receivers:
            r.stop()
    assert orjson.loads(shared)["runs"], "the export is empty"
    assert shared == alone
