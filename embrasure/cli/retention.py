"""`embrasure retention` (docs/operations.md#retention-and-the-archive): one pass now, with
the settings serve and project use every --retention-interval; and the wiring of those
periodic passes."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

import click

from embrasure.cli.options import fail, load_settings, print_json, setting_options
from embrasure.errors import EmbrasureError
from embrasure.settings import BY_NAME, Settings

if TYPE_CHECKING:
    from embrasure.store import Store


def retention_loop(settings: Settings, store: Store) -> Any:
    """The periodic passes of serve and project: a RetentionLoop when --retain-log is
    set, else None."""
    from embrasure.lifecycle.retention import RetentionLoop

    horizon = settings.log_horizon()
    if horizon is None:
        return None
    return RetentionLoop(store, settings.archive, horizon, settings.retention_seconds())


@click.command()
@setting_options("db", "retain_log", "archive", "db_pool_size", "log_level", "log_format")
@click.option("--json", "as_json", is_flag=True, help="Print what the pass did as JSON.")
def retention(as_json: bool, **flags: Any) -> None:
    """Run one retention pass: move the bodies of projected deliveries received before
    now - --retain-log to --archive, then give the space back. Exits 1 when the pass
    stopped early (the reason is printed; no body it had not archived was deleted)."""
    from embrasure import logs
    from embrasure.lifecycle.archive import Archive
    from embrasure.lifecycle.retention import run_pass
    from embrasure.store import open_store

    settings = load_settings(flags)
    # What the pass did is printed; its log lines (the same at info) only when asked.
    asked = flags.get("log_level") is not None or BY_NAME["log_level"].env in os.environ
    logs.configure(settings.log_level if asked else "warning", settings.log_format)
    horizon = settings.log_horizon()
    if horizon is None:
        fail("give --retain-log (EMBRASURE_RETAIN_LOG): how long bodies stay in the database")
    try:
        store = open_store(settings.db, pool_size=settings.db_pool_size)
    except EmbrasureError as exc:
        fail(str(exc))
    try:
        report = run_pass(store, Archive(settings.archive), horizon)
    except EmbrasureError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(dataclasses.asdict(report))
    else:
        click.echo(report.summary())
    if report.error is not None:
        fail(f"retention pass stopped: {report.error}")


COMMANDS = (retention,)
