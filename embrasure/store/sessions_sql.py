"""The web UI's sessions (docs/security.md#signing-in-to-the-web-ui), one SQL text for
both backends (PostgreSQL's connection translates the placeholders)."""

from __future__ import annotations

import dataclasses
from typing import Any

from embrasure.model import UiSession

COLUMNS = (
    "digest, subject, issuer, name, groups, csrf, created_at, seen_at, expires_at,"
    " ended_at, ended_by"
)
Connection = Any  # sqlite3.Connection or postgres_conn.Connection


def add(conn: Connection, s: UiSession) -> None:
    row = dataclasses.astuple(s)
    conn.execute(
        f"INSERT INTO sessions ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*row[:4], "\n".join(s.groups), *row[5:]),
    )


def get(conn: Connection, digest: str) -> UiSession | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM sessions WHERE digest = ?", (digest,)).fetchone()
    if row is None:
        return None
    digest_, subject, issuer, name, groups, csrf, created, seen, expires, ended, by = row
    return UiSession(
        digest_,
        subject,
        issuer,
        name,
        tuple(g for g in groups.split("\n") if g),
        csrf,
        int(created),
        int(seen),
        int(expires),
        None if ended is None else int(ended),
        by,
    )


def touch(conn: Connection, digest: str, seen_at: int) -> None:
    conn.execute(
        "UPDATE sessions SET seen_at = ? WHERE digest = ? AND seen_at < ?",
        (seen_at, digest, seen_at),
    )


def end(conn: Connection, at: int, by: str, digest: str | None, subject: str | None) -> int:
    where, args = "ended_at IS NULL AND expires_at > ?", list[Any]([at])
    if digest is not None:
        where, args = f"{where} AND digest = ?", [*args, digest]
    if subject is not None:
        where, args = f"{where} AND subject = ?", [*args, subject]
    cursor = conn.execute(
        f"UPDATE sessions SET ended_at = ?, ended_by = ? WHERE {where}", (at, by, *args)
    )
    return int(cursor.rowcount)
