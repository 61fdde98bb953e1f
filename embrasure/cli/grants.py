"""`embrasure grants add|list|remove` (docs/security.md#grants): who may use which scope
on which namespaces, straight in the database (--db), like `embrasure tokens`."""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import click

from embrasure.access.grants import SCOPES, check_rule
from embrasure.cli.options import add_row, console, fail, new_table, print_json, setting_options
from embrasure.cli.tokens import database
from embrasure.model import Grant, utc_now


@click.group()
def grants() -> None:
    """Grant rules: scopes on namespace globs, to groups, subjects, clients or tokens."""


@grants.command()
@setting_options("db")
@click.option(
    "--to",
    "who",
    required=True,
    help="group:NAME or subject:SUB or client:ID (from the provider's JWTs), or token:ID.",
)
@click.option("--scope", required=True, type=click.Choice(SCOPES), help="admin allows all.")
@click.option(
    "--namespaces",
    default="*",
    show_default=True,
    help="A glob of OpenLineage namespaces: airflow-prod/*, finance.*, *.",
)
def add(who: str, scope: str, namespaces: str, **flags: Any) -> None:
    """Add a rule; servers apply it within 2 s."""
    try:
        check_rule(who, scope, namespaces)
    except ValueError as exc:
        fail(str(exc))
    grant = Grant(secrets.token_hex(6), who, scope, namespaces, utc_now(), None)
    with database(flags, create=True) as store:
        store.add_grant(grant)
    click.echo(f"grant {grant.grant_id}: {who} may {scope} on {namespaces}")


@grants.command("list")
@setting_options("db")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_grants(as_json: bool, **flags: Any) -> None:
    """Every rule, oldest first."""
    with database(flags) as store:
        found = store.grants()
    if as_json:
        print_json([dataclasses.asdict(g) for g in found])
        return
    table = new_table("grant", "who", "scope", "namespaces", "created", "by")
    for g in found:  # add_row: a glob such as finance.[ab]* is text, not rich markup
        add_row(table, g.grant_id, g.who, g.scope, g.namespaces, g.created_at, g.created_by)
    console().print(table)


@grants.command()
@setting_options("db")
@click.argument("grant_id")
def remove(grant_id: str, **flags: Any) -> None:
    """Remove a rule by its id (servers stop applying it within 2 s)."""
    with database(flags) as store:
        removed = store.remove_grant(grant_id)
    if not removed:
        fail(f"no grant {grant_id!r} (see `embrasure grants list`)")
    click.echo(f"grant {grant_id} removed")


COMMANDS = (grants,)
