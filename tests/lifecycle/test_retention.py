"""The retention pass (docs/operations.md#retention-and-the-archive), on both backends:
bodies of projected deliveries leave the database for the archive, and everything that
read them still answers the same."""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from embrasure.app import build_app
from embrasure.cli import retention as cli_retention
from embrasure.errors import ArchiveCorrupt, ArchiveUnavailable
from embrasure.lifecycle.archive import Archive, ArchivedDelivery
from embrasure.lifecycle.retention import RetentionLoop, run_pass, trimmed_deliveries
from embrasure.lifecycle.trimmed import ArchivedBodies
from embrasure.projector.worker import reproject
from embrasure.settings import Settings, parse_duration
from embrasure.store import Store, open_store
from embrasure.store.pacing import SWITCH_INTERVAL_S
from embrasure.store.sqlite import SQLiteStore

from conftest import ServerProcess, run_sql, stacks
from graph_api import ORDERS, REPORT, Api, daily_run, export_events
from http_client import HTTP

ZERO = datetime.timedelta(0)


def cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[bytes]:
    """`embrasure ARGS…` in a child process."""
    command = [sys.executable, "-m", "embrasure", *args]
    return subprocess.run(command, capture_output=True, timeout=60, check=check)


def app_client(db_url: str, **settings: Any) -> TestClient:
    store = open_store(db_url)
    return TestClient(build_app(Settings(db=db_url, **settings), store))


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    return tmp_path / "archive"


@pytest.fixture
def served(db_url: str, archive_dir: Path) -> Iterator[Api]:
    """The app with --archive set (what `serve --archive` reads trimmed bodies from)."""
    with app_client(db_url, archive=str(archive_dir)) as client:
        yield Api(client)
    client.app.state.store.close()  # type: ignore[attr-defined]


def stored_bodies(store: Store, seqs: list[int]) -> dict[int, bytes | None]:
    with store.reader() as reader:
        return {seq: reader.body(seq) for seq in seqs}


def all_events(api: Api) -> list[Any]:
    doc = api.get("/api/v1/events", limit=1000)
    assert doc["next_cursor"] is None
    events: list[Any] = doc["events"]
    return events


def seqs_of(api: Api, delivery_ids: list[str]) -> list[int]:
    with api.store.reader() as reader:
        return [reader.delivery(d).seq for d in delivery_ids]


def quarantined_run() -> dict[str, Any]:
    bad = daily_run(9)
    bad["run"]["runId"] = "not-a-uuid"
    return bad


# -- settings --------------------------------------------------------------------------------


