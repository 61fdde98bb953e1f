"""`embrasure admin hide|unhide|hidden`
(docs/operations.md#hiding-datasets-jobs-and-namespaces): thin clients of the admin
endpoints
(web/admin.py) over --url or --db. hide and unhide return once the projector has
applied the entry, so the next read already shows the change."""

from __future__ import annotations

from typing import Any

import click
import orjson

from embrasure.cli.options import (
    add_row,
    client_options,
    connected,
    fail,
    new_table,
    page_options,
    print_json,
    show_table,
)

# How long hide and unhide wait for the projector before saying it is behind.
WAIT_SECONDS = 30.0


@click.group()
def admin() -> None:
    """Hide datasets, jobs and namespaces from the graph served (needs scope admin)."""


def _target_options(func: Any) -> Any:
    func = click.option("--reason", help="Why: shown in `embrasure admin hidden`.")(func)
    func = click.option("--name", help="The dataset's or job's name (not for a namespace).")(func)
    func = click.option("--namespace", required=True, help="Namespace of the entity.")(func)
    return click.option(
        "--type",
        "kind",
        type=click.Choice(("dataset", "job", "namespace")),
        required=True,
        help="What to hide or show.",
    )(func)


def _decide(
    action: str,
    kind: str,
    namespace: str,
    name: str | None,
    reason: str | None,
    as_json: bool,
    flags: dict[str, Any],
) -> None:
    body = {"type": kind, "namespace": namespace, "name": name, "reason": reason}
    with connected(flags) as client:
        doc = client.post(
            f"/api/v1/admin/{action}",
            content=orjson.dumps({k: v for k, v in body.items() if v is not None}),
        )
        applied = client.wait_for_projection(doc["entries"][-1]["delivery_id"], WAIT_SECONDS)
    if not applied:
        fail(
            f"the {action} is stored but the projector has not applied it after "
            f"{WAIT_SECONDS:.0f} s: is a projector running?"
        )
    if as_json:
        print_json(doc)
    else:
        what = f"namespace {namespace}" if kind == "namespace" else f"{kind} {namespace} {name}"
        click.echo(f"{what}: {'hidden' if action == 'hide' else 'shown again'}")


@admin.command()
@_target_options
@client_options
def hide(
    kind: str, namespace: str, name: str | None, reason: str | None, as_json: bool, **flags: Any
) -> None:
    """Hide a dataset, job or namespace: left out of listings, search, lineage, impact
    and the export (its events are still projected). Recorded in the log."""
    _decide("hide", kind, namespace, name, reason, as_json, flags)


@admin.command()
@_target_options
@client_options
def unhide(
    kind: str, namespace: str, name: str | None, reason: str | None, as_json: bool, **flags: Any
) -> None:
    """Show a hidden dataset, job or namespace again."""
    _decide("unhide", kind, namespace, name, reason, as_json, flags)


@admin.command()
@page_options
@client_options
def hidden(limit: int, cursor: str | None, as_json: bool, **flags: Any) -> None:
    """What is hidden: who hid it, when and why."""
    with connected(flags) as client:
        doc = client.get("/api/v1/admin/hidden", {"limit": limit, "cursor": cursor})
    if as_json:
        print_json(doc)
        return
    table = new_table("type", "namespace", "name", "hidden at", "by", "reason")
    for e in doc["hidden"]:
        add_row(table, e["type"], e["namespace"], e["name"], e["hidden_at"], e["by"], e["reason"])
    show_table(table, f"hidden: {len(doc['hidden'])}", doc.get("next_cursor"))


@admin.command("sign-out")
@click.option("--subject", help="End this person's web UI sessions (their subject).")
@click.option("--everyone", is_flag=True, help="End every web UI session.")
@client_options
def sign_out(subject: str | None, everyone: bool, as_json: bool, **flags: Any) -> None:
    """End web UI sessions at once, on every server (docs/security.md)."""
    if (subject is None) == (not everyone):
        fail("give --subject SUBJECT or --everyone")
    body = {"subject": subject} if subject is not None else {"everyone": True}
    with connected(flags) as client:
        doc = client.post("/api/v1/admin/sign-out", content=orjson.dumps(body))
    if as_json:
        print_json(doc)
        return
    whose = f"of {subject}" if subject is not None else "of everyone"
    click.echo(f"ended {doc['ended']} session(s) {whose}")


COMMANDS = (admin,)
