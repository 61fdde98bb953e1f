"""`embrasure import marquez` (embrasure/cli/import_marquez.py, store/marquez_source.py):
a real PostgreSQL database laid out as Marquez 0.50 leaves ``lineage_events``, holding
events of the OpenLineage corpus and of a small platform, imported into both backends and
into a running server, again, after Ctrl-C and after a kill -9 midway, and compared with
the same events sent to Embrasure directly with `embrasure ingest`
(docs/marquez.md#importing-marquezs-history)."""

from __future__ import annotations

import contextlib
import datetime
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from click.testing import CliRunner

from embrasure.cli.main import main
from embrasure.projector.canonical import event_id

from conftest import ServerProcess, make_client, one_error_line, pg_database, sqlite_url
from corpus import EVENT_FILES, load
from graph_api import Api, ds, facet, run_event, run_id
from http_client import HTTP

# lineage_events as Marquez 0.50.0's Flyway migrations leave it
# (api/src/main/resources/marquez/db/migration/): V17.2 created it, V20 dropped its key,
# V33 added run_uuid, V36 dropped run_id, V54 added created_at (NULL for older rows, a
# default of now() since) and its index, V66.2 added _event_type.
MARQUEZ_DDL = """
CREATE TABLE lineage_events (
    event_time timestamp with time zone,
    event jsonb,
    event_type text,
    job_name text,
    job_namespace text,
    producer text,
    run_uuid uuid,
    created_at timestamp with time zone DEFAULT (now() AT TIME ZONE 'UTC')::timestamptz,
    _event_type character varying(64) DEFAULT 'RUN_EVENT'
);
CREATE INDEX lineage_events_created_at_index ON lineage_events (created_at DESC NULLS LAST);
"""
PLATFORM = 1_150  # with the corpus, more than two of the import's pages of 500
START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
# Rows a rerun sends again: the last one read and the minute before it (rows a second apart).
REREAD = 61


