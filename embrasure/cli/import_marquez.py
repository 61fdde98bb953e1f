"""`embrasure import marquez --from postgresql://…`: a Marquez database's history into
Embrasure (docs/marquez.md#importing-marquezs-history).

Each event Marquez kept (store/marquez_source.py reads them in pages) is one delivery,
POSTed to ``/api/v1/lineage`` of the server (``--url``) or the database (``--db``) like
any producer's, under ``--provider-key`` (default ``marquez-import``) with the
Idempotency-Key ``marquez:{identity}``, the event's identity being the SHA-256 of its
canonical JSON (docs/projection.md): importing again, or an event Marquez stored twice,
is a duplicate delivery, never a second one, and the receiver's bounds apply as to any
producer (an event over one is refused, and said so).

The position of the last page imported is kept in a state file (``--state``; by default
one per (source, target) under ``~/.cache/embrasure/``), written after each page, so a
run killed or interrupted (Ctrl-C) goes on from there; ``--restart`` starts over (which
is also safe: what was imported is a duplicate).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from embrasure.cli.options import client_options, connected, console, fail, print_json
from embrasure.projector.canonical import event_id

PAGE = 500  # events read from Marquez at a time (one short transaction each)
PROVIDER_KEY = "marquez-import"
SHOWN_REASONS = 10


def idempotency_key(event: Any) -> str:
    return "marquez:" + event_id(event)


def default_state(source: str, target: str) -> Path:
    digest = hashlib.sha256(f"{source}\n{target}".encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "embrasure" / f"import-marquez-{digest}.json"


def _save(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(doc))
    os.replace(partial, path)  # the state is the old one or the new one, never half


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    err = console(stderr=True)
    with Progress(
        TextColumn("importing Marquez's events"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("import", total=total or None)
        yield lambda done: progress.advance(task, done)


class Tally:
    def __init__(self) -> None:
        self.imported = 0
        self.duplicate = 0
        self.refused: Counter[str] = Counter()

    def to_json(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "duplicate": self.duplicate,
            "refused": sum(self.refused.values()),
            "reasons": dict(self.refused.most_common()),
        }


def _send(client: Any, event_text: str, provider_key: str, tally: Tally) -> None:
    """One event, one delivery; the receipt counted."""
    from embrasure.cli.client import ClientError

    body = event_text.encode()
    try:
        key = idempotency_key(orjson.loads(body))
    except orjson.JSONDecodeError as exc:  # jsonb is JSON: only a damaged row
        tally.refused[f"not JSON: {exc}"] += 1
        return
    reply = client.request(
        "POST",
        "/api/v1/lineage",
        params={"provider_key": provider_key},
        content=body,
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
    )
    if reply.status != 202:
        if reply.status in (400, 413, 415, 409):
            tally.refused[reply.problem(client.target)] += 1
            return
        raise ClientError(client.failure("POST", "/api/v1/lineage", reply))
    receipt = reply.json()
    if receipt["duplicate"]:
        tally.duplicate += 1
    elif receipt["state"] == "quarantined":  # over a per-event bound: stored, quarantined
        delivery = client.get(f"/api/v1/deliveries/{receipt['delivery_id']}")
        tally.refused[delivery["items"][0]["reason"] or "quarantined"] += 1
    else:
        tally.imported += 1


@click.group("import")
def import_group() -> None:
    """Import another server's history."""


@import_group.command("marquez")
@click.option(
    "--from",
    "source",
    required=True,
    help="The Marquez database: postgresql://USER@HOST:PORT/marquez (read only).",
)
@click.option(
    "--provider-key", default=PROVIDER_KEY, show_default=True, help="Stored with each delivery."
)
@click.option(
    "--state", type=click.Path(dir_okay=False, path_type=Path), help="Where the position is kept."
)
@click.option(
    "--restart", is_flag=True, help="Start from Marquez's first event, not the kept position."
)
@click.option(
    "--pages", type=int, default=None, help="Stop after this many pages (for tests and trials)."
)
@client_options
def marquez(
    source: str,
    provider_key: str,
    state: Path | None,
    restart: bool,
    pages: int | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Import every event a Marquez database kept (its lineage_events) into --db or --url.

    Resumable (the position is kept after each page of 500 events), idempotent (an event
    already imported is a duplicate), and safe while Marquez keeps running (a later run
    imports what it stored since). Prints how many events were imported, were already
    there, and were refused, with the reasons.
    """
    from embrasure.errors import StoreUnavailable
    from embrasure.store import redact
    from embrasure.store.marquez_source import MarquezSource, NotMarquez, Position

    try:
        marquez_db = MarquezSource(source)
    except (NotMarquez, StoreUnavailable) as exc:
        fail(f"--from {redact(source)}: {exc}")
    tally = Tally()
    read = 0
    try:
        with connected(flags, create=True) as client:
            state_path = state or default_state(redact(source), client.target)
            position = None
            if state_path.exists() and not restart:
                saved = json.loads(state_path.read_text())
                position = Position.from_json(saved["position"]) if saved.get("position") else None
            with _progress(marquez_db.count_after(position)) as advance:
                for number, rows in enumerate(marquez_db.pages(position, PAGE), start=1):
                    for row in rows:
                        _send(client, row.event, provider_key, tally)
                    read += len(rows)
                    advance(len(rows))
                    position = Position(rows[-1].created_at, rows[-1].ctid)
                    _save(state_path, {"source": redact(source), "position": position.to_json()})
                    if pages is not None and number >= pages:
                        break
    except KeyboardInterrupt:
        click.echo(
            f"interrupted after {read} events ({tally.imported} imported); run the same"
            " command again to go on from there",
            err=True,
        )
        sys.exit(130)
    finally:
        marquez_db.close()
    _report(tally, read, as_json, redact(source))
    if tally.refused:
        sys.exit(1)


def _report(tally: Tally, read: int, as_json: bool, source: str) -> None:
    if as_json:
        print_json({"read": read, **tally.to_json()})
        return
    click.echo(
        f"{read} events from {source}: {tally.imported} imported, {tally.duplicate} already"
        f" there, {sum(tally.refused.values())} refused"
    )
    for reason, count in tally.refused.most_common(SHOWN_REASONS):
        click.echo(f"  {count}: {reason}")


COMMANDS = (import_group,)