def test_a_process_with_retention_passes_switches_the_gil_every_millisecond(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # store/pacing.py SWITCH_INTERVAL_S: at the default 5 ms a pass's thread, holding
    # SQLite's write lock, waited out a busy projector's interval at every statement.
    switched: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", switched.append)
    store = SQLiteStore(str(tmp_path / "e.db"))
    try:
        assert cli_retention.retention_loop(Settings(), store) is None
        assert switched == []  # no retention, no change
        loop = cli_retention.retention_loop(
            Settings(retain_log="5m", archive=str(tmp_path / "archive")), store
        )
        assert isinstance(loop, RetentionLoop)
        assert switched == [SWITCH_INTERVAL_S] == [0.001]
    finally:
        store.close()


def test_durations_parse_and_bad_ones_say_what_is_accepted() -> None:
    assert parse_duration("90d") == datetime.timedelta(days=90)
    assert parse_duration("12h") == datetime.timedelta(hours=12)
    assert parse_duration("1h30m") == datetime.timedelta(minutes=90)
    assert parse_duration("0s") == ZERO
    for bad in ("", "90", "1.5h", "3y", "h", "-1d"):
        with pytest.raises(ValueError, match=r"not a duration.*90d, 12h, 5m, 0s"):
            parse_duration(bad)
    with pytest.raises(ValueError, match=r"EMBRASURE_RETAIN_LOG='3y': '3y' is not a duration"):
        Settings.load({}, {"EMBRASURE_RETAIN_LOG": "3y", "EMBRASURE_ARCHIVE": "/a"})
    with pytest.raises(ValueError, match="--retain-log needs --archive"):
        Settings(retain_log="90d")
    with pytest.raises(
        ValueError, match=r"--retention-interval .*'0s': must be a duration .*, at least 1s"
    ):
        Settings(retention_interval="0s")
    assert Settings(retain_log="5m", archive="/a").log_horizon() == datetime.timedelta(minutes=5)
    assert Settings().log_horizon() is None


def test_retention_command_refuses_a_horizon_without_an_archive(db_url: str) -> None:
    out = cli("retention", "--db", db_url, "--retain-log", "1h")
    assert out.returncode == 1
    assert out.stderr.decode().startswith("embrasure: error: --retain-log needs --archive")


# -- a pass ------------------------------------------------------------------------------------


def test_a_pass_moves_bodies_and_every_reader_still_answers(
    served: Api, db_url: str, archive_dir: Path
) -> None:
    api = served
    events = export_events()
    receipts = [api.post(e, single=True) for e in events[:3]]
    receipts.append(api.post(*events[3:], quarantined_run()))  # a batch, one item bad
    api.project()
    ids = [r["delivery_id"] for r in receipts]
    seqs = seqs_of(api, ids)
    exported, views, events_before = api.export(), [api.delivery(d) for d in ids], all_events(api)
    bodies = stored_bodies(api.store, seqs)

    report = run_pass(api.store, Archive(str(archive_dir)), ZERO)

    assert report.error is None and not report.skipped
    assert (report.bodies, report.segments, report.adopted) == (len(ids), 1, 0)
    assert report.bytes_archived == sum(len(b or b"") for b in bodies.values())
    assert report.bytes_trimmed > 0
    assert stored_bodies(api.store, seqs) == dict.fromkeys(seqs)  # none left in the database
    archived = Archive(str(archive_dir)).bodies(seqs)
    assert {s: a.body for s, a in archived.items()} == bodies
    assert [archived[s].delivery_id for s in seqs] == ids
    # `archive verify --db`'s check: every trimmed delivery in the archive, same SHA-256.
    trimmed = list(trimmed_deliveries(api.store))
    assert trimmed == [(s, hashlib.sha256(bodies[s] or b"").hexdigest()) for s in seqs]
    assert Archive(str(archive_dir), create=False).verify(trimmed).ok
    assert cli("archive", "verify", "--archive", str(archive_dir), check=True).returncode == 0
    checked = cli("archive", "verify", "--archive", str(archive_dir), "--db", db_url, check=True)
    assert f"{len(ids)} trimmed in the database, checked: ok" in checked.stdout.decode()
    # The rows stay: status lookups, the graph, and events read from the archive.
    assert [api.delivery(d) for d in ids] == views
    assert api.export() == exported
    assert all_events(api) == events_before
    # A re-sent archived body is still a duplicate, with its original id.
    again = api.post(events[0], single=True)
    assert (again["duplicate"], again["delivery_id"]) == (True, ids[0])
    # Replay reads the archived bytes (the item is still bad: still quarantined).
    r = api.client.post(f"/api/v1/quarantine/{ids[3]}/{len(events) - 3}/replay")
    assert r.status_code == 200, r.text
    assert r.json()["outcome"] == "quarantined"
    assert "runId" in r.json()["reason"]
    # A rebuild reads the archive and gives the same graph.
    reproject(api.store, archived=ArchivedBodies(str(archive_dir)))
    assert api.export() == exported
    out = cli("reproject", "--db", db_url)
    assert out.returncode == 1
    assert b"give --archive" in out.stderr
    cli("reproject", "--db", db_url, "--archive", str(archive_dir), check=True)
    assert api.export() == exported
    # Nothing more to do: a second pass archives nothing, and writes no segment.
    again_report = run_pass(api.store, Archive(str(archive_dir)), ZERO)
    assert (again_report.bodies, again_report.segments, again_report.error) == (0, 0, None)
    assert len(Archive(str(archive_dir)).segments()) == 1


def test_without_an_archive_a_trimmed_body_is_a_clear_problem(db_url: str, tmp_path: Path) -> None:
    with app_client(db_url) as client:
        api = Api(client)
        api.post(daily_run(1), single=True)
        receipt = api.post(quarantined_run(), single=True)
        api.project()
        assert run_pass(api.store, Archive(str(tmp_path / "a")), ZERO).bodies == 2
        doc = api.problem("GET", "/api/v1/events", 503)
        assert doc["type"].endswith("/archive-unavailable")
        assert "give --archive" in doc["detail"]
        r = client.post(f"/api/v1/quarantine/{receipt['delivery_id']}/0/replay")
        assert r.status_code == 503 and r.json()["type"].endswith("/archive-unavailable")
        assert api.delivery(receipt["delivery_id"])["state"] == "quarantined"
    api.store.close()


def test_archive_verify_with_the_database_names_a_trimmed_delivery_it_lacks(
    served: Api, db_url: str, archive_dir: Path, tmp_path: Path
) -> None:
    served.ingest(*export_events()[:2])
    run_pass(served.store, Archive(str(archive_dir)), ZERO)
    # Another archive, holding an other body under the same seq: the database's SHA-256
    # for it is not the archived body's.
    other = tmp_path / "other"
    (delivery,) = Archive(str(archive_dir)).bodies([1]).values()
    Archive(str(other)).write_segment([dataclasses.replace(delivery, body=b"[]")])
    out = cli("archive", "verify", "--archive", str(other), "--db", db_url)
    assert out.returncode == 1
    assert "SHA-256 is not the one the database recorded: seqs 1" in out.stdout.decode()
    assert "1 trimmed in the database, checked: 1 problem" in out.stderr.decode()


def test_an_archive_missing_a_trimmed_body_names_it(served: Api, archive_dir: Path) -> None:
    served.post(daily_run(1), single=True)
    served.project()
    run_pass(served.store, Archive(str(archive_dir)), ZERO)
    for segment in Archive(str(archive_dir)).segments():
        Archive(str(archive_dir)).discard(segment)
    report = Archive(str(archive_dir)).verify(trimmed_deliveries(served.store))
    assert report.problems == ("1 delivery trimmed but in no segment: seqs 1",)
    doc = served.problem("GET", "/api/v1/events", 500)
    assert doc["type"].endswith("/archive-corrupt")
    assert "holds no segment with it" in doc["detail"]
    with pytest.raises(ArchiveCorrupt, match="seq 1 "):
        ArchivedBodies(str(archive_dir)).bodies([1])


def test_only_projected_deliveries_before_the_horizon_leave(served: Api, archive_dir: Path) -> None:
    api = served
    first = [api.post(daily_run(n), single=True)["delivery_id"] for n in range(3)]
    archive = Archive(str(archive_dir))
    # Received now: a 1-hour horizon keeps them; unprojected, even 0s keeps them.
    assert run_pass(api.store, archive, datetime.timedelta(hours=1)).bodies == 0
    assert run_pass(api.store, archive, ZERO).bodies == 0
    api.project()
    later = api.post(daily_run(7), single=True)["delivery_id"]  # not projected
    report = run_pass(api.store, archive, ZERO)
    assert report.bodies == 3
    kept = stored_bodies(api.store, seqs_of(api, [*first, later]))
    assert [b is None for b in kept.values()] == [True, True, True, False]
    assert api.delivery(later)["state"] == "accepted"
    api.project()
    assert run_pass(api.store, archive, ZERO).bodies == 1
    assert Archive(str(archive_dir), create=False).verify().ok


def test_a_segment_written_before_a_crash_is_adopted_not_written_again(
    served: Api, archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = served
    for n in range(5):
        api.post(daily_run(n), single=True)
    api.project()
    from embrasure.lifecycle import retention

    class Crash(BaseException):
        """What a kill -9 between the segment's write and its transaction looks like."""

    def crash(self: Any, segment: Any) -> int:
        raise Crash

    monkeypatch.setattr(retention._Pass, "_trim", crash)
    with pytest.raises(Crash):
        run_pass(api.store, Archive(str(archive_dir)), ZERO)
    monkeypatch.undo()
    assert len(Archive(str(archive_dir)).segments()) == 1
    assert all(b is not None for b in stored_bodies(api.store, [1, 2, 3, 4, 5]).values())
    report = run_pass(api.store, Archive(str(archive_dir)), ZERO)
    assert (report.adopted, report.bodies, report.segments) == (1, 5, 1)
    assert len(Archive(str(archive_dir)).segments()) == 1
    assert stored_bodies(api.store, [1, 2, 3, 4, 5]) == dict.fromkeys([1, 2, 3, 4, 5])
    assert Archive(str(archive_dir), create=False).verify().ok


def test_another_databases_segment_is_never_adopted(
    served: Api, archive_dir: Path, tmp_path: Path
) -> None:
    api = served
    ids = [api.post(daily_run(n), single=True)["delivery_id"] for n in range(2)]
    api.project()
    archive = Archive(str(archive_dir))
    # Seq 2 of some other log, in this log's archive.
    stranger = ArchivedDelivery(2, "01OTHERDATABASE0000000000", "", "2026-01-01T00:00:00Z", b"{}")
    archive.write_segment([stranger])
    report = run_pass(api.store, archive, ZERO)
    assert report.error is not None
    assert "holds deliveries this database does not (seq 2 and 0 more)" in report.error
    assert all(b is not None for b in stored_bodies(api.store, seqs_of(api, ids)).values())


def test_an_unwritable_archive_deletes_nothing_and_says_why(
    served: Api, db_url: str, tmp_path: Path
) -> None:
    api = served
    ids = [api.post(daily_run(n), single=True)["delivery_id"] for n in range(3)]
    api.project()
    seqs = seqs_of(api, ids)
    before = stored_bodies(api.store, seqs)
    # Tests run as root, for whom a read-only mode is no barrier: a file where the
    # archive's directory should be is a fault no user can write through.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    location = str(blocker / "archive")
    loop = RetentionLoop(api.store, location, ZERO, 3600)
    report = loop.run_once()
    assert report.error is not None and "not-a-directory" in report.error
    assert stored_bodies(api.store, seqs) == before
    readyz = api.client.get("/readyz")
    assert readyz.status_code == 200  # still taking deliveries; the failure is reported
    out = cli("retention", "--db", db_url, "--retain-log", "0s", "--archive", location)
    assert out.returncode == 1
    assert out.stderr.decode().startswith("embrasure: error:")
    assert "not-a-directory" in out.stderr.decode()
    assert stored_bodies(api.store, seqs) == before


def test_readyz_and_metrics_report_the_passes(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = open_store(db_url)
    loop = RetentionLoop(store, str(tmp_path / "archive"), ZERO, 3600)
    monkeypatch.setattr(loop, "start", lambda: None)  # passes run when the test says
    with TestClient(build_app(Settings(db=db_url), store, retention=loop)) as client:
        api = Api(client)
        api.post(daily_run(1), single=True)
        api.project()
        loop.run_once()
        ready = api.get("/readyz")
        assert ready["retention"]["status"] == "ok"
        assert ready["retention"]["bodies_archived"] == 1
        metrics = client.get("/metrics").text
        assert "embrasure_retention_bodies_archived_total 1.0" in metrics
        assert "embrasure_retention_failures_total 0.0" in metrics
        assert "embrasure_retention_last_pass_timestamp_seconds" in metrics
        # The archive becomes unwritable: the check fails, readiness stays.
        loop.location = str(blocker / "archive")
        loop._archive = None
        loop.run_once()
        ready = api.get("/readyz")
        assert ready["status"] == "ready"
        assert ready["retention"]["status"] == "failing"
        assert "file" in ready["retention"]["reason"]
        metrics = client.get("/metrics").text
        assert "embrasure_retention_failures_total 1.0" in metrics
        assert "embrasure_retention_failing 1.0" in metrics
    store.close()


def test_the_retention_command_prints_what_it_did(db_url: str, archive_dir: Path) -> None:
    with app_client(db_url) as client:
        api = Api(client)
        body = orjson.dumps(daily_run(3))
        api.post(daily_run(3), single=True)
        api.project()
    api.store.close()
    out = cli(
        "retention",
        "--db",
        db_url,
        "--retain-log",
        "0s",
        "--archive",
        str(archive_dir),
        "--json",
        check=True,
    )
    doc = orjson.loads(out.stdout)
    assert (doc["bodies"], doc["segments"], doc["error"]) == (1, 1, None)
    assert doc["bytes_archived"] == len(body)
    (archived,) = Archive(str(archive_dir)).bodies([1]).values()
    assert hashlib.sha256(archived.body).digest() == hashlib.sha256(body).digest()
    text = cli(
        "retention", "--db", db_url, "--retain-log", "0s", "--archive", str(archive_dir), check=True
    ).stdout.decode()
    assert text.startswith("archived 0 deliveries (0 bytes) received before ")


def test_a_day_partition_wholly_archived_is_dropped_not_emptied(
    pg_db: str, archive_dir: Path
) -> None:
    with app_client(pg_db, archive=str(archive_dir)) as client:
        api = Api(client)
        ids = [api.post(daily_run(n), single=True)["delivery_id"] for n in range(5)]
        api.project()
        # Three deliveries of a past day, in that day's partition (as the store makes
        # them ahead of time); the other two received today.
        old = "2026-01-01T12:00:00.000000Z"
        run_sql(
            pg_db,
            "CREATE TABLE delivery_bodies_test_day PARTITION OF delivery_bodies"
            " FOR VALUES FROM ('2026-01-01') TO ('2026-01-02')",
        )
        run_sql(pg_db, "UPDATE delivery_bodies SET received_at = ? WHERE seq <= 3", (old,))
        run_sql(pg_db, "UPDATE deliveries SET received_at = ? WHERE seq <= 3", (old,))
        assert run_sql(pg_db, "SELECT COUNT(*) FROM delivery_bodies_test_day") == [(3,)]
        seqs = seqs_of(api, ids)
        bodies = stored_bodies(api.store, seqs)

        report = run_pass(api.store, Archive(str(archive_dir)), datetime.timedelta(days=1))

        assert (report.bodies, report.error) == (3, None)
        assert report.bytes_trimmed == 0  # not one DELETE in the partition...
        assert report.bytes_given_back > 0  # ...it was dropped whole
        assert run_sql(pg_db, "SELECT to_regclass('delivery_bodies_test_day')") == [(None,)]
        kept = stored_bodies(api.store, seqs)
        assert [kept[s] is None for s in seqs] == [True, True, True, False, False]
        archived = Archive(str(archive_dir)).bodies(seqs[:3])
        assert {s: a.body for s, a in archived.items()} == {s: bodies[s] for s in seqs[:3]}
        assert [api.delivery(d)["state"] for d in ids] == ["projected"] * 5
    api.store.close()


def test_serve_runs_a_pass_every_interval(db_url: str, tmp_path: Path) -> None:
    archive_dir = tmp_path / "archive"
    flags = ("--retain-log", "0s", "--archive", str(archive_dir), "--retention-interval", "1s")
    server = ServerProcess(db_url, *flags, log_dir=tmp_path).start()
    try:
        body = orjson.dumps(daily_run(4))
        json_type = {"Content-Type": "application/json"}
        r = HTTP.post(server.url + "/api/v1/lineage", content=body, headers=json_type, timeout=10)
        assert r.status_code == 202, r.text
        delivery_id = r.json()["delivery_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready = HTTP.get(server.url + "/readyz", timeout=10).json()
            if ready["retention"]["bodies_archived"] == 1:
                break
            time.sleep(0.2)
        assert ready["retention"]["status"] == "ok"
        assert ready["retention"]["bodies_archived"] == 1
        (archived,) = Archive(str(archive_dir)).bodies([1]).values()
        assert (archived.delivery_id, archived.body) == (delivery_id, body)
        events = HTTP.get(server.url + "/api/v1/events", timeout=10).json()["events"]
        assert [e["event"] for e in events] == [orjson.loads(body)]
        assert server.terminate() == 0
    finally:
        server.stop()


def project_with_passes(db_url: str, archive_dir: Path) -> subprocess.Popen[bytes]:
    """`embrasure project` with a retention pass every second, started once a delivery is
    stored, and returned once a pass has archived it (or 30 s have passed)."""
    flags = ["--retain-log", "0s", "--archive", str(archive_dir), "--retention-interval", "1s"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "project", "--db", db_url, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not Archive(str(archive_dir)).segments():
        time.sleep(0.2)
    return proc


def stored_run(db_url: str, n: int) -> dict[str, Any]:
    """A run posted through the app, its store closed; the receipt."""
    with app_client(db_url) as client:
        receipt: dict[str, Any] = Api(client).post(daily_run(n), single=True)
    client.app.state.store.close()  # type: ignore[attr-defined]
    return receipt


def assert_exits_cleanly(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """Exit status 0 within ``seconds`` of a SIGTERM, or fail with every thread's stack."""
    try:
        assert proc.wait(seconds) == 0
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"still running {seconds:g} s after SIGTERM:\n{stacks(proc.pid)}"
        ) from None


def test_project_runs_passes_too(db_url: str, archive_dir: Path) -> None:
    receipt = stored_run(db_url, 5)
    proc = project_with_passes(db_url, archive_dir)
    try:
        proc.terminate()
        assert_exits_cleanly(proc, 30)
    finally:
        proc.kill()
    (archived,) = Archive(str(archive_dir)).bodies([1]).values()
    assert archived.delivery_id == receipt["delivery_id"]
    assert run_sql(db_url, "SELECT COUNT(*) FROM delivery_bodies") == [(0,)]


def test_sigterm_to_a_thread_other_than_the_main_one_stops_project(
    db_url: str, archive_dir: Path
) -> None:
    """A command that runs until SIGTERM stops on it whichever of its threads the kernel
    hands it to (processes/stopping.py): CPython runs the handler in the main thread
    only, and delivered to another thread the signal only trips it. `project` with its
    retention thread slept through it in a bare ``Event.wait()``."""
    stored_run(db_url, 1)
    proc = project_with_passes(db_url, archive_dir)
    try:
        assert proc.poll() is None, f"project exited with {proc.returncode}"
        others = [t for t in map(int, os.listdir(f"/proc/{proc.pid}/task")) if t != proc.pid]
        assert others, "project runs no thread besides the main one"
        # tgkill(2), glibc's: a signal to one thread of another process (os.kill lets
        # the kernel choose the thread).
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.tgkill(proc.pid, others[0], signal.SIGTERM) != 0:
            raise OSError(ctypes.get_errno(), "tgkill")
        assert_exits_cleanly(proc, 15)
    finally:
        proc.kill()


def test_an_archive_that_fills_up_mid_pass_keeps_what_it_did_not_take(
    served: Api, archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = served
    ids = [api.post(daily_run(n), single=True)["delivery_id"] for n in range(5)]
    api.project()
    seqs = seqs_of(api, ids)
    written: list[int] = []
    real = Archive.write_segment

    def fills_up(self: Archive, deliveries: Any) -> Any:
        if written:
            raise ArchiveUnavailable(f"archive {self.location}: No space left on device (ENOSPC)")
        written.append(len(deliveries))
        return real(self, deliveries)

    monkeypatch.setattr(Archive, "write_segment", fills_up)
    report = run_pass(api.store, Archive(str(archive_dir)), ZERO, batch=2)
    assert report.error is not None and "ENOSPC" in report.error
    assert (report.bodies, report.segments) == (2, 1)
    kept = stored_bodies(api.store, seqs)
    assert [kept[s] is None for s in seqs] == [True, True, False, False, False]
    monkeypatch.undo()
    report = run_pass(api.store, Archive(str(archive_dir)), ZERO, batch=2)
    assert (report.bodies, report.segments, report.error) == (3, 2, None)
    assert Archive(str(archive_dir), create=False).verify().ok


def post_incompressible_runs(api: Api, count: int) -> None:
    """``count`` runs of ~8 KiB bodies that compression cannot shrink much, projected:
    pages for a pass to give back."""
    for n in range(count):
        event = daily_run(n)
        event["run"]["facets"]["noise"] = {
            "_producer": "https://example.com/test",
            "_schemaURL": "https://example.com/noise.json",
            "hex": hashlib.sha256(str(n).encode()).hexdigest() * 128,
        }
        api.post(event, single=True)
    api.project()
    # The first dictionary's training, and the compression again of the bodies before
    # it, run on threads of their own (store/compression.py): done before the pages are
    # counted, or their commits change the file between two counts.
    assert isinstance(api.store, SQLiteStore)
    api.store.codec.wait_for_training()


def _both_files(url: str, pragma: str) -> int:
    """A page count of the store's two files together, the log's and the graph's
    (store/sqlite_files.py): a pass gives back both's free pages."""
    return sum(run_sql(url, f"PRAGMA {file}.{pragma}")[0][0] for file in ("main", "log"))


def test_sqlite_gives_the_space_back(tmp_path: Path, archive_dir: Path) -> None:
    url = f"sqlite:///{tmp_path / 'space.db'}"
    with app_client(url) as client:
        api = Api(client)
        post_incompressible_runs(api, 300)
        pages_before = _both_files(url, "page_count")
        report = run_pass(api.store, Archive(str(archive_dir)), ZERO)
        pages_after = _both_files(url, "page_count")
        (page_size,) = run_sql(url, "PRAGMA page_size")[0]
        assert report.bodies == 300 and report.error is None
        # The files shrank by what the pass says it gave back (give or take the pages
        # its own log_segments row took).
        shrunk = (pages_before - pages_after) * page_size
        assert abs(shrunk - report.bytes_given_back) <= 4 * page_size
        assert report.bytes_given_back >= report.bytes_trimmed // 2
        assert _both_files(url, "freelist_count") == 0
    api.store.close()


def test_a_servers_pass_keeps_the_pages_it_freed_for_one_interval(
    tmp_path: Path, archive_dir: Path
) -> None:
    """A server's passes (RetentionLoop) leave the pages they free to the writes of the
    next interval, and give back those still free at the next pass: the file does not
    shrink at every pass only to grow again (docs/operations.md#retention-and-the-archive)."""
    url = f"sqlite:///{tmp_path / 'reserve.db'}"
    with app_client(url) as client:
        api = Api(client)
        post_incompressible_runs(api, 300)
        (page_size,) = run_sql(url, "PRAGMA page_size")[0]
        free_before = _both_files(url, "freelist_count")
        loop = RetentionLoop(api.store, str(archive_dir), ZERO, 3600)
        first = loop.run_once()
        assert first.bodies == 300 and first.error is None
        assert first.bytes_given_back <= free_before * page_size
        kept = _both_files(url, "freelist_count")
        assert kept * page_size >= first.bytes_trimmed // 2
        # Nothing wrote meanwhile: the next pass finds them unused and gives them back.
        second = loop.run_once()
        assert second.bodies == 0
        assert second.bytes_given_back >= (kept - 4) * page_size
        assert _both_files(url, "freelist_count") <= 4
    api.store.close()


def test_a_pass_starts_every_interval_however_long_the_last_one_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    store = open_store(f"sqlite:///{tmp_path / 'cadence.db'}")
    loop = RetentionLoop(store, "", None, 10.0)
    took = iter([4.0, 15.0, 10.0])
    waits: list[float] = []

    def a_pass() -> object:
        clock[0] += next(took)
        return None

    class Stop:  # the loop's stop event, as a clock that moves while it waits
        def is_set(self) -> bool:
            return len(waits) == 3

        def wait(self, timeout: float) -> bool:
            waits.append(timeout)
            clock[0] += timeout
            return False

    monkeypatch.setattr(loop, "run_once", a_pass)
    monkeypatch.setattr(loop, "_stop", Stop())
    try:
        loop._run()
    finally:
        store.close()
    assert waits == [6.0, 0.0, 0.0]


def test_an_archived_hide_still_holds_after_a_rebuild(served: Api, archive_dir: Path) -> None:
    api = served
    api.post(daily_run(1), single=True)
    api.project()  # the dataset is known: it may be hidden
    r = api.client.post(
        "/api/v1/admin/hide",
        content=orjson.dumps(
            {"type": "dataset", "namespace": REPORT[0], "name": REPORT[1], "reason": "t"}
        ),
    )
    assert r.status_code == 202, r.text
    api.project()
    exported = api.export()
    listed = [d["name"] for d in api.get("/api/v1/datasets")["datasets"]]
    assert listed == [ORDERS[1]]  # the report is hidden
    assert run_pass(api.store, Archive(str(archive_dir)), ZERO).bodies == 2  # the hide too
    reproject(api.store, archived=ArchivedBodies(str(archive_dir)))
    assert api.export() == exported
    assert [d["name"] for d in api.get("/api/v1/datasets")["datasets"]] == listed
