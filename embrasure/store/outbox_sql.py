"""Subscriptions and the notifications outbox (docs/notifications.md), one SQL text for
both backends (PostgreSQL's connection translates the placeholders)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from embrasure.model import Decided, Notification, Subscription

SUBSCRIPTION_COLUMNS = (
    "subscription_id, target, namespace, name, events, url, secret, created_at, created_by, format,"
    " depth, stale_after"
)
NOTIFICATION_COLUMNS = (
    "subscription_id, cause, notification_id, kind, body, decided_at, state, attempts,"
    " next_at, last_error, done_at"
)
Connection = Any  # sqlite3.Connection or postgres_conn.Connection


def subscription_of(row: Sequence[Any]) -> Subscription:
    return Subscription(row[0], row[1], row[2], row[3], tuple(row[4].split()), *row[5:12])


def subscriptions(conn: Connection) -> list[Subscription]:
    rows = conn.execute(
        f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions ORDER BY created_at, subscription_id"
    ).fetchall()
    return [subscription_of(r) for r in rows]


def any_subscription(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM subscriptions LIMIT 1").fetchone() is not None


def add_subscription(conn: Connection, s: Subscription) -> None:
    row = dataclasses.astuple(s)
    conn.execute(
        f"INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*row[:4], " ".join(s.events), *row[5:]),
    )


def remove_subscription(conn: Connection, subscription_id: str) -> bool:
    cursor = conn.execute("DELETE FROM subscriptions WHERE subscription_id = ?", (subscription_id,))
    return bool(cursor.rowcount == 1)


def cause_decided(conn: Connection, prefix: str) -> bool:
    # substr, not LIKE: a dataset's name may hold % and _ (both backends count characters).
    row = conn.execute(
        "SELECT 1 FROM notifications WHERE substr(cause, 1, ?) = ? LIMIT 1",
        (len(prefix), prefix),
    ).fetchone()
    return row is not None


def decided(conn: Connection, subscription_id: str, prefix: str) -> list[Decided]:
    # substr, not LIKE: a dataset's name may hold % and _ (both backends count characters).
    rows = conn.execute(
        "SELECT cause, decided_at, state FROM notifications"
        " WHERE subscription_id = ? AND substr(cause, 1, ?) = ? ORDER BY decided_at",
        (subscription_id, len(prefix), prefix),
    ).fetchall()
    return [Decided(*r) for r in rows]


def add_notifications(conn: Connection, rows: Sequence[Notification]) -> None:
    """The outbox's new rows; a cause already decided for a subscription is left as it
    is (sent, pending or given up): that is what makes a cause fire once."""
    if rows:
        conn.executemany(
            f"INSERT INTO notifications ({NOTIFICATION_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (subscription_id, cause) DO NOTHING",
            [dataclasses.astuple(n) for n in rows],
        )


def any_due(conn: Connection, now: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM notifications WHERE state = 'pending' AND next_at <= ? LIMIT 1", (now,)
    ).fetchone()
    return row is not None


def claim(conn: Connection, now: str, until: str, limit: int) -> list[Notification]:
    """Up to ``limit`` due notifications, oldest first, claimed until ``until``: their
    ``next_at`` moves there in the same statement, so another sender (another process,
    another machine on PostgreSQL) does not take them meanwhile, and takes them after it
    if this one dies before recording what became of them. PostgreSQL re-checks the
    condition on a row another transaction just claimed, and skips it."""
    rows = conn.execute(
        "UPDATE notifications SET next_at = ?"
        " WHERE state = 'pending' AND next_at <= ? AND notification_id IN ("
        "  SELECT notification_id FROM notifications WHERE state = 'pending' AND next_at <= ?"
        "  ORDER BY next_at, notification_id LIMIT ?)"
        f" RETURNING {NOTIFICATION_COLUMNS}",
        (until, now, now, limit),
    ).fetchall()
    # As they were before the claim: a refusal's backoff counts from now, not the lease.
    return sorted(
        (dataclasses.replace(Notification(*r), next_at=now) for r in rows),
        key=lambda n: (n.decided_at, n.notification_id),
    )


def update(conn: Connection, n: Notification) -> None:
    """What became of a notification: its state, attempts, and its body (the sender
    adds what lies downstream at the first attempt, and sends the same bytes after)."""
    conn.execute(
        "UPDATE notifications SET state = ?, attempts = ?, next_at = ?, last_error = ?,"
        " done_at = ?, body = ? WHERE subscription_id = ? AND cause = ?",
        (
            n.state,
            n.attempts,
            n.next_at,
            n.last_error,
            n.done_at,
            n.body,
            n.subscription_id,
            n.cause,
        ),
    )


def states(conn: Connection, subscription_id: str, causes: Iterable[str]) -> dict[str, str]:
    """The state of each of a subscription's causes that has a row."""
    out: dict[str, str] = {}
    for cause in causes:
        row = conn.execute(
            "SELECT state FROM notifications WHERE subscription_id = ? AND cause = ?",
            (subscription_id, cause),
        ).fetchone()
        if row is not None:
            out[cause] = row[0]
    return out


def forget(conn: Connection, before: str) -> int:
    """Delete the rows done (sent, superseded, given up) before ``before``: how many. A
    cause that old is never decided again (its result is no longer a check's latest, and
    a rebuild decides nothing), so its row is no longer needed to keep it from firing."""
    cursor = conn.execute(
        "DELETE FROM notifications WHERE state <> 'pending' AND done_at < ?", (before,)
    )
    return int(cursor.rowcount)


STATES = ("pending", "sent", "superseded", "failed")


def summary(conn: Connection) -> tuple[dict[str, int], str | None]:
    """Outbox rows by state, and when the oldest pending one was decided (None: none)."""
    counts = dict.fromkeys(STATES, 0)
    for state, count in conn.execute(
        "SELECT state, COUNT(*) FROM notifications GROUP BY state"
    ).fetchall():
        counts[state] = int(count)
    row = conn.execute(
        "SELECT MIN(decided_at) FROM notifications WHERE state = 'pending'"
    ).fetchone()
    return counts, row[0]


def failing(conn: Connection, attempts: int) -> list[str]:
    """The subscriptions with a pending notification refused ``attempts`` times or more."""
    rows = conn.execute(
        "SELECT DISTINCT subscription_id FROM notifications"
        " WHERE state = 'pending' AND attempts >= ? ORDER BY subscription_id",
        (attempts,),
    ).fetchall()
    return [r[0] for r in rows]


def notifications(conn: Connection, subscription_id: str | None = None) -> list[Notification]:
    """Every outbox row (one subscription's), oldest first."""
    where, args = ("WHERE subscription_id = ?", (subscription_id,)) if subscription_id else ("", ())
    rows = conn.execute(
        f"SELECT {NOTIFICATION_COLUMNS} FROM notifications {where}"
        " ORDER BY decided_at, notification_id",
        args,
    ).fetchall()
    return [Notification(*r) for r in rows]
