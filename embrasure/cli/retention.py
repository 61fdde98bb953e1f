"""`embrasure retention` (docs/operations.md#retention-and-the-archive): one pass now, with
the settings serve and project use every --retention-interval; and the wiring of those
periodic passes."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from embrasure.cli.options import fail, load_settings, print_json, setting_options
from embrasure.errors import EmbrasureError
from embrasure.settings import BY_NAME, Settings

if TYPE_CHECKING:
    from embrasure.store import Store


def retention_loop(settings: Settings, store: Store) -> Any:
    """The periodic passes of serve and project: a RetentionLoop when --retain-log or
    --retain-runs is set, else None. With one, the process's GIL switch interval becomes
    ``SWITCH_INTERVAL_S`` (store/pacing.py says why)."""
    from embrasure.lifecycle.retention import RetentionLoop
    from embrasure.store.pacing import SWITCH_INTERVAL_S

    horizon, runs = settings.log_horizon(), settings.runs_horizon()
    if horizon is None and runs is None:
        return None
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return RetentionLoop(
        store, settings.archive, horizon, settings.retention_seconds(), retain_runs=runs
    )


@click.command()
@setting_options(
    "db",
    "retain_log",
    "archive",
    "retain_runs",
    "retention_interval",
    "db_pool_size",
    "log_level",
    "log_format",
)
@click.option("--json", "as_json", is_flag=True, help="Print what the pass did as JSON.")
@click.option(
    "--loop",
    is_flag=True,
    help="Run a pass every --retention-interval until SIGTERM (serve's retention process).",
)
def retention(as_json: bool, loop: bool, **flags: Any) -> None:
    """Run one retention pass: move the bodies of projected deliveries received before
    now - --retain-log to --archive, then give the space back; with --retain-runs, remove
    the runs whose latest eventTime is before now - --retain-runs. Exits 1 when the pass
    stopped early (the reason is printed; no body it had not archived was deleted)."""
    if loop:
        retention_process(flags)
        return
    from embrasure import logs
    from embrasure.lifecycle.archive import Archive
    from embrasure.lifecycle.retention import run_pass
    from embrasure.lifecycle.run_retention import horizon_key, trim_runs
    from embrasure.store import open_store, redact

    settings = load_settings(flags)
    # What the pass did is printed; its log lines (the same at info) only when asked.
    asked = flags.get("log_level") is not None or BY_NAME["log_level"].env in os.environ
    logs.configure(settings.log_level if asked else "warning", settings.log_format)
    horizon, runs_horizon = settings.log_horizon(), settings.runs_horizon()
    if horizon is None and runs_horizon is None:
        fail(
            "give --retain-log (EMBRASURE_RETAIN_LOG), how long bodies stay in the database,"
            " or --retain-runs (EMBRASURE_RETAIN_RUNS), how long runs stay in the graph"
        )
    try:
        store = open_store(settings.db, pool_size=settings.db_pool_size, create=False)
    except EmbrasureError as exc:
        fail(f"--db {redact(settings.db)}: {exc}")
    report = runs = None
    try:
        if horizon is not None:
            report = run_pass(store, Archive(settings.archive), horizon)
        if runs_horizon is not None:
            runs = trim_runs(store, horizon_key(runs_horizon))
    except EmbrasureError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(
            {
                **(dataclasses.asdict(report) if report else {}),
                **({"runs": dataclasses.asdict(runs)} if runs else {}),
            }
        )
    else:
        for done in (report, runs):
            if done is not None:
                click.echo(done.summary())
    if report is not None and report.error is not None:
        fail(f"retention pass stopped: {report.error}")


def retention_process(flags: dict[str, Any]) -> None:
    """``retention --loop``: the passes of RetentionLoop until SIGTERM/SIGINT, what they
    did published for serve's /readyz and /metrics (processes/status.py)."""
    from embrasure import logs
    from embrasure.processes import stopping
    from embrasure.processes.status import Publisher, StatusBoard, retention_doc
    from embrasure.store import open_store, redact

    settings = load_settings(flags)
    logs.configure(settings.log_level, settings.log_format)
    try:
        store = open_store(settings.db, pool_size=settings.db_pool_size, create=False)
    except EmbrasureError as exc:
        fail(f"--db {redact(settings.db)}: {exc}")
    loop = retention_loop(settings, store)
    if loop is None:
        store.close()
        fail("retention --loop needs --retain-log or --retain-runs")
    stop = stopping.stop_event()
    board = StatusBoard.from_environment()
    publisher = (
        Publisher(board, "retention", lambda: retention_doc(loop.snapshot()))
        if board is not None
        else None
    )
    loop.start()
    if publisher is not None:
        publisher.start()
    stopping.wait_until_set(stop)
    loop.stop()  # between two segments: what it archived is recorded
    if publisher is not None:
        publisher.stop()
    store.close()


COMMANDS = (retention,)
