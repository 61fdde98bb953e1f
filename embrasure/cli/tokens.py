"""`embrasure tokens create|list|revoke` (docs/security.md): bearer tokens, straight in the
database (--db), since a server may refuse every request until one exists."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from embrasure.access.grants import SCOPES
from embrasure.cli.options import console, fail, load_settings, print_json, setting_options
from embrasure.errors import EmbrasureError
from embrasure.model import Token, utc_now
from embrasure.store import Store, open_store, redact
from embrasure.web.auth import check_scopes, digest, new_token


@contextlib.contextmanager
def database(flags: dict[str, Any], create: bool = False) -> Iterator[Store]:
    """The database's store, closed after; what it raises is one line (``fail``). Only
    ``tokens create`` and ``grants add`` may create a database (a token made before the
    first `serve`, docs/security.md)."""
    db = load_settings(flags).db
    try:
        store = open_store(db, create=create)
    except EmbrasureError as exc:
        fail(f"--db {redact(db)}: {exc}")
    try:
        yield store
    except EmbrasureError as exc:
        fail(str(exc))
    finally:
        store.close()


@click.group()
def tokens() -> None:
    """Bearer tokens: auth is on as soon as one exists."""


@tokens.command()
@setting_options("db")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    required=True,
    type=click.Choice(SCOPES),
    help="What the token may do (repeat for several); admin allows everything.",
)
@click.option("--provider-key", help="Bind the token: its deliveries carry this provider_key.")
@click.option("--name", default="", help="A note saying whose token it is.")
def create(scopes: tuple[str, ...], provider_key: str | None, name: str, **flags: Any) -> None:
    """Create a token; it is printed once, alone on the last line."""
    token_id, text = new_token()
    token = Token(token_id, digest(text), check_scopes(scopes), provider_key, name, utc_now(), None)
    with database(flags, create=True) as store:
        store.add_token(token)
    bound = f", bound to provider_key {provider_key!r}" if provider_key else ""
    click.echo(f"token {token_id} ({' '.join(sorted(token.scopes))}{bound}); it is not stored:")
    click.echo(text)


@tokens.command("list")
@setting_options("db")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_tokens(as_json: bool, **flags: Any) -> None:
    """Every token, revoked ones too (never their text)."""
    with database(flags) as store:
        found = sorted(store.tokens(), key=lambda t: (t.created_at, t.token_id))
    rows: list[dict[str, Any]] = [
        {
            "token_id": t.token_id,
            "scopes": sorted(t.scopes),
            "provider_key": t.provider_key,
            "name": t.name,
            "created_at": t.created_at,
            "revoked_at": t.revoked_at,
        }
        for t in found
    ]
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("token", "scopes", "provider_key", "name", "created", "revoked")
    for r in rows:
        table.add_row(
            r["token_id"],
            " ".join(r["scopes"]),
            r["provider_key"] or "",
            r["name"],
            r["created_at"],
            r["revoked_at"] or "",
        )
    console().print(table)


@tokens.command()
@setting_options("db")
@click.argument("token_id")
def revoke(token_id: str, **flags: Any) -> None:
    """Revoke a token by its id (servers stop accepting it within 2 s)."""
    with database(flags) as store:
        revoked = store.revoke_token(token_id, utc_now())
    if not revoked:
        fail(f"no live token {token_id!r} (see `embrasure tokens list`)")
    click.echo(f"token {token_id} revoked")


COMMANDS = (tokens,)
