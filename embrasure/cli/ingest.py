"""The commands that write: `ingest` (files → the batch route), `demo` (a sample platform
through the same code) and `backup` (an online copy of a SQLite database)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from embrasure.cli import event_files as ingesting
from embrasure.cli.options import (
    byte_size,
    client_options,
    connected,
    console,
    fail,
    load_settings,
    print_json,
    setting_options,
)
from embrasure.errors import EmbrasureError


@contextlib.contextmanager
def _progress_bar(total: int, target: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr, in input bytes, while a terminal is there to show it."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    err = console(stderr=True)
    with Progress(
        TextColumn(f"sending to {target}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("ingest", total=total or None)
        yield lambda done: progress.advance(task, done)


def _report(summary: ingesting.Summary, as_json: bool, source: str) -> None:
    if as_json:
        print_json(summary.to_json())
        return
    click.echo(
        f"{summary.events} events from {source} to {summary.target}: "
        f"{summary.accepted} accepted, {summary.duplicate} duplicate, {summary.invalid} invalid"
    )
    if summary.projection is not None:
        p = summary.projection
        click.echo(
            f"projection: {p['projected']} projected, {p['quarantined']} quarantined, "
            f"{p['pending']} pending"
        )
    for problem in summary.problems[: ingesting.SHOWN_PROBLEMS]:
        click.echo(f"  {problem['source']}: {problem['reason']}")
    hidden = len(summary.problems) - ingesting.SHOWN_PROBLEMS
    if hidden > 0:
        click.echo(f"  … and {hidden} more (--json lists them all)")
    if summary.warnings:
        affected = sum(w["count"] for w in summary.warnings)
        click.echo(f"warnings: {affected} event{'s' if affected != 1 else ''} projected with some")
    for w in summary.warnings[: ingesting.SHOWN_PROBLEMS]:
        more = f" and {w['count'] - 1} more" if w["count"] > 1 else ""
        click.echo(f"  {w['sources'][0]}{more}: {w['warning']}")
    hidden = len(summary.warnings) - ingesting.SHOWN_PROBLEMS
    if hidden > 0:
        click.echo(f"  … and {hidden} other warnings (--json lists them all)")
    for path in summary.empty:
        click.echo(f"  {path}: no events in the file")


def _some(names: list[str], shown: int = 3) -> str:
    listed = ", ".join(names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _events_or_fail(read: Iterator[ingesting.Read]) -> Iterable[ingesting.Read]:
    """``read`` as it was, once it has given one event; else the one-line error, before a
    database is created or a server asked anything."""
    empty: list[ingesting.Empty] = []
    for item in read:
        if not isinstance(item, ingesting.Empty):
            return itertools.chain(empty, [item], read)
        empty.append(item)
    fail(f"no events in {_some([e.source for e in empty])}")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--provider-key",
    help="The provider_key the deliveries are stored under [server default: default].",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Return once every batch has its receipt, without waiting for the projection.",
)
@client_options
def ingest(
    paths: tuple[Path, ...],
    provider_key: str | None,
    no_wait: bool,
    as_json: bool,
    **flags: Any,
) -> None:
    """Send the OpenLineage events in PATHS to a server (--url) or a database (--db).

    PATHS are files, read by what they hold whatever their name (an event, an array of
    events, {"events": [...]}, an event a line, or events one after another, as
    openlineage-python's FileTransport writes them) and folders (their *.json, *.jsonl,
    *.ndjson files, recursively). Prints how many events were accepted, duplicate (already
    stored) or invalid, where each invalid one is, and the projector's warnings; exits
    non-zero when any event did not reach the graph, or when a request fails.
    """
    files = ingesting.discover(paths)
    if not files:
        fail(f"no *.json, *.jsonl or *.ndjson files in {', '.join(map(str, paths))}")
    items = _events_or_fail(ingesting.read_files(files))
    total = ingesting.count_files_bytes(files)
    with (
        connected(flags, create=True) as client,
        _progress_bar(total, client.target) as progress,
    ):
        summary = ingesting.ingest(
            client,
            items,
            provider_key=provider_key,
            wait=not no_wait,
            progress=progress,
        )
    summary.files = len(files)
    _report(summary, as_json, f"{len(files)} file{'s' if len(files) != 1 else ''}")
    if not summary.ok:
        sys.exit(1)


def _private(url: str) -> bool:
    """Whether the default rules refuse the URL (notify/targets.py): a receiver that is
    not public, such as `subscriptions listen`'s."""
    from embrasure.notify.targets import TargetPolicy, TargetRefused

    try:
        TargetPolicy(ports=None).check(url)
    except TargetRefused:
        return True
    return False


