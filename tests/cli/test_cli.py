"""The command line: settings precedence, docs in step, one-line errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from embrasure.cli.main import main
from embrasure.settings import SETTINGS, Settings, markdown_table
from embrasure.store.migrations import LATEST

from conftest import run_sql

ROOT = Path(__file__).resolve().parents[2]


def test_settings_table_and_dataclass_agree() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert fields == {s.name: s.default for s in SETTINGS}


def test_docs_list_every_setting() -> None:
    assert markdown_table() in (ROOT / "docs" / "settings.md").read_text()


def test_precedence_flag_over_env_over_default() -> None:
    env = {"EMBRASURE_PORT": "6001", "EMBRASURE_HOST": "0.0.0.0"}
    assert Settings.load({}, env).port == 6001
    assert Settings.load({"port": 7001}, env).port == 7001
    assert Settings.load({"port": None}, env).host == "0.0.0.0"
    assert Settings.load({}, {}).port == 5000


def test_bad_env_value_names_the_variable() -> None:
    try:
        Settings.load({}, {"EMBRASURE_PORT": "fifty"})
    except ValueError as exc:
        assert "EMBRASURE_PORT" in str(exc)
    else:
        raise AssertionError("accepted a non-numeric port")


def test_db_upgrade_creates_the_schema(empty_db_url: str) -> None:
    db_url = empty_db_url
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output
    assert run_sql(db_url, "SELECT MAX(version) FROM embrasure_schema") == [(LATEST,)]


def test_db_upgrade_never_prints_the_password(pg_db: str) -> None:
    url = pg_db.replace("postgres@", "postgres:secret@")  # trust auth ignores it
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", url])
    assert result.exit_code == 0, result.output
    assert "secret" not in result.output and "postgres:***@" in result.output


def test_an_unreachable_postgresql_is_one_error_line() -> None:
    # Nothing listens on port 1; the password must not be printed.
    url = "postgresql://u:secret@127.0.0.1:1/x"
    result = run("lineage", "--db", url, "--namespace", "a", "--name", "b")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embrasure: error:"), result.stderr
    assert "secret" not in result.stderr and "127.0.0.1:1" in result.stderr


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embrasure", *args], capture_output=True, text=True, timeout=60
    )


def test_errors_are_one_line_and_non_zero(tmp_path: Path) -> None:
    for args in (
        ["serve", "--db", "mysql://nowhere"],
        ["serve", "--db", f"sqlite:///{tmp_path}/missing/dir/x.db"],
        ["db", "upgrade", "--db", "oracle://x"],
    ):
        result = run(*args)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("embrasure: error: "), result.stderr
