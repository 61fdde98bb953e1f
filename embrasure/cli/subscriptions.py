"""`embrasure subscriptions add|list|remove` (docs/notifications.md#subscribing): who
hears of failed and recovered checks, and where, straight in the database (--db), like
`embrasure grants`. `add` prints the new subscription's signing secret once."""

from __future__ import annotations

import secrets
import urllib.parse
from typing import Any

import click

from embrasure.cli.options import add_row, console, fail, new_table, print_json, setting_options
from embrasure.cli.tokens import database
from embrasure.model import Subscription, utc_now
from embrasure.notify.causes import KINDS
from embrasure.notify.webhooks import FORMATS, new_secret


@click.group()
def subscriptions() -> None:
    """Notification subscriptions: failed and recovered checks, sent as signed webhooks."""


@subscriptions.command()
@setting_options("db")
@click.option("--dataset", nargs=2, metavar="NAMESPACE NAME", help="Watch one dataset.")
@click.option("--namespace", metavar="NAMESPACE", help="Watch every dataset of a namespace.")
@click.option(
    "--events",
    default=",".join(KINDS),
    show_default=True,
    help=f"Comma-separated, of {', '.join(KINDS)}.",
)
@click.option("--url", required=True, help="The receiver's webhook (http or https).")
@click.option(
    "--format",
    "body_format",
    type=click.Choice(FORMATS),
    default="standard",
    show_default=True,
    help="standard: the JSON body, signed (Standard Webhooks); slack: a Slack incoming"
    " webhook's message.",
)
def add(
    dataset: tuple[str, str] | None,
    namespace: str | None,
    events: str,
    url: str,
    body_format: str,
    **flags: Any,
) -> None:
    """Subscribe a webhook; prints its id and its signing secret (shown once)."""
    if (dataset is None) == (namespace is None):
        fail("name what to watch: --dataset NAMESPACE NAME or --namespace NAMESPACE")
    wanted = tuple(e.strip() for e in events.split(",") if e.strip())
    unknown = sorted(set(wanted) - set(KINDS))
    if unknown or not wanted:
        fail(f"--events takes {', '.join(KINDS)}; got {events!r}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--url must be an http or https URL, got {url!r}")
    target, ns, name = ("dataset", *dataset) if dataset else ("namespace", namespace or "", "")
    s = Subscription(
        f"sub_{secrets.token_hex(6)}",
        target,
        ns,
        name,
        wanted,
        url,
        new_secret(),
        utc_now(),
        None,
        body_format,
    )
    with database(flags, create=True) as store:
        store.add_subscription(s)
    what = f"dataset {ns} {name}" if target == "dataset" else f"namespace {ns}"
    click.echo(f"subscription {s.subscription_id}: {', '.join(wanted)} of {what} to {url}")
    click.echo("Its signing secret, shown once (the receiver verifies webhook-signature with it):")
    click.echo(s.secret)


@subscriptions.command("list")
@setting_options("db")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_subscriptions(as_json: bool, **flags: Any) -> None:
    """Every subscription, oldest first (never their secrets)."""
    with database(flags) as store:
        found = store.subscriptions()
    rows = [
        {
            "subscription": s.subscription_id,
            "target": s.target,
            "namespace": s.namespace,
            "name": s.name or None,
            "events": list(s.events),
            "url": s.url,
            "format": s.format,
            "created_at": s.created_at,
        }
        for s in found
    ]
    if as_json:
        print_json(rows)
        return
    table = new_table("subscription", "watches", "events", "url", "created")
    for s in found:
        watches = f"{s.namespace} {s.name}" if s.name else f"{s.namespace} (namespace)"
        add_row(table, s.subscription_id, watches, ", ".join(s.events), s.url, s.created_at)
    console().print(table)


@subscriptions.command()
@setting_options("db")
@click.argument("subscription_id")
def remove(subscription_id: str, **flags: Any) -> None:
    """Remove a subscription: nothing more is sent to it."""
    with database(flags) as store:
        removed = store.remove_subscription(subscription_id)
    if not removed:
        fail(f"no subscription {subscription_id!r} (see `embrasure subscriptions list`)")
    click.echo(f"subscription {subscription_id} removed")


COMMANDS = (subscriptions,)