@click.command()
@setting_options("url", "token", "db")
@click.option("--json", "as_json", is_flag=True, help="Print the ingest summary as JSON.")
@click.option(
    "--webhook",
    metavar="URL",
    help="Subscribe URL to what happens to the demo's warehouse table and below it, then"
    " load the next night too, when a check fails, a column is dropped and a run fails.",
)
def demo(as_json: bool, webhook: str | None, **flags: Any) -> None:
    """Load a small sample platform, so the graph has something to show.

    An Airflow DAG with three tasks, a Spark job writing an S3 path that is also a
    warehouse table, three dbt models with column lineage (a masked e-mail, a join, an
    aggregation) and a dashboard service. Into the default database unless --url or --db
    says otherwise; loading it again changes nothing. With --webhook, the notifications
    of its second night (docs/notifications.md#a-worked-example).
    """
    from embrasure.cli import demo as sample
    from embrasure.cli import demo_incident as incident
    from embrasure.cli.client import LocalClient

    items = sample.items()
    serve = f"{_command()} serve"
    if webhook is not None and _private(webhook):
        # A receiver on this machine (`subscriptions listen`): the webhook's host is
        # allowed here, in the database this command opens, and the server needs it
        # allowed too (docs/security.md#webhook-targets). A server at --url decides.
        host = urllib.parse.urlsplit(webhook).hostname or ""
        flags = {**flags, "webhook_allow": host}
        serve += f" --webhook-allow {host}"
    with connected(flags, create=True, prefer_db=True) as client:
        added = None
        if webhook is not None:
            # Before the night that causes them: a projection decides what it sees.
            wanted = {**incident.SUBSCRIPTION, "url": webhook}
            added = client.post("/api/v1/subscriptions", content=orjson.dumps(wanted))
            items += incident.items()
        summary = ingesting.ingest(client, items, provider_key=sample.PROVIDER_KEY)
        where = (
            f"--db {client.target}" if isinstance(client, LocalClient) else f"--url {client.target}"
        )
    _report(summary, as_json, "the demo")
    if not summary.ok:
        sys.exit(1)
    if as_json:
        return
    if added is not None:
        parts = urllib.parse.urlsplit(webhook)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        click.echo(
            f"subscription {added['subscription_id']}: {', '.join(added['events'])} of"
            f" {incident.WATCHED} and {incident.DEPTH} datasets below it, to {webhook};"
            " its signing secret, shown once:"
        )
        click.echo(added["secret"])
        click.echo(
            f"watch them arrive: {_command()} subscriptions listen --port {port}"
            f" --secret {added['secret']} (the server sends them, `{serve}`)"
        )
    click.echo(
        ("already loaded" if summary.accepted == 0 else "loaded")
        + ": an Airflow DAG (orders_daily, 3 tasks), a Spark job writing "
        f"{sample.LAKE}/{sample.SPARK_PATH} (the table {sample.TABLE}), 3 dbt models with "
        f"column lineage, and the service {sample.DASHBOARD}"
    )
    click.echo("next, try:")
    me = _command()
    click.echo(
        f"  {me} lineage {where} --namespace {sample.LAKE} --name {sample.SPARK_PATH} "
        "--direction downstream"
    )
    click.echo(
        f"  {me} impact {where} --namespace {sample.WAREHOUSE} --name {sample.CUSTOMERS} "
        "--field email"
    )
    # The web UI (docs/ui.md) is served by the server itself.
    if isinstance(client, LocalClient):
        click.echo(f"  {me} serve --db {client.target}, then open http://127.0.0.1:5000/")
    else:
        click.echo(f"  open {client.target.rstrip('/')}/ in a browser (the web UI)")


def _command() -> str:
    """How to run ``embrasure`` from here: its name when one is on PATH, else this
    virtual environment's script (``.venv/bin/embrasure`` after ``scripts/serve``)."""
    if shutil.which("embrasure") is not None:
        return "embrasure"
    script = Path(sys.executable).parent / "embrasure"
    with contextlib.suppress(ValueError):
        return str(script.relative_to(Path.cwd()))
    return str(script)


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@setting_options("db")
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
def backup(path: Path, force: bool, **flags: Any) -> None:
    """Copy the --db database to PATH, consistently, while a server may be writing to it.

    PATH gets the log's file and PATH-graph the graph's: serve them with `embrasure serve
    --db sqlite:///PATH` (PATH alone serves too: its graph is rebuilt from its log).
    """
    from embrasure.store import open_store, redact
    from embrasure.store.sqlite_files import graph_path_of

    db = load_settings(flags).db
    source = db.removeprefix("sqlite:///")
    if not db.startswith("sqlite:///"):
        fail(
            f"backup copies a SQLite database (sqlite:///PATH); for {redact(db)} use its own"
            " tools (PostgreSQL: pg_dump, or base backups with WAL archiving)"
        )
    if not os.path.exists(source):
        fail(f"--db {db}: no database at {os.path.abspath(source)}")
    if path.exists() and os.path.samefile(path, source):
        fail(f"{path} is the database itself")
    graph = Path(graph_path_of(str(path)))
    for written in (path, graph):
        if written.exists() and not force:
            fail(f"{written} exists; pass --force to replace it")
    folder = path.absolute().parent
    if not folder.is_dir():
        # SQLite would say only "unable to open database file".
        why = "is not a folder" if folder.exists() else "does not exist"
        fail(f"cannot write backup to {path}: folder {folder} {why}")
    started = time.monotonic()
    try:
        store = open_store(db)
        try:
            store.backup(str(path))
        finally:
            store.close()
    except EmbrasureError as exc:
        fail(str(exc))
    size = path.stat().st_size + graph.stat().st_size  # both files (PATH-graph beside)
    click.echo(f"backed up {db} to {path}: {byte_size(size)} in {time.monotonic() - started:.2f} s")


COMMANDS = (ingest, demo, backup)
