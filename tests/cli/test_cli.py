"""The command line: settings precedence, docs in step, one-line errors."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from embrasure import store
from embrasure.cli.main import main
from embrasure.errors import SchemaError
from embrasure.settings import SETTINGS, Setting, Settings, markdown_table
from embrasure.store import migrations, redact
from embrasure.store.migrations import LATEST

from conftest import MINIMAL_EVENT, ServerProcess, free_port, run_sql
from http_client import HTTP

ROOT = Path(__file__).resolve().parents[2]


def test_settings_table_and_dataclass_agree() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert fields == {s.name: s.default for s in SETTINGS}


def test_docs_list_every_setting() -> None:
    assert markdown_table() in (ROOT / "docs" / "settings.md").read_text()


# The settings a client command reads (where the server is, who it is); `serve` reads
# every other one, and hands them to its processes.
CLIENT_SETTINGS = {"url", "token"}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_is_a_flag_of_each_command_that_reads_it(setting: Setting) -> None:
    """docs/settings.md: every setting is a flag, a variable and a default."""
    readers = (
        [n for n, c in main.commands.items() if "url" in {p.name for p in c.params}]
        if setting.name in CLIENT_SETTINGS
        else ["serve"]
    )
    assert readers
    for command in readers:
        params = {p.name: p for p in main.commands[command].params}
        assert setting.name in params, f"`embrasure {command}` has no {setting.flag}"
        assert setting.flag in params[setting.name].opts
        help_text = params[setting.name].help or ""
        assert setting.env in help_text, help_text
    parsed = main.commands["serve"].make_context("serve", [], resilient_parsing=True).params
    assert (setting.name in parsed) == (setting.name not in CLIENT_SETTINGS)


def test_precedence_flag_over_env_over_default() -> None:
    env = {"EMBRASURE_PORT": "6001", "EMBRASURE_HOST": "0.0.0.0"}
    assert Settings.load({}, env).port == 6001
    assert Settings.load({"port": 7001}, env).port == 7001
    assert Settings.load({"port": None}, env).host == "0.0.0.0"
    assert Settings.load({}, {}).port == 5000


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--log-format", "yaml"], {}, "--log-format 'yaml': must be one of text, json"),
        ([], {"EMBRASURE_INSECURE": "maybe"}, "EMBRASURE_INSECURE='maybe': must be true or false"),
        (
            ["--group-commit-max", "0"],
            {},
            "--group-commit-max 0: must be a whole number of at least 1",
        ),
        (
            ["--projector-batch-events", "0"],
            {},
            "--projector-batch-events 0: must be a whole number of at least 1",
        ),
        (
            [],
            {"EMBRASURE_DB_POOL_SIZE": "-5"},
            "EMBRASURE_DB_POOL_SIZE='-5': must be a whole number of at least 1",
        ),
        (["--port", "99999"], {}, "--port 99999: must be a whole number from 1 to 65535"),
        (
            ["--log-level", "verbose"],
            {},
            "--log-level 'verbose': must be one of debug, info, warning, error",
        ),
        ([], {"EMBRASURE_LOG_LEVEL": "verbose"}, "EMBRASURE_LOG_LEVEL='verbose': must be one of"),
        (
            [],
            {"EMBRASURE_RETENTION_INTERVAL": "0s"},
            "EMBRASURE_RETENTION_INTERVAL='0s': must be a duration",
        ),
    ],
)
def test_a_value_a_setting_does_not_take_is_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    """Checked before anything runs: one line naming the setting, where the value came
    from and what is allowed; exit 1, no traceback, no database created."""
    db = tmp_path / "never.db"
    result = CliRunner().invoke(main, ["serve", "--db", f"sqlite:///{db}", *args], env=env)
    assert result.exit_code == 1
    [only] = result.output.splitlines()
    assert only.startswith(f"embrasure: error: {line}")
    assert not db.exists()


def test_a_port_in_use_or_a_bad_host_is_one_line_and_creates_no_database(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            main, ["serve", "--db", f"sqlite:///{db}", "--port", str(port)], env={}
        )
    [only] = result.output.splitlines()
    assert result.exit_code == 1
    assert only == (
        f"embrasure: error: cannot listen on 127.0.0.1:{port}: Address already in use:"
        " another process listens there (stop it, or pass another --port)"
    )
    result = CliRunner().invoke(main, ["serve", "--db", f"sqlite:///{db}", "--host", "999.1.1.1"])
    [only] = result.output.splitlines()
    assert result.exit_code == 1
    assert only.startswith(
        "embrasure: error: --host '999.1.1.1' is not an address or a name this machine resolves"
    )
    assert not db.exists()


def test_words_and_booleans_are_read_in_any_case() -> None:
    settings = Settings.load({}, {"EMBRASURE_LOG_LEVEL": "WARNING", "EMBRASURE_INSECURE": "Yes"})
    assert (settings.log_level, settings.insecure) == ("warning", True)
    assert Settings.load({}, {"EMBRASURE_INSECURE": "off"}).insecure is False


def test_serve_reads_no_projector_from_the_environment(tmp_path: Path) -> None:
    """`serve --no-projector` and `--upgrade` are settings like the others (README: every
    flag has a variable): with EMBRASURE_NO_PROJECTOR a delivery stays accepted."""
    server = ServerProcess(tmp_path / "e.db", env={"EMBRASURE_NO_PROJECTOR": "1"}).start()
    try:
        receipt = HTTP.post(f"{server.url}/api/v1/lineage", json=MINIMAL_EVENT).json()
        time.sleep(0.5)  # the projector, when it runs, projects within milliseconds
        view = HTTP.get(f"{server.url}/api/v1/deliveries/{receipt['delivery_id']}").json()
        assert view["state"] == "accepted"
    finally:
        server.stop()


@pytest.mark.parametrize(("env", "upgrade"), [({}, False), ({"EMBRASURE_UPGRADE": "yes"}, True)])
def test_serve_reads_upgrade_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], upgrade: bool
) -> None:
    asked: list[bool] = []

    def open_store(url: str, upgrade: bool = False, **_: object) -> None:
        asked.append(upgrade)
        raise SchemaError("stopped here by the test")

    monkeypatch.setattr(store, "open_store", open_store)
    args = ["serve", "--db", f"sqlite:///{tmp_path / 'e.db'}", "--port", str(free_port())]
    result = CliRunner().invoke(main, args, env=env)
    assert result.output == "embrasure: error: stopped here by the test\n"
    assert asked == [upgrade]


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
    assert result.output == f"{redact(db_url)}: schema created (version {LATEST})\n"
    assert run_sql(db_url, "SELECT MAX(version) FROM embrasure_schema") == [(LATEST,)]


def test_db_upgrade_says_what_it_upgraded_from(
    empty_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    CliRunner().invoke(main, ["db", "upgrade", "--db", empty_db_url])
    extra = migrations.Migration(LATEST + 1, "test step", "CREATE TABLE test_step (x INTEGER)")
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, extra))
    monkeypatch.setattr(migrations, "LATEST", extra.version)
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", empty_db_url])
    assert result.output == (
        f"{redact(empty_db_url)}: schema upgraded from version {LATEST} to {LATEST + 1}\n"
    )


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
