"""The client commands (docs/cli.md): ingest, demo, lineage, impact, runs, deliveries,
quarantine, backup — over --db on a real SQLite file (the server's app driven
in-process) and over --url against a real `embrasure serve` process.

Commands run through click's CliRunner (in this process, fast) except where the process
boundary is the point (a traceback would show only there).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from embrasure.cli import demo
from embrasure.cli.main import main
from embrasure.model import EventFacts
from embrasure.projector.pipeline import project_event
from embrasure.store.migrations import LATEST

import producer_events as pe
from conftest import ServerProcess, free_port, one_error_line

TABLE_ID = f"dataset:{demo.WAREHOUSE}:{demo.TABLE}"
PATH_ID = f"dataset:{demo.LAKE}:{demo.SPARK_PATH}"
SERVICE_ID = f"service:{demo.DASHBOARD_NS}:{demo.DASHBOARD}"


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def as_json(result: Result) -> Any:
    assert result.stdout, result.output
    return json.loads(result.stdout)


def event(n: int, job: str = "nightly") -> dict[str, Any]:
    """A small valid RunEvent, distinct per ``n``."""
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-02-01T00:00:{n % 60:02d}Z",
        "producer": "https://example.com/tests",
        "schemaURL": f"{demo.CORE}#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=n + 1))},
        "job": {"namespace": "tests", "name": job},
        "inputs": [{"namespace": "s3://in", "name": f"table_{n}"}],
        "outputs": [{"namespace": "s3://out", "name": "result"}],
    }


@pytest.fixture
def db(db_url: str) -> str:
    """A new database of each backend: the --db commands run on both."""
    return db_url


def load_demo(db: str) -> str:
    result = cli("demo", "--db", db)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def demo_db(db: str) -> str:
    return load_demo(db)


@pytest.fixture
def sqlite_demo_db(tmp_path: Path) -> str:
    return load_demo(f"sqlite:///{tmp_path / 'cli.db'}")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """9 events in 4 files: 6 distinct valid ones, 1 repeated, 1 line that is not JSON,
    1 item that is not an object (the receiver rejects it), plus a file to skip."""
    root = tmp_path / "events"
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_text(json.dumps(event(0), indent=2))
    (root / "b.json").write_text(json.dumps([event(1), event(2)]))
    (root / "c.json").write_text(json.dumps({"events": [event(3)]}))
    lines = [
        json.dumps(event(4)),
        "{not json",
        "",
        json.dumps(event(0)),  # the event of a.json again
        json.dumps(event(5)),
        "42",
    ]
    (root / "sub" / "d.jsonl").write_text("\n".join(lines) + "\n")
    (root / "notes.txt").write_text("not an event file")
    return root


# -- ingest ----------------------------------------------------------------------------------


def test_ingest_folder_counts_every_event_once(db: str, folder: Path) -> None:
    result = cli("ingest", str(folder), "--db", db, "--json")
    assert result.exit_code == 1  # something did not reach the graph: say so
    summary = as_json(result)
    assert (summary["files"], summary["events"]) == (4, 9)
    assert (summary["accepted"], summary["duplicate"], summary["invalid"]) == (6, 1, 2)
    assert summary["problems"] == [
        {
            "source": f"{folder}/sub/d.jsonl:2",
            "reason": summary["problems"][0]["reason"],
        },
        {
            "source": f"{folder}/sub/d.jsonl:6",
            "reason": "item is a JSON int, not an object: not an event",
        },
    ]
    assert summary["problems"][0]["reason"].startswith("Invalid JSON")
    assert summary["projection"] == {"projected": 6, "quarantined": 0, "pending": 0}
    (delivery_id,) = summary["deliveries"]

    # The same files again: the same batch, which the receiver knows.
    again = as_json(cli("ingest", str(folder), "--db", db, "--json"))
    assert (again["accepted"], again["duplicate"], again["invalid"]) == (0, 7, 2)
    assert again["deliveries"] == [delivery_id]

    listed = as_json(cli("deliveries", "--db", db, "--json"))["deliveries"]
    assert [(d["delivery_id"], d["item_count"], d["invalid_item_count"]) for d in listed] == [
        (delivery_id, 7, 1)
    ]


def test_ingest_human_summary_names_the_bad_line(db: str, folder: Path) -> None:
    result = cli("ingest", str(folder / "sub"), "--db", db)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"5 events from 1 file to {db}: 3 accepted, 0 duplicate, 2 invalid"
    assert lines[1] == "projection: 3 projected, 0 quarantined, 0 pending"
    assert lines[2].startswith(f"  {folder}/sub/d.jsonl:2: Invalid JSON")
    assert lines[3] == f"  {folder}/sub/d.jsonl:6: item is a JSON int, not an object: not an event"


def test_ingest_reads_what_producers_leave_behind(db: str, tmp_path: Path) -> None:
    """JSONL saved as .json, a BOM, an empty file, a duplicate key (which would make the
    receiver refuse the whole batch): each event judged alone, each problem named, the
    empty file named but not counted an event."""
    (tmp_path / "lines.json").write_text(json.dumps(event(0)) + "\n" + json.dumps(event(1)))
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(event(2)).encode())
    (tmp_path / "empty.json").write_text("")
    twice = json.dumps(event(3)).replace('"eventType"', '"producer": "x", "eventType"', 1)
    (tmp_path / "twice.jsonl").write_text(twice + "\n")
    summary = as_json(cli("ingest", str(tmp_path), "--db", db, "--json"))
    assert (summary["events"], summary["accepted"], summary["invalid"]) == (4, 3, 1)
    assert summary["empty"] == [f"{tmp_path}/empty.json"]
    # One event in the file: it is named by the file, whatever the file is called.
    assert [p["source"] for p in summary["problems"]] == [f"{tmp_path}/twice.jsonl"]
    assert "producer" in summary["problems"][0]["reason"]
    human = cli("ingest", str(tmp_path / "empty.json"), str(tmp_path / "bom.json"), "--db", db)
    assert human.stdout.splitlines()[-1] == f"  {tmp_path}/empty.json: no events in the file"


def test_ingest_splits_batches_within_the_receiver_bounds(db: str, tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(event(n, job=f"job{n % 7}")) + "\n" for n in range(1201)))
    result = cli("ingest", str(path), "--db", db, "--json", "--no-wait")
    assert result.exit_code == 0, result.output
    summary = as_json(result)
    assert (summary["accepted"], summary["invalid"], summary["projection"]) == (1201, 0, None)
    listed = as_json(cli("deliveries", "--db", db, "--json"))["deliveries"]
    assert [d["item_count"] for d in listed] == [201, 500, 500]  # newest first


def test_ingest_reports_projector_quarantine_by_line(db: str, tmp_path: Path) -> None:
    bad = event(1)
    bad["run"]["runId"] = "not-a-uuid"
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(event(0)) + "\n" + json.dumps(bad) + "\n")
    summary = as_json(cli("ingest", str(path), "--db", db, "--json"))
    assert (summary["accepted"], summary["invalid"]) == (2, 0)
    assert summary["projection"] == {"projected": 1, "quarantined": 1, "pending": 0}
    assert summary["problems"] == [
        {
            "source": f"{path}:2",
            "reason": "quarantined: RunEvent: run.runId 'not-a-uuid' is not a UUID",
        }
    ]


def test_ingest_over_url_matches_db(server: ServerProcess, folder: Path) -> None:
    result = cli("ingest", str(folder), "--url", server.url, "--json")
    summary = as_json(result)
    assert (summary["accepted"], summary["duplicate"], summary["invalid"]) == (6, 1, 2)
    assert summary["projection"] == {"projected": 6, "quarantined": 0, "pending": 0}
    assert summary["target"] == server.url
    detail = as_json(cli("deliveries", summary["deliveries"][0], "--url", server.url, "--json"))
    assert detail["state"] == "partially_projected"
    assert [i["outcome"] for i in detail["items"]] == ["projected"] * 6 + ["quarantined"]


def test_ingest_errors_are_one_line(tmp_path: Path, folder: Path) -> None:
    line = one_error_line(cli("ingest", str(folder), "--url", f"http://127.0.0.1:{free_port()}"))
    assert "cannot connect to http://127.0.0.1:" in line and "Connection refused" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no *.json" in one_error_line(cli("ingest", str(empty), "--db", "sqlite:///x.db"))
    line = one_error_line(cli("ingest", str(folder), "--db", "mysql://nowhere"))
    assert "mysql://nowhere" in line


# -- demo ------------------------------------------------------------------------------------


def test_demo_events_are_valid_and_project_without_warnings() -> None:
    events = demo.events()
    assert len(events) == 17
    for e in events:
        facts = project_event(e)
        assert isinstance(facts, EventFacts), facts
        assert facts.warnings == (), (e["job"]["name"], facts.warnings)
    kinds = {e["job"]["name"]: e for e in events}
    assert "run" not in kinds[demo.DASHBOARD] and "outputs" not in kinds[demo.DASHBOARD]
    columns = [c for e in events for c in project_event(e).columns]  # type: ignore[union-attr]
    assert any(c.masked for c in columns)
    assert any(c.klass == "aggregate" for c in columns)
    assert any("INDIRECT/JOIN" in c.subtypes for c in columns)


def test_demo_twice_then_lineage_shows_the_table_and_the_service(db: str) -> None:
    venv_bin = Path(sys.executable).parent
    first = cli("demo", "--db", db, env={"PATH": f"{venv_bin}{os.pathsep}/usr/bin:/bin"})
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[0] == (
        f"17 events from the demo to {db}: 17 accepted, 0 duplicate, 0 invalid"
    )
    assert f"embrasure lineage --db {db} --namespace s3://demo-lake" in first.stdout
    assert f"embrasure serve --db {db}, then open http://127.0.0.1:5000/" in first.stdout
    # With the virtual environment not on PATH (no `activate`), the lines name its script.
    again = cli("demo", "--db", db, env={"PATH": "/usr/bin:/bin"})
    script = venv_bin / "embrasure"
    shown = script.relative_to(Path.cwd()) if script.is_relative_to(Path.cwd()) else script
    assert f"  {shown} lineage --db {db}" in again.stdout
    second = as_json(cli("demo", "--db", db, "--json"))
    assert (second["accepted"], second["duplicate"]) == (0, 17)

    args = ("--namespace", demo.LAKE, "--name", demo.SPARK_PATH, "--direction", "downstream")
    graph = as_json(cli("lineage", "--db", db, *args, "--json"))
    # The S3 path is the table: one node, named as asked (docs/queries.md#conventions).
    assert graph["root"] == PATH_ID and TABLE_ID not in {n["id"] for n in graph["nodes"]}
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes[SERVICE_ID]["type"] == "service"
    assert (f"dataset:{demo.WAREHOUSE}:{demo.MODELS[2]}", SERVICE_ID) in {
        (e["source"], e["target"]) for e in graph["edges"]
    }
    table = cli("lineage", "--db", db, *args)
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0] == (
        f"dataset {demo.LAKE} {demo.SPARK_PATH}: 6 nodes, 6 edges (downstream, depth 5)"
    )
    assert f"service {demo.DASHBOARD_NS} {demo.DASHBOARD}" in table.stdout


def test_demo_over_url(server: ServerProcess) -> None:
    result = cli("demo", "--url", server.url)
    assert result.exit_code == 0, result.output
    assert "projection: 17 projected, 0 quarantined, 0 pending" in result.stdout
    assert f"open {server.url}/ in a browser" in result.stdout
    graph = as_json(
        cli(
            "lineage",
            "--url",
            server.url,
            "--type",
            "service",
            "--namespace",
            demo.DASHBOARD_NS,
            "--name",
            demo.DASHBOARD,
            "--direction",
            "upstream",
            "--depth",
            "2",
            "--json",
        )
    )
    assert graph["root"] == SERVICE_ID
    assert f"job:{demo.DBT_NS}:demo_shop.daily_revenue" in {n["id"] for n in graph["nodes"]}


# -- lineage, impact, runs -----------------------------------------------------------------


def test_column_lineage_with_field(demo_db: str) -> None:
    args = ("--namespace", demo.WAREHOUSE, "--name", demo.MODELS[0], "--field", "email_hash")
    graph = as_json(cli("lineage", "--db", demo_db, *args, "--direction", "upstream", "--json"))
    (edge,) = graph["edges"]
    assert edge["source"] == f"field:{demo.WAREHOUSE}:{demo.CUSTOMERS}:email"
    assert (edge["kind"], edge["class"], edge["masked"]) == ("mapping", "expression", True)
    table = cli("lineage", "--db", demo_db, *args, "--direction", "upstream")
    assert f"field {demo.WAREHOUSE} {demo.CUSTOMERS}.email" in table.stdout
    assert "masked" in table.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["export"],
        ["tokens", "list"],
        ["tokens", "revoke", "tok_x"],
        ["reproject"],
        ["project"],
        ["retention", "--retain-runs", "1d"],
    ],
)
def test_a_command_on_a_mistyped_database_creates_none(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "mistyped.db"
    line = one_error_line(cli(*command, "--db", f"sqlite:///{missing}"))
    assert line == (
        f"embrasure: error: --db sqlite:///{missing}: no database at {missing}"
        " (`embrasure serve` or `embrasure db upgrade` creates one there)"
    )
    assert not missing.exists()


def test_db_upgrade_says_whether_it_created_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert cli("db", "upgrade", "--db", url).stdout == f"{url}: schema created (version {LATEST})\n"
    again = cli("db", "upgrade", "--db", url).stdout
    assert again == f"{url}: schema is up to date (version {LATEST})\n"


def test_lineage_errors_name_the_cause(demo_db: str, tmp_path: Path) -> None:
    args = ("--namespace", "s3://nowhere", "--name", "missing_table")
    line = one_error_line(cli("lineage", "--db", demo_db, *args))
    assert line == "embrasure: error: Not found: No dataset s3://nowhere missing_table is known."
    port = free_port()
    line = one_error_line(cli("lineage", "--url", f"http://127.0.0.1:{port}", *args))
    assert f"cannot connect to http://127.0.0.1:{port}" in line
    missing = tmp_path / "absent.db"
    line = one_error_line(cli("lineage", "--db", f"sqlite:///{missing}", *args))
    assert line.startswith(f"embrasure: error: --db sqlite:///{missing}: no database at {missing}")
    assert not missing.exists()  # a read never creates a database
    line = one_error_line(cli("lineage", "--db", demo_db, "--url", "http://x", *args))
    assert "not both" in line
    line = one_error_line(cli("lineage", "--url", "localhost:5000", *args))
    assert "is not an http:// or https:// URL" in line


def test_impact(demo_db: str) -> None:
    args = ("--namespace", demo.WAREHOUSE, "--name", demo.CUSTOMERS, "--field", "email")
    doc = as_json(cli("impact", "--db", demo_db, *args, "--json"))
    assert doc["root"] == f"field:{demo.WAREHOUSE}:{demo.CUSTOMERS}:email"
    by_id = {i["node"]["id"]: i for i in doc["items"]}
    hashed = by_id[f"field:{demo.WAREHOUSE}:{demo.MODELS[0]}:email_hash"]
    assert (hashed["distance"], hashed["masked"]) == (1, True)
    assert hashed["path"][0] == doc["root"]
    table = cli("impact", "--db", demo_db, *args)
    assert table.stdout.startswith(f"impact of {demo.CUSTOMERS}.email: {len(doc['items'])} ")
    line = one_error_line(cli("impact", "--db", demo_db, "--namespace", "x", "--name", "y"))
    assert "x y" in line


@pytest.mark.parametrize("command", ["impact", "lineage"])
def test_a_mistyped_field_is_one_error_line_naming_the_closest(demo_db: str, command: str) -> None:
    """`impact --field emial` once answered "0 downstream" and exit 0 (issue 16)."""
    args = ("--namespace", demo.WAREHOUSE, "--name", demo.CUSTOMERS, "--field", "emial")
    line = one_error_line(cli(command, "--db", demo_db, *args))
    assert line.startswith(
        f"embrasure: error: Field not found: No field 'emial' is known on dataset"
        f" {demo.WAREHOUSE} {demo.CUSTOMERS}: "
    )
    assert "Closest known: email" in line


def test_runs(demo_db: str) -> None:
    args = ("--namespace", demo.DBT_NS, "--name", "demo_shop.daily_revenue")
    (run,) = as_json(cli("runs", "--db", demo_db, *args, "--json"))["runs"]
    assert run["runId"] == "01943c00-0000-7000-8000-000000000008"
    assert (run["state"], run["started_at"], run["ended_at"]) == (
        "COMPLETE",
        "2026-01-15T02:42:00Z",
        "2026-01-15T02:48:00Z",
    )
    assert run["parent"]["root"]["job"] == {"namespace": demo.AIRFLOW_NS, "name": demo.DAG}
    table = cli("runs", "--db", demo_db, *args)
    assert "01943c00-0000-7000-8000-000000000008  COMPLETE" in table.stdout
    assert "6 min 00 s" in table.stdout
    line = one_error_line(cli("runs", "--db", demo_db, "--namespace", "x", "--name", "nojob"))
    assert line == "embrasure: error: Not found: No job x nojob is known."


def test_dataset_runs_and_rows_written(db: str, tmp_path: Path) -> None:
    """dbt's tests (one failed) and openlineage-spark's statistics, from the corpus."""
    path = tmp_path / "events.json"
    path.write_text(json.dumps(pe.dbt_tests() + pe.spark_statistics()))
    assert cli("ingest", "--db", db, str(path)).exit_code == 0
    args = ("--namespace", pe.DBT_CUSTOMERS[0], "--name", pe.DBT_CUSTOMERS[1])
    doc = as_json(cli("dataset-runs", "--db", db, *args, "--json"))
    assert len(doc["runs"]) == 4 and doc["next_cursor"] is None
    table = cli("dataset-runs", "--db", db, *args, "--limit", "5").stdout
    assert table.startswith(f"runs of dataset {pe.DBT_CUSTOMERS[0]} {pe.DBT_CUSTOMERS[1]}: 4")
    assert "0 passed, 1 failed: accepted_values on first_name" in table
    output = ("--namespace", "ons", "--name", "output", "--role", "output")
    assert "10" in cli("dataset-runs", "--db", db, *output).stdout
    runs = cli("runs", "--db", db, "--namespace", "namespace", "--name", "jobName").stdout
    assert "rows written" in runs and " 10" in runs
    line = one_error_line(cli("dataset-runs", "--db", db, "--namespace", "x", "--name", "y"))
    assert line == "embrasure: error: Not found: No dataset x y is known."


# -- deliveries, quarantine ------------------------------------------------------------------


def test_deliveries_list_and_detail(demo_db: str) -> None:
    (delivery,) = as_json(cli("deliveries", "--db", demo_db, "--json"))["deliveries"]
    assert (delivery["provider_key"], delivery["state"], delivery["item_count"]) == (
        demo.PROVIDER_KEY,
        "projected",
        17,
    )
    table = cli("deliveries", "--db", demo_db, "--provider-key", demo.PROVIDER_KEY)
    assert table.stdout.splitlines()[0] == "deliveries: 1"
    assert delivery["delivery_id"] in table.stdout
    none = as_json(cli("deliveries", "--db", demo_db, "--provider-key", "other", "--json"))
    assert none == {"deliveries": [], "next_cursor": None}
    detail = cli("deliveries", delivery["delivery_id"], "--db", demo_db)
    assert detail.stdout.splitlines()[0].endswith(
        "projected, 17 items (17 projected, 0 quarantined, 0 pending)"
    )
    line = one_error_line(cli("deliveries", "01NOSUCHDELIVERY", "--db", demo_db))
    assert line == "embrasure: error: No such delivery: No delivery '01NOSUCHDELIVERY' is stored."


def test_quarantine_list_and_replay(db: str, tmp_path: Path) -> None:
    bad = event(1)
    bad["run"]["runId"] = "not-a-uuid"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([event(0), bad, "not an event"]))
    summary = as_json(cli("ingest", str(path), "--db", db, "--json"))
    (delivery_id,) = summary["deliveries"]

    items = as_json(cli("quarantine", "list", "--db", db, "--json"))["items"]
    assert [(i["delivery_id"], i["index"], i["kind"]) for i in items] == [
        (delivery_id, 1, "RunEvent"),
        (delivery_id, 2, None),
    ]
    table = cli("quarantine", "list", "--db", db)
    assert "RunEvent: run.runId 'not-a-uuid' is not a UUID" in table.stdout

    # Still breaking the rules: replayed, still quarantined, non-zero.
    replay = cli("quarantine", "replay", delivery_id, "1", "--db", db)
    assert replay.exit_code == 1
    assert replay.stdout.strip() == (
        f"item 1 of delivery {delivery_id}: quarantined: "
        "RunEvent: run.runId 'not-a-uuid' is not a UUID"
    )
    line = one_error_line(cli("quarantine", "replay", delivery_id, "2", "--db", db))
    assert line.startswith("embrasure: error: Item cannot be replayed: ")
    line = one_error_line(cli("quarantine", "replay", delivery_id, "0", "--db", db))
    assert line == (
        f"embrasure: error: Item is not quarantined: Item 0 of delivery {delivery_id} is projected."
    )


def test_read_commands_over_url(server: ServerProcess, folder: Path) -> None:
    as_json(cli("ingest", str(folder), "--url", server.url, "--json"))
    items = as_json(cli("quarantine", "list", "--url", server.url, "--json"))["items"]
    assert [(i["index"], i["kind"]) for i in items] == [(6, None)]
    runs = as_json(
        cli("runs", "--url", server.url, "--namespace", "tests", "--name", "nightly", "--json")
    )["runs"]
    assert len(runs) == 6
    line = one_error_line(
        cli("lineage", "--url", server.url, "--namespace", "tests", "--name", "unknown")
    )
    assert line == "embrasure: error: Not found: No dataset tests unknown is known."


def test_url_from_the_environment(server: ServerProcess, folder: Path) -> None:
    env = {"EMBRASURE_URL": server.url}
    summary = as_json(cli("ingest", str(folder / "a.json"), "--json", env=env))
    assert (summary["target"], summary["accepted"]) == (server.url, 1)


def test_errors_are_one_line_in_a_real_process() -> None:
    port = free_port()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "embrasure",
            "runs",
            "--url",
            f"http://127.0.0.1:{port}",
            "--namespace",
            "a",
            "--name",
            "b",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"embrasure: error: cannot connect to http://127.0.0.1:{port}")
    assert len(result.stderr.strip().splitlines()) == 1


# -- backup ----------------------------------------------------------------------------------


def _delivery_ids(db: str) -> list[str]:
    return [
        d["delivery_id"] for d in as_json(cli("deliveries", "--db", db, "--json"))["deliveries"]
    ]


def test_backup_copies_the_database(sqlite_demo_db: str, tmp_path: Path) -> None:
    demo_db = sqlite_demo_db
    target = tmp_path / "backup.db"
    result = cli("backup", str(target), "--db", demo_db)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"backed up {demo_db} to {target}: ")
    assert result.stdout.rstrip().endswith(" s")
    with sqlite3.connect(target) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    assert _delivery_ids(f"sqlite:///{target}") == _delivery_ids(demo_db) != []
    graph = as_json(
        cli(
            "lineage",
            "--db",
            f"sqlite:///{target}",
            "--namespace",
            demo.LAKE,
            "--name",
            demo.SPARK_PATH,
            "--json",
        )
    )
    assert graph["root"] == PATH_ID

    line = one_error_line(cli("backup", str(target), "--db", demo_db))
    assert line == f"embrasure: error: {target} exists; pass --force to replace it"
    assert cli("backup", str(target), "--db", demo_db, "--force").exit_code == 0
    source = demo_db.removeprefix("sqlite:///")
    line = one_error_line(cli("backup", source, "--db", demo_db, "--force"))
    assert line == f"embrasure: error: {source} is the database itself"
    line = one_error_line(
        cli("backup", str(tmp_path / "b2.db"), "--db", f"sqlite:///{tmp_path}/none.db")
    )
    assert "no database at" in line
    assert not [p.name for p in tmp_path.iterdir() if ".partial" in p.name]


def test_backup_of_postgresql_names_its_tools(pg_db: str, tmp_path: Path) -> None:
    line = one_error_line(cli("backup", str(tmp_path / "b.db"), "--db", pg_db))
    assert "backup copies a SQLite database" in line and "its own tools" in line
    assert not (tmp_path / "b.db").exists()


class Writer(threading.Thread):
    """Posts 50-event batches to a server until stopped, counting the receipts."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.stop = threading.Event()
        self.receipts = 0
        self.progress = threading.Condition()

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.url) as http:
            while not self.stop.is_set():
                r = http.post("/api/v1/lineage/batch", json=[event(n + i) for i in range(50)])
                assert r.status_code == 202, r.text
                n += 50
                with self.progress:
                    self.receipts += 1
                    self.progress.notify_all()

    def wait_for(self, receipts: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: self.receipts >= receipts, timeout=30)


@pytest.fixture
def writer(db_path: Path) -> Iterator[Writer]:
    server = ServerProcess(db_path).start()
    writer = Writer(server.url)
    writer.start()
    try:
        yield writer
    finally:
        writer.stop.set()
        writer.join()
        server.stop()


def test_backup_while_the_server_writes(writer: Writer, db_path: Path, tmp_path: Path) -> None:
    writer.wait_for(5)
    target = tmp_path / "online.db"
    result = cli("backup", str(target), "--db", f"sqlite:///{db_path}")
    assert result.exit_code == 0, result.output
    after = writer.receipts
    writer.wait_for(after + 3)  # the server went on taking deliveries
    writer.stop.set()
    writer.join()
    with sqlite3.connect(target) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        copied = {r[0] for r in conn.execute("SELECT delivery_id FROM deliveries")}
    conn.close()
    with sqlite3.connect(db_path) as conn:
        live = {r[0] for r in conn.execute("SELECT delivery_id FROM deliveries")}
    conn.close()
    # A snapshot of one moment: every delivery acknowledged before the backup started,
    # none invented, and the later ones only in the live database.
    assert 5 <= len(copied) < len(live)
    assert copied < live