def platform() -> list[dict[str, Any]]:
    """Runs of jobs writing and reading a few tables, START and COMPLETE each."""
    out = []
    for n in range(PLATFORM // 2):
        job, table = f"job_{n % 40}", f"public.t{n % 25}"
        upstream = f"public.t{(n + 1) % 25}"
        for i, kind in enumerate(("START", "COMPLETE")):
            time = (START + datetime.timedelta(minutes=n, seconds=i)).isoformat()
            out.append(
                run_event(
                    kind,
                    job,
                    run_id(n + 1),
                    time.replace("+00:00", "Z"),
                    inputs=[ds("postgres://db:5432", upstream)],
                    outputs=[ds("postgres://db:5432", table)],
                )
            )
    return out


def corpus() -> list[dict[str, Any]]:
    """The corpus's events (../shared/openlineage; none when it is not there)."""
    out = []
    for entry in EVENT_FILES:
        if entry["format"] in ("object", "array"):
            with contextlib.suppress(pytest.skip.Exception):  # a file it cannot read
                out += [e for e in load(entry) if isinstance(e, dict)]
    return out


def huge() -> dict[str, Any]:
    """An event over Embrasure's facet bound (1 MiB), which Marquez stored: the receiver
    keeps it quarantined."""
    plan = facet("LogicalPlanFacet", "1-0-0", plan="x" * (1_100_000))
    return run_event(
        "COMPLETE", "huge", run_id(9_999), "2026-11-02T00:00:00Z", run_facets={"spark.x": plan}
    )


def deep() -> dict[str, Any]:
    """An event nested deeper than the receiver's bound (64): refused, not stored."""
    nested: dict[str, Any] = {"leaf": 1}
    for _ in range(70):
        nested = {"n": nested}
    return run_event(
        "START", "deep", run_id(9_998), "2026-11-02T00:00:00Z", run_facets={"x": nested}
    )


def sent() -> list[dict[str, Any]]:
    """Every event Marquez was sent, each once."""
    return [*corpus(), *platform(), huge(), deep()]


ROWS = [*sent(), platform()[7]]  # Marquez keeps an event posted twice as two rows
DISTINCT = len({event_id(e) for e in ROWS})  # the corpus repeats some events, too
REFUSED = 2  # huge (quarantined on receipt) and deep (refused: never stored)


@pytest.fixture(scope="module")
def marquez_db() -> Iterator[str]:
    """A Marquez database holding ROWS, the first as an undated (pre-V54) row."""
    with pg_database() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(MARQUEZ_DDL)
            with conn.cursor() as cur:
                for n, event in enumerate(ROWS):
                    created = None if n == 0 else START + datetime.timedelta(seconds=n)
                    cur.execute(
                        "INSERT INTO lineage_events (event_time, event, event_type, job_name,"
                        " job_namespace, created_at) VALUES (%s, %s::jsonb, %s, %s, %s, %s)",
                        (
                            event.get("eventTime"),
                            orjson.dumps(event).decode(),
                            event.get("eventType"),
                            event.get("job", {}).get("name"),
                            event.get("job", {}).get("namespace"),
                            created,
                        ),
                    )
        yield url


@pytest.fixture(scope="module")
def direct_export(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The export of a database the same events were sent to with `embrasure ingest`."""
    folder = tmp_path_factory.mktemp("direct")
    events = folder / "events.jsonl"
    events.write_bytes(b"\n".join(orjson.dumps(e) for e in sent()))
    db = sqlite_url(folder / "direct.db")
    result = CliRunner().invoke(main, ["ingest", str(events), "--db", db, "--json"])
    assert result.exit_code == 1, result.output  # 1: huge and deep did not reach the graph
    return export_of(db)


def export_of(db_url: str) -> bytes:
    with make_client(db_url) as client:
        api = Api(client)
        api.project()
        return api.export()


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, ["import", "marquez", *args, "--json"], env=env)


def summary(result: Any) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    assert result.stdout, result.output  # exit code 1 and no summary: the import failed
    return dict(json.loads(result.stdout))


def test_import_resumed_and_again(
    marquez_db: str, db_url: str, tmp_path: Path, direct_export: bytes
) -> None:
    state = str(tmp_path / "state.json")
    first = summary(run("--from", marquez_db, "--db", db_url, "--state", state, "--pages", "1"))
    assert first["read"] == 500
    assert first["imported"] + first["duplicate"] + first["refused"] == 500
    # Resumed from the kept position, the last minute before it read again: the rest, the
    # rows already there (reread, the row Marquez stored twice, the corpus's repeats) are
    # duplicates, and the two over the receiver's bounds are refused with its reasons.
    # A backlog bound low enough that the receiver answers 429 meanwhile: into --db the
    # import projects the backlog itself and goes on.
    overloaded = {"EMBRASURE_MAX_BACKLOG_ITEMS": "50"}
    rest = summary(run("--from", marquez_db, "--db", db_url, "--state", state, env=overloaded))
    assert rest["read"] == len(ROWS) - 500 + REREAD
    assert first["imported"] + rest["imported"] == DISTINCT - REFUSED
    assert first["refused"] + rest["refused"] == REFUSED
    assert rest["duplicate"] == REREAD + len(ROWS) - DISTINCT - first["duplicate"]
    reasons = {**first["reasons"], **rest["reasons"]}
    assert len(reasons) == 2, reasons
    assert any("bytes of facets; at most 1,048,576 are accepted" in r for r in reasons)
    assert any("74 levels deep; at most 64 are accepted" in r for r in reasons), reasons
    # From the start again: every row a duplicate delivery, the quarantined one too (it is
    # stored, for audit: docs/receiver.md); the one never stored is refused again.
    again = summary(run("--from", marquez_db, "--db", db_url, "--state", state, "--restart"))
    assert (again["imported"], again["duplicate"], again["refused"]) == (0, len(ROWS) - 1, 1)
    assert export_of(db_url) == direct_export


def test_interrupted_then_killed_then_rerun(
    marquez_db: str, tmp_path: Path, direct_export: bytes
) -> None:
    """Ctrl-C (SIGINT) stops with one line, keeping the position; a rerun killed -9 after
    its first page; the last run completes the graph."""
    db = sqlite_url(tmp_path / "imported.db")
    state = tmp_path / "state.json"
    argv = [sys.executable, "-m", "embrasure", "import", "marquez", "--from", marquez_db]
    argv += ["--db", db, "--state", str(state)]

    def after_a_page(proc: subprocess.Popen[bytes], before: bytes | None) -> None:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if state.exists() and state.read_bytes() not in (before, b""):
                return
            time.sleep(0.01)
        raise AssertionError(f"no page kept: exit {proc.returncode}")

    # SIGINT as a terminal's Ctrl-C finds it: a shell that starts a job in the background
    # without job control has it ignored, and the child would inherit that.
    ctrl_c = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    after_a_page(ctrl_c, None)
    ctrl_c.send_signal(signal.SIGINT)
    out, err = ctrl_c.communicate(timeout=60)
    assert ctrl_c.returncode == 130, err
    [line] = err.decode().splitlines()
    assert line.startswith("interrupted after ") and "run the same command again" in line
    assert out == b""
    kept = state.read_bytes()

    killed = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after_a_page(killed, kept)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL

    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # 1: events were refused
    assert json.loads(done.stdout)["read"] < len(ROWS)  # it went on, not from the start
    assert export_of(db) == direct_export


def test_into_a_server(marquez_db: str, tmp_path: Path, direct_export: bytes) -> None:
    """--url: the same deliveries over HTTP to a running server."""
    server = ServerProcess(tmp_path / "served.db").start()
    try:
        state = str(tmp_path / "state.json")
        first = summary(run("--from", marquez_db, "--url", server.url, "--state", state))
        assert (first["imported"], first["refused"]) == (DISTINCT - REFUSED, REFUSED)
        again = summary(
            run("--from", marquez_db, "--url", server.url, "--state", state, "--restart")
        )
        assert (again["imported"], again["duplicate"]) == (0, len(ROWS) - 1)
        deadline = time.monotonic() + 60  # the server's projector catching up
        while (export := HTTP.get(f"{server.url}/api/v1/export").content) != direct_export:
            assert time.monotonic() < deadline, export[:200]
            time.sleep(0.2)
    finally:
        server.stop()


def test_errors(tmp_path: Path) -> None:
    db = sqlite_url(tmp_path / "x.db")
    with pg_database() as url:
        assert "not a Marquez database" in one_error_line(run("--from", url, "--db", db))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE lineage_events (event_time timestamptz, event jsonb)")
        assert "upgrade Marquez first" in one_error_line(run("--from", url, "--db", db))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE lineage_events")
            conn.execute(MARQUEZ_DDL)
        state = tmp_path / "state.json"
        state.write_text("{not json")
        line = one_error_line(run("--from", url, "--db", db, "--state", str(state)))
        assert "cannot read the kept position" in line
    line = one_error_line(run("--from", "postgresql://nobody@127.0.0.1:1/marquez", "--db", db))
    assert "cannot connect to the Marquez database" in line
