"""`embrasure ingest` as a new user meets it (issue 16): files with no events, a failed
request told apart from invalid events, an ingest-only token, the projector's warnings;
and the one-liners of `embrasure project` and `embrasure backup`. Against real SQLite
files and a real `embrasure serve` process over HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from embrasure.cli.main import main

from conftest import ServerProcess, one_error_line

CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def event(n: int, event_time: str | None = None) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": event_time or f"2026-02-01T00:00:{n % 60:02d}Z",
        "producer": "https://example.com/tests",
        "schemaURL": f"{CORE}#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=n + 1))},
        "job": {"namespace": "tests", "name": "nightly"},
        "outputs": [{"namespace": "s3://out", "name": f"table_{n}"}],
    }


def write_lines(path: Path, *events: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def create_token(db: Path, scope: str) -> str:
    made = cli("tokens", "create", "--scope", scope, "--db", f"sqlite:///{db}")
    assert made.exit_code == 0, made.output
    return made.stdout.splitlines()[-1]  # docs/security.md: alone on the last line


# -- no events -------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n  \n", "[]", '{"events": []}'])
def test_a_file_with_no_events_says_so_and_creates_no_database(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(content)
    db = tmp_path / "new.db"
    line = one_error_line(cli("ingest", str(path), "--db", f"sqlite:///{db}"))
    assert line == f"embrasure: error: no events in {path}"
    assert not db.exists()


def test_several_files_with_no_events_are_named(tmp_path: Path) -> None:
    for name in ("a.json", "b.json", "c.jsonl", "d.ndjson"):
        (tmp_path / name).write_text("")
    line = one_error_line(cli("ingest", str(tmp_path), "--db", f"sqlite:///{tmp_path}/x.db"))
    assert line == (
        f"embrasure: error: no events in {tmp_path}/a.json, {tmp_path}/b.json, "
        f"{tmp_path}/c.jsonl and 1 more"
    )


# -- failed requests and tokens, over HTTP ----------------------------------------------------


@pytest.fixture
def secured(db_path: Path) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    """A server with auth on: a token of scope ingest and one of scope read."""
    tokens = {scope: create_token(db_path, scope) for scope in ("ingest", "read")}
    server = ServerProcess(db_path).start()
    try:
        yield server, tokens
    finally:
        server.stop()


def test_an_ingest_token_ingests_and_gets_the_whole_summary(
    secured: tuple[ServerProcess, dict[str, str]], tmp_path: Path
) -> None:
    server, tokens = secured
    path = write_lines(tmp_path / "events.jsonl", event(0), event(1))
    result = cli("ingest", str(path), "--url", server.url, "--token", tokens["ingest"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"2 events from 1 file to {server.url}: 2 accepted, 0 duplicate, 0 invalid",
        "projection: 2 projected, 0 quarantined, 0 pending",
    ]


def test_a_refused_request_is_an_error_not_invalid_events(
    secured: tuple[ServerProcess, dict[str, str]], tmp_path: Path
) -> None:
    server, tokens = secured
    path = write_lines(tmp_path / "events.jsonl", event(0))
    batch = f"{server.url}/api/v1/lineage/batch"

    line = one_error_line(cli("ingest", str(path), "--url", server.url))
    assert line.startswith(f"embrasure: error: POST {batch}: 401 Unauthorized: ")
    assert line.endswith(" — give one with --token or EMBRASURE_TOKEN")

    line = one_error_line(cli("ingest", str(path), "--url", server.url, "--token", tokens["read"]))
    assert line.startswith(f"embrasure: error: POST {batch}: 403 Forbidden: ")
    assert "needs scope 'ingest'" in line

    doubled = f"{server.url}/api/v1"
    line = one_error_line(cli("ingest", str(path), "--url", doubled, "--token", tokens["ingest"]))
    assert line.startswith(f"embrasure: error: POST {doubled}/api/v1/lineage/batch: 404 Not Found")
    assert line.endswith(" — did you give --url the server's root, not /api/v1?")


# -- warnings --------------------------------------------------------------------------------


def test_the_projectors_warnings_are_shown_once_each_with_a_count(tmp_path: Path) -> None:
    naive = "2026-02-01T00:00:00"  # no timezone: read as UTC, with a warning
    path = write_lines(
        tmp_path / "events.jsonl",
        event(0, naive),
        event(1, naive),
        event(2),
        event(3, naive),
        event(4, "2026-02-01T00:00:04"),
    )
    db = f"sqlite:///{tmp_path}/x.db"
    summary = json.loads(cli("ingest", str(path), "--db", db, "--json").stdout)
    assert [(w["count"], w["sources"]) for w in summary["warnings"]] == [
        (3, [f"{path}:1", f"{path}:2", f"{path}:4"]),
        (1, [f"{path}:5"]),
    ]
    assert all("no timezone" in w["warning"] for w in summary["warnings"])

    result = cli("ingest", str(path), "--db", f"sqlite:///{tmp_path}/y.db")
    assert result.exit_code == 0, result.output  # a warning is not a failure
    lines = result.stdout.splitlines()
    assert lines[2] == "warnings: 4 events projected with some"
    first, second = (w["warning"] for w in summary["warnings"])
    assert lines[3:] == [f"  {path}:1 and 2 more: {first}", f"  {path}:5: {second}"]


# -- project and backup ----------------------------------------------------------------------


def test_project_says_what_it_projects_on_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/x.db"
    path = write_lines(tmp_path / "events.jsonl", event(0), event(1), event(2))
    assert cli("ingest", str(path), "--db", db, "--no-wait").exit_code == 0
    projector = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "project", "--db", db, "--log-level", "info"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and projector.poll() is None:
            listed = json.loads(cli("deliveries", "--db", db, "--json").stdout)["deliveries"]
            if listed[0]["state"] == "projected":
                break
            time.sleep(0.1)
    finally:
        projector.send_signal(signal.SIGTERM)
        _, stderr = projector.communicate(timeout=30)
    assert projector.returncode == 0, stderr
    assert listed[0]["state"] == "projected"
    assert stderr.splitlines()[0].endswith(
        f"INFO embrasure.server: projecting {db} from position 0: 1 deliveries (3 events) pending"
    )


def test_backup_into_a_missing_folder_names_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/x.db"
    assert cli("db", "upgrade", "--db", db).exit_code == 0
    target = tmp_path / "nowhere" / "backup.db"
    line = one_error_line(cli("backup", str(target), "--db", db))
    assert line == (
        f"embrasure: error: cannot write backup to {target}: folder {tmp_path}/nowhere "
        "does not exist"
    )
    (tmp_path / "file").write_text("")
    line = one_error_line(cli("backup", str(tmp_path / "file" / "b.db"), "--db", db))
    assert line.endswith(f"folder {tmp_path}/file is not a folder")
