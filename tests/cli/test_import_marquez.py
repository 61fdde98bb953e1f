"""`embrasure import marquez` (embrasure/cli/import_marquez.py, store/marquez_source.py):
a real PostgreSQL database laid out as Marquez 0.50 leaves ``lineage_events``, imported
into both backends, again, after a stop midway, and compared with the same events sent
to Embrasure directly (docs/marquez.md#importing-marquezs-history)."""

from __future__ import annotations

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

from conftest import make_client, one_error_line, pg_database
from graph_api import Api, ds, facet, run_event, run_id

# lineage_events as Marquez 0.50's Flyway migrations leave it: V17.2 created it, V20
# dropped its key, V33 added run_uuid, V36 dropped run_id, V54 added created_at (NULL for
# older rows, a default of now() since), V66.2 added _event_type.
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
)
"""
EVENTS = 1_150  # more than two of the import's pages of 500
START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)


def events() -> list[dict[str, Any]]:
    """Runs of jobs writing and reading a few tables, START and COMPLETE each."""
    out = []
    for n in range(EVENTS // 2):
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
    return out[:EVENTS]


def huge() -> dict[str, Any]:
    """An event over Embrasure's facet bound (1 MiB), which Marquez stored."""
    plan = facet("LogicalPlanFacet", "1-0-0", plan="x" * (1_100_000))
    return run_event(
        "COMPLETE",
        "huge",
        run_id(9_999),
        "2026-11-02T00:00:00Z",
        run_facets={"spark.logicalPlan": plan},
    )


@pytest.fixture
def marquez_db() -> Iterator[str]:
    """A Marquez database: every event once, the first as an undated (pre-V54) row, one
    stored twice (Marquez keeps both rows), and one over Embrasure's bounds."""
    with pg_database() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(MARQUEZ_DDL)
            rows = [*events(), events()[7], huge()]
            with conn.cursor() as cur:
                for n, event in enumerate(rows):
                    created = None if n == 0 else START + datetime.timedelta(seconds=n)
                    cur.execute(
                        "INSERT INTO lineage_events (event_time, event, event_type, job_name,"
                        " job_namespace, created_at) VALUES (%s, %s::jsonb, %s, %s, %s, %s)",
                        (
                            event["eventTime"],
                            orjson.dumps(event).decode(),
                            event["eventType"],
                            event["job"]["name"],
                            event["job"]["namespace"],
                            created,
                        ),
                    )
        yield url


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, ["import", "marquez", *args, "--json"])
    return result


def summary(result: Any) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(result.stdout))


def direct_export(tmp_path: Path) -> bytes:
    """The export of a database the same events were sent to directly (batch route)."""
    with make_client(tmp_path / "direct.db") as client:
        api = Api(client)
        sent = events()
        for start in range(0, len(sent), 500):
            api.post(*sent[start : start + 500])
        api.project()
        return api.export()


def export_of(db_url: str) -> bytes:
    with make_client(db_url) as client:
        api = Api(client)
        api.project()
        return api.export()


def test_import_twice_and_resumed(marquez_db: str, db_url: str, tmp_path: Path) -> None:
    state = str(tmp_path / "state.json")
    first = run("--from", marquez_db, "--db", db_url, "--state", state, "--pages", "1")
    assert summary(first) == {
        "read": 500,
        "imported": 500,
        "duplicate": 0,
        "refused": 0,
        "reasons": {},
    }
    # Resumed from the kept position: the rest, the row Marquez stored twice a duplicate,
    # the oversized event refused with the receiver's reason.
    rest = summary(run("--from", marquez_db, "--db", db_url, "--state", state))
    assert rest["read"] == EVENTS + 2 - 500
    assert (rest["imported"], rest["duplicate"], rest["refused"]) == (EVENTS - 500, 1, 1)
    [reason] = rest["reasons"]
    assert "bytes of facets; at most 1,048,576 are accepted" in reason, reason
    # From the start again: every row a duplicate delivery, the refused one too (it is
    # stored, quarantined, for audit: docs/receiver.md).
    again = summary(run("--from", marquez_db, "--db", db_url, "--state", state, "--restart"))
    assert (again["imported"], again["duplicate"], again["refused"]) == (0, EVENTS + 2, 0)
    assert export_of(db_url) == direct_export(tmp_path)


def test_killed_midway_then_rerun(marquez_db: str, tmp_path: Path) -> None:
    """A real kill -9 of the command while it imports; the rerun completes the graph."""
    db = f"sqlite:///{tmp_path / 'killed.db'}"
    state = tmp_path / "state.json"
    argv = [sys.executable, "-m", "embrasure", "import", "marquez", "--from", marquez_db]
    argv += ["--db", db, "--state", str(state)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed after its first page, before its end
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # 1: the oversized event was refused
    assert json.loads(done.stdout)["refused"] == 1
    assert export_of(db) == direct_export(tmp_path)


def test_not_marquez_and_unreachable(tmp_path: Path) -> None:
    with pg_database() as url:
        line = one_error_line(run("--from", url, "--db", f"sqlite:///{tmp_path / 'x.db'}"))
        assert "not a Marquez database" in line
    line = one_error_line(
        run("--from", "postgresql://nobody@127.0.0.1:1/marquez", "--db", "sqlite:///x.db")
    )
    assert "cannot connect to the Marquez database" in line
