"""Retention under faults (docs/operations.md#retention-and-the-archive): `embrasure
retention` killed with SIGKILL at random instants of its passes loses no body, never
archives a delivery twice, and a rerun completes the work; on PostgreSQL, a day
partition whose bodies are all archived is dropped whole."""

from __future__ import annotations

import collections
import datetime
import hashlib
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson

from embrasure.lifecycle.archive import Archive
from embrasure.lifecycle.retention import run_pass, trimmed_deliveries
from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.projector.worker import Projector, reproject
from embrasure.query.export import export_chunks
from embrasure.store import Store, open_store

from conftest import ServerProcess, run_sql
from event_strategies import draft
from graph_api import at, ds, run_event

KILLS = 20
FIRST_DELIVERIES = 2500  # the log the first passes work through
MORE_PER_ROUND = 400  # and more each round, so every pass has work when it is killed


def append_events(store: Store, start: int, count: int) -> None:
    """``count`` small single-event deliveries, in a few log transactions."""
    drafts = []
    for n in range(start, start + count):
        event = run_event(
            "COMPLETE",
            f"job{n % 25}",
            str(uuid.UUID(int=n + 1)),
            at(9, n % 60),
            inputs=[ds("s3://lake", f"raw/t{n % 9}")],
            outputs=[ds("s3://lake", f"clean/t{n % 25}")],
        )
        drafts.append(draft(orjson.dumps(event), provider="faults"))
    for i in range(0, len(drafts), 500):
        store.append(drafts[i : i + 500])


def receipt_digests(db_url: str) -> dict[int, str]:
    """seq → the SHA-256 its receipt was given for, of every delivery."""
    rows = run_sql(db_url, "SELECT seq, body_sha256 FROM deliveries")
    return {int(seq): str(sha) for seq, sha in rows}


def export(store: Store) -> bytes:
    with store.reader() as reader:
        return b"".join(export_chunks(reader))


def killed_pass(db_url: str, archive: Path, delay: float) -> bool:
    """`embrasure retention`, SIGKILLed ``delay`` seconds after its pass started;
    whether it was still running then."""
    args = ["--db", db_url, "--retain-log", "0s", "--archive", str(archive), "--log-level", "info"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "retention", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        while b"retention pass started" not in (line := proc.stderr.readline()):
            assert line, f"the pass never started (exit {proc.wait()})"
        time.sleep(delay)
        running = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    return running


def test_kill_9_at_random_instants_loses_nothing(db_url: str, tmp_path: Path) -> None:
    started = time.monotonic()
    rng = random.Random(15)
    archive_dir = tmp_path / "archive"
    store = open_store(db_url)
    try:
        append_events(store, 0, FIRST_DELIVERIES)
        Projector(store).run_until_caught_up()
        # A pass of a few hundred small deliveries takes ~0.1 s here, a machine's load
        # can make it several times that: the window the instant is drawn from follows
        # what the kills find, widening when they find the pass running, narrowing when
        # it had ended.
        window, interrupted = 0.3, 0
        for kill in range(KILLS):
            append_events(store, FIRST_DELIVERIES + kill * MORE_PER_ROUND, MORE_PER_ROUND)
            Projector(store).run_until_caught_up()
            running = killed_pass(db_url, archive_dir, rng.uniform(0, window))
            interrupted += running
            window = min(1.0, window * 1.2) if running else max(0.02, window * 0.6)
        assert interrupted >= KILLS // 2, f"only {interrupted} of {KILLS} kills hit a pass"
        before = export(store)
        digests = receipt_digests(db_url)
        assert len(digests) == FIRST_DELIVERIES + KILLS * MORE_PER_ROUND
        # The rerun completes the pass.
        report = run_pass(store, Archive(str(archive_dir)), datetime.timedelta(0))
        assert report.error is None, report.error
        archive = Archive(str(archive_dir), create=False)
        held = collections.Counter(s for segment in archive.segments() for s in segment.seqs)
        assert [seq for seq, n in held.items() if n > 1] == []  # none in two segments
        assert sorted(held) == sorted(digests)  # every body archived, and only those
        with store.reader() as reader:
            assert all(reader.body(seq) is None for seq in digests)
        archived = archive.bodies(digests)
        wrong = [s for s, d in digests.items() if hashlib.sha256(archived[s].body).hexdigest() != d]
        assert wrong == []  # byte-identical
        assert list(trimmed_deliveries(store)) == sorted(digests.items())
        assert archive.verify(digests.items()).ok
        reproject(store, archived=ArchivedBodies(str(archive_dir)))
        assert export(store) == before
    finally:
        store.close()
    assert time.monotonic() - started < 120


def test_passes_beside_ingest_and_projection_lose_nothing(db_url: str, tmp_path: Path) -> None:
    """A server taking deliveries while its projector and its retention passes (every
    second, horizon 0s) run: every body ends in the database or the archive, once."""
    archive_dir = tmp_path / "archive"
    flags = ("--retain-log", "0s", "--archive", str(archive_dir), "--retention-interval", "1s")
    server = ServerProcess(db_url, *flags, log_dir=tmp_path).start()
    sent: dict[str, str] = {}  # delivery_id → SHA-256 of the body sent
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            deadline = time.monotonic() + 4
            n = 0
            while time.monotonic() < deadline:
                batch = [
                    run_event("COMPLETE", f"job{i % 7}", str(uuid.UUID(int=10**6 + i)), at(9))
                    for i in range(n, n + 20)
                ]
                n += 20
                body = orjson.dumps(batch)
                r = client.post(
                    "/api/v1/lineage/batch",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == 202, r.text
                sent[r.json()["delivery_id"]] = hashlib.sha256(body).hexdigest()
            # Until the passes say every body has left (projected, then archived).
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                retention = client.get("/readyz").json()["retention"]
                if retention["bodies_archived"] >= len(sent):
                    break
                time.sleep(0.2)
        assert server.terminate() == 0
    finally:
        server.stop()
    assert retention["status"] == "ok" and retention["bodies_archived"] == len(sent)
    assert run_sql(db_url, "SELECT COUNT(*) FROM delivery_bodies") == [(0,)]
    rows = run_sql(db_url, "SELECT seq, delivery_id FROM deliveries")
    assert sorted(d for _, d in rows) == sorted(sent)
    archive = Archive(str(archive_dir), create=False)
    held = collections.Counter(s for segment in archive.segments() for s in segment.seqs)
    assert sorted(held) == sorted(seq for seq, _ in rows) and set(held.values()) == {1}
    archived = archive.bodies(seq for seq, _ in rows)
    assert {a.delivery_id: hashlib.sha256(a.body).hexdigest() for a in archived.values()} == sent
