"""`embrasure subscriptions add|list|remove` (docs/notifications.md#subscribing): who
hears of failed checks, schema changes and failed runs, and where, straight in the
database (--db), like `embrasure grants`; the HTTP API has the same (web/subscriptions.py).
`add` prints the new subscription's signing secret once."""

from __future__ import annotations

from typing import Any

import click

from embrasure.cli.options import (
    add_row,
    console,
    fail,
    load_settings,
    new_table,
    print_json,
    setting_options,
)
from embrasure.cli.tokens import database
from embrasure.model import Subscription
from embrasure.notify.secrets import new_key, sealed
from embrasure.notify.targets import TargetRefused, webhook_targets
from embrasure.notify.webhooks import FORMATS, URL, new_subscription
from embrasure.projector.causes import KINDS, STALE_AFTER
from embrasure.projector.outbox import MAX_DEPTH
from embrasure.settings import parse_duration, spell_duration


@click.group()
def subscriptions() -> None:
    """Notification subscriptions: failed checks, schema changes, failed runs, sent as
    signed webhooks."""


@subscriptions.command()
@setting_options("db", "subscription_secrets_key", "webhook_allow", "webhook_ports")
@click.option("--dataset", nargs=2, metavar="NAMESPACE NAME", help="Watch one dataset.")
@click.option("--job", nargs=2, metavar="NAMESPACE NAME", help="Watch one job's runs.")
@click.option(
    "--namespace", metavar="NAMESPACE", help="Watch every dataset and job of a namespace."
)
@click.option(
    "--depth",
    type=click.IntRange(0, MAX_DEPTH),
    default=0,
    show_default=True,
    help="With --dataset: also what lies this many datasets downstream of it.",
)
@click.option(
    "--stale-after",
    metavar="DURATION",
    help="With --dataset: also tell when it was not written for this long (12h, 1d…).",
)
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
    job: tuple[str, str] | None,
    namespace: str | None,
    depth: int,
    stale_after: str | None,
    events: str,
    url: str,
    body_format: str,
    **flags: Any,
) -> None:
    """Subscribe a webhook; prints its id and its signing secret (shown once)."""
    if [dataset, job, namespace].count(None) != 2:
        fail(
            "name one thing to watch: --dataset NAMESPACE NAME, --job NAMESPACE NAME"
            " or --namespace NAMESPACE"
        )
    if depth and dataset is None:
        fail("--depth is for --dataset: what lies downstream of it")
    stale_seconds = 0
    if stale_after is not None:
        if dataset is None:
            fail("--stale-after is for --dataset: how long it may go unwritten")
        try:
            stale_seconds = int(parse_duration(stale_after).total_seconds())
        except ValueError as exc:
            fail(f"--stale-after: {exc}")
        low, high = STALE_AFTER
        if not low <= stale_seconds <= high:
            fail("--stale-after must be from a minute (the sender looks once a minute) to a year")
    wanted = tuple(e.strip() for e in events.split(",") if e.strip())
    unknown = sorted(set(wanted) - set(KINDS))
    if unknown or not wanted:
        fail(f"--events takes {', '.join(KINDS)}; got {events!r}")
    if not URL.match(url):
        fail(f"--url must be an http or https URL with a host, got {url!r}")
    if dataset:
        target, ns, name = ("dataset", *dataset)
    elif job:
        target, ns, name = ("job", *job)
    else:
        target, ns, name = ("namespace", namespace or "", "")
    s = new_subscription(
        target,
        ns,
        name,
        wanted,
        url,
        body_format=body_format,
        depth=depth,
        stale_after=stale_seconds,
    )
    settings = load_settings(flags)
    try:  # as the API does; the sender checks again at every send
        webhook_targets(settings).vet(url)
    except TargetRefused as exc:
        fail(f"--url {url}: {exc}")
    with database(flags, create=True) as store:
        store.add_subscription(sealed(s, settings.subscription_secrets_key))
    what = described(s)
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
            "depth": s.depth,
            "stale_after_seconds": s.stale_after,
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
        add_row(table, s.subscription_id, described(s), ", ".join(s.events), s.url, s.created_at)
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


def described(s: Subscription) -> str:
    """What a subscription watches, in words."""
    if s.target == "namespace":
        return f"namespace {s.namespace}"
    below = f" and {s.depth} downstream" if s.depth else ""
    stale = f", stale after {spell_duration(s.stale_after)}" if s.stale_after else ""
    return f"{s.target} {s.namespace} {s.name}{below}{stale}"


@subscriptions.command()
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--secret", required=True, help="The subscription's signing secret (whsec_…).")
def listen(port: int, host: str, secret: str) -> None:
    """A webhook receiver to watch notifications arrive: verifies each one's signature
    (Standard Webhooks) and prints it, until Ctrl-C. For trying subscriptions out."""
    import orjson
    import standardwebhooks

    from embrasure.notify.listener import WebhookReceiver

    try:
        standardwebhooks.Webhook(secret)
    except Exception as exc:  # the library raises its own errors for a malformed secret
        fail(f"--secret is not a Standard Webhooks secret (whsec_…): {exc}")

    class Printing(WebhookReceiver):
        def take(self, webhook_id: str, doc: dict[str, Any]) -> None:
            click.echo(f"{webhook_id} {doc.get('type')}, verified:")
            click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())

        def refused(self, exc: Exception) -> None:
            click.echo(f"refused a request: {exc}", err=True)

    receiver = Printing(secret, host=host, port=port)
    click.echo(f"listening on http://{host}:{port}/ (Ctrl-C to stop)")
    try:
        receiver.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.server.server_close()


@subscriptions.command("new-key")
def new_key_command() -> None:
    """Print a new key for --subscription-secrets-key (Fernet: 32 random bytes, url-safe
    base64). Keep it outside the database, as a secret of every server's and notifier's."""
    click.echo(new_key())
