"""`embrasure archive verify` (docs/operations.md#retention-and-the-archive): reads every
segment of an archive and checks it against the manifest. It needs the archive only, not
a server or a database, so a copy of an archive can be checked anywhere; with --db it also
finds every delivery the database trimmed, with its SHA-256."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from embrasure.cli.options import byte_size, fail, load_settings, setting_options
from embrasure.errors import EmbrasureError
from embrasure.lifecycle.segments import deliveries, describe

if TYPE_CHECKING:
    from embrasure.lifecycle.verify import VerifyReport


@click.group()
def archive() -> None:
    """The archive of trimmed delivery bodies."""


@archive.command()
@setting_options("archive")
@click.option(
    "--db",
    "db",
    default=None,
    help="Also check that every delivery this database trimmed is in the archive with"
    " its body's SHA-256.",
)
def verify(db: str | None, **flags: Any) -> None:
    """Check every segment of --archive: its SHA-256 and contents against the manifest,
    and every delivery in exactly one segment. Exit 0 when clean, 1 when not."""
    from embrasure.lifecycle.archive import Archive
    from embrasure.lifecycle.retention import trimmed_deliveries
    from embrasure.store import open_store

    settings = load_settings(flags)
    if not settings.archive:
        fail("--archive (or EMBRASURE_ARCHIVE) is required: the archive's directory or URL")
    store = None
    try:
        archive_ = Archive(settings.archive, create=False)
        if db is None:
            report = archive_.verify()
        else:
            store = open_store(db, create=False)
            report = archive_.verify(trimmed_deliveries(store))
    except EmbrasureError as exc:
        fail(str(exc))
    finally:
        if store is not None:
            store.close()
    show(report)
    if not report.ok:
        sys.exit(1)


def show(report: VerifyReport) -> None:
    """Per-segment lines on stdout, then the problems no segment line holds, then the
    summary (on stderr when there are problems, so `2>/dev/null` keeps only the
    listing)."""
    for check in report.checks:
        s = check.segment
        if check.problem is None:
            click.echo(
                f"ok   {s.name}  seqs {describe(s.ranges, most=3)}  {deliveries(s.count)}"
                f"  {byte_size(s.size)}"
            )
        else:
            click.echo(f"BAD  {check.problem}")  # it names the segment
    for name in report.unlisted:
        click.echo(f"note {name}  a segment file with no manifest entry (a crashed write): ignored")
    segment_problems = {c.problem for c in report.checks if c.problem}
    for problem in report.problems:
        if problem not in segment_problems:
            click.echo(f"BAD  {problem}")
    n = len(report.checks)
    summary = (
        f"archive {report.location}: {n} segment{'' if n == 1 else 's'}, "
        f"{deliveries(report.deliveries)}"
    )
    if report.expected:
        summary += f"; {report.expected} trimmed in the database, checked"
    if report.ok:
        click.echo(f"{summary}: ok")
    else:
        p = len(report.problems)
        click.echo(f"{summary}: {p} problem{'' if p == 1 else 's'}", err=True)


COMMANDS = (archive,)
