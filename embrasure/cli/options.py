"""What every `embrasure` command shares: flags generated from settings.SETTINGS, the
one-line error, and the listings' tables. A module of its own so that the command modules
(main.py, ingest.py, graph.py, admin.py…) can all use it without importing one
another."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import orjson

from embrasure.settings import BY_NAME, Settings

if TYPE_CHECKING:  # imported when used: `embrasure serve` needs neither httpx nor rich
    from rich.console import Console
    from rich.table import Table

    from embrasure.cli.client import Client
    from embrasure.store import Store

F = TypeVar("F", bound=Callable[..., Any])


def setting_options(*names: str) -> Callable[[F], F]:
    """Click options for the named settings; None means "not given on the command line",
    so Settings.load can fall back to the environment, then the default."""

    def decorate(func: F) -> F:
        for name in reversed(names):
            s = BY_NAME[name]
            kind: dict[str, Any] = {"is_flag": True} if s.type is bool else {"type": s.type}
            if s.repeated:  # each entry a flag of its own; the setting holds them as lines
                kind = {"multiple": True, "callback": _lines}
            func = click.option(
                s.flag,
                name,
                default=None,
                help=f"{s.help} [env {s.env}; default {s.default}]",
                **kind,
            )(func)
        return func

    return decorate


def _lines(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    return "\n".join(values) if values else None  # none given: the environment's, if any


def fail(message: str) -> NoReturn:
    """One clear line on stderr and a non-zero exit (docs/cli.md)."""
    click.echo(f"embrasure: error: {message}", err=True)
    sys.exit(1)


def byte_size(n: int) -> str:
    """A size for people: "812 bytes", "264.0 KiB"."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def open_log_store(settings: Settings) -> Store:
    """The store serve and consume append to, as the settings open it (EmbrasureError
    when it cannot be opened)."""
    from embrasure.store import open_store

    return open_store(
        settings.db,
        upgrade=settings.upgrade,
        pool_size=settings.db_pool_size,
        compression=settings.log_compression,
    )


def load_settings(flags: dict[str, Any]) -> Settings:
    from embrasure.notify.targets import webhook_targets

    try:
        settings = Settings.load(flags)
        webhook_targets(settings)  # a bad --webhook-allow is one line before anything runs
    except ValueError as exc:
        fail(str(exc))
    return settings


def client_options(func: F) -> F:
    """--url / --db (which transport, see client.open_client) and --json."""
    func = click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON instead of text: the API's answer (for ingest, the summary).",
    )(func)
    return setting_options("url", "token", "db")(func)


@contextlib.contextmanager
def connected(
    flags: dict[str, Any], *, create: bool = False, prefer_db: bool = False
) -> Iterator[Client]:
    """The command's client; any ClientError inside becomes the one-line error."""
    from embrasure.cli.client import ClientError, open_client

    settings = load_settings(flags)
    try:
        with open_client(flags, settings, create=create, prefer_db=prefer_db) as client:
            yield client
    except ClientError as exc:
        fail(str(exc))


def print_json(doc: Any) -> None:
    click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())


def console(stderr: bool = False) -> Console:
    """Tables for people. Off a terminal (a pipe, a file) rich would fit them to 80
    columns and wrap every namespace; a wide page keeps each row on one line there."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    wide = None if stream.isatty() or "COLUMNS" in os.environ else 250
    return Console(file=stream, highlight=False, width=wide, soft_wrap=False)


# -- listings: one page of rows, then where the next page starts --------------------------


def page_options(func: Any) -> Any:
    func = click.option("--cursor", help="Continue a listing from its next_cursor.")(func)
    return click.option(
        "--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Rows."
    )(func)


def new_table(*columns: str) -> Table:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def add_row(table: Table, *cells: Any) -> None:
    from rich.text import Text

    # Text, not markup: a name like "[x]" must print as itself.
    table.add_row(*(Text("" if c is None else str(c)) for c in cells))


def show_table(table: Table, title: str, next_cursor: str | None = None) -> None:
    from rich.text import Text

    out = console()
    out.print(Text(title))
    if table.row_count and out.is_terminal:
        out.print(table)
    elif table.row_count:
        # rich pads every cell to its column's width; in a pipe or a file, trailing
        # blanks only get in the way of grep and diff.
        with out.capture() as captured:
            out.print(table)
        click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
    if next_cursor:
        # Quoted for the shell: a cursor is JSON text, brackets and quotes included.
        console(stderr=True).print(Text(f"more: add --cursor {shlex.quote(next_cursor)}"))
