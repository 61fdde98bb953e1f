"""`embrasure import marquez --from postgresql://…`: a Marquez database's history into
Embrasure (docs/marquez.md#importing-marquezs-history).

Each event Marquez kept (store/marquez_source.py reads them in pages) is one delivery,
POSTed to ``/api/v1/lineage`` of the server (``--url``) or the database (``--db``) like
any producer's, under ``--provider-key`` (default ``marquez-import``) with the
Idempotency-Key ``marquez:{identity}``, the event's identity being the SHA-256 of its
canonical JSON (docs/projection.md): importing again, or an event Marquez stored twice,
is a duplicate delivery, never a second one, and the receiver's bounds apply as to any
producer (an event over one is refused, and said so). The events of a page are sent
together (``Client.request_many``): the receiver's group commit then makes one
transaction of many of them, 2.8 times the rate of one at a time (docs/marquez.md).

The position of the last page imported is kept in a state file (``--state``; by default
one per (source, target) under ``~/.cache/embrasure/``), written after each page, so a
run killed or interrupted (Ctrl-C) goes on from there, a minute before it (``REREAD``);
``--restart`` starts over (which is also safe: what was imported is a duplicate). The
position is not kept in Embrasure's database: it belongs to one source and one target,
and the target may be a server (``--url``) this command cannot write a table of.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from embrasure.cli.event_files import MAX_RETRY_WAIT, OVERLOAD_RETRIES, PROJECTION_TIMEOUT
from embrasure.cli.options import client_options, connected, console, fail, print_json
from embrasure.projector.canonical import event_id

if TYPE_CHECKING:  # httpx and psycopg load only when the command runs
    from embrasure.cli.client import Client, Request
    from embrasure.store.marquez_source import MarquezRow, Position

# Events read from Marquez at a time (one short transaction each), and sent together: the
# receiver's group commit makes few transactions of them (docs/receiver.md).
PAGE = 500
PROVIDER_KEY = "marquez-import"
ROUTE = "/api/v1/lineage"
SHOWN_REASONS = 10
# A rerun starts this long before the kept position (store/marquez_source.py: a row
# stamped before the last one read may commit after it). Marquez writes a row in one
# INSERT of its own; a minute covers a commit held up by a slow disk many times over.
REREAD = datetime.timedelta(minutes=1)


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


def _deliveries(rows: list[MarquezRow], provider_key: str, tally: Tally) -> list[Request]:
    """One delivery per row: its event's bytes as Marquez gives them back, keyed by the
    event's identity."""
    from embrasure.cli.client import Request

    out = []
    for row in rows:
        body = row.event.encode()
        try:
            key = idempotency_key(orjson.loads(body))
        except (orjson.JSONDecodeError, ValueError) as exc:  # jsonb is JSON: a damaged row
            tally.refused[f"not an event Embrasure can read: {exc}"] += 1
            continue
        out.append(
            Request(
                "POST",
                ROUTE,
                params={"provider_key": provider_key},
                content=body,
                headers={"Content-Type": "application/json", "Idempotency-Key": key},
            )
        )
    return out


def _send(client: Client, requests: list[Request], tally: Tally) -> None:
    """The page's deliveries, sent together; each receipt counted. 429 and 503 (the
    receiver overloaded, docs/receiver.md) are sent again: into --db, after projecting
    here (no projector may be running to bring the backlog under its bound); to a
    server, after its Retry-After."""
    from embrasure.cli.client import ClientError, LocalClient

    for _attempt in range(OVERLOAD_RETRIES):
        again: list[Request] = []
        waits: list[float] = []
        for request, reply in zip(requests, client.request_many(requests), strict=True):
            if reply.status == 202:
                _count(client, reply.json(), tally)
            elif reply.status == 409:  # this identity already delivered in other bytes
                tally.duplicate += 1
            elif reply.status in (400, 413, 415, 422):  # the receiver's bounds
                tally.refused[reply.problem(client.target)] += 1
            elif reply.status in (429, 503):
                again.append(request)
                with contextlib.suppress(ValueError):
                    waits.append(float(reply.headers.get("retry-after", "1")))
            else:
                raise ClientError(client.failure("POST", ROUTE, reply))
        if not again:
            return
        if isinstance(client, LocalClient):
            client.wait_for_projection("", PROJECTION_TIMEOUT)
        # The receiver measures its backlog at most once a second (receiver/backpressure.py).
        time.sleep(min(max(max(waits, default=1.0), 0.1), MAX_RETRY_WAIT))
        requests = again
    raise ClientError(
        f"{client.target} is still refusing deliveries after {OVERLOAD_RETRIES} tries"
    )


def _count(client: Client, receipt: dict[str, Any], tally: Tally) -> None:
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

    where = f"--from {redact(source)}"
    try:
        marquez_db = MarquezSource(source)
    except (NotMarquez, StoreUnavailable) as exc:
        fail(f"{where}: {exc}")
    tally = Tally()
    read = 0
    try:
        with connected(flags, create=True) as client:
            state_path = state or default_state(redact(source), client.target)
            kept = None if restart else _kept(state_path)
            position = kept.rewound(REREAD) if kept is not None else None
            with _progress(marquez_db.count_after(position)) as advance:
                for number, rows in enumerate(marquez_db.pages(position, PAGE), start=1):
                    _send(client, _deliveries(rows, provider_key, tally), tally)
                    read += len(rows)
                    advance(len(rows))
                    position = Position(rows[-1].created_at, rows[-1].ctid)
                    _save(state_path, {"source": redact(source), "position": position.to_json()})
                    if pages is not None and number >= pages:
                        break
    except StoreUnavailable as exc:  # Marquez's database went away meanwhile
        fail(f"{where}: {exc} (run the same command again to go on)")
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


def _kept(path: Path) -> Position | None:
    """The position a previous run kept in ``path``, if any."""
    from embrasure.store.marquez_source import Position

    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        return Position.from_json(saved["position"]) if saved.get("position") else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--state {path}: cannot read the kept position ({exc}); --restart starts over")


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
