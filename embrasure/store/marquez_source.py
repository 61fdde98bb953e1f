"""Marquez's ``lineage_events`` read in pages (``embrasure import marquez``,
docs/marquez.md#importing-marquezs-history): the one place that reads another server's
database, so its SQL lives here with the rest.

Marquez 0.50 keeps every event it accepted in ``lineage_events`` (its Flyway migrations
V17.2, V33, V36, V54, V66.2): ``event`` (jsonb), ``event_time``, ``created_at`` (when
Marquez stored it; NULL for rows stored before V54), and no key (V20 dropped it: the same
event posted twice is two rows). Rows are read in the order (``created_at``, ``ctid``):
first those without ``created_at`` by ``ctid``, then the rest by both, each page after
the last row of the one before (keyset paging, one short transaction a page), so a
Marquez that goes on writing meanwhile only adds rows after the position, which a later
run picks up. ``ctid`` moves only if the table is rewritten (VACUUM FULL, CLUSTER); the
import is idempotent, so a rerun from the start after that is safe, if slower.

A row's ``created_at`` is its transaction's start (``now()``), not its commit: a row
whose INSERT committed a moment after a later-stamped one was read is behind the
position once it shows. So a rerun starts ``Position.rewound`` (a minute before the kept
``created_at``) and sends that minute again, as duplicates, and the late row with it.

jsonb keeps neither the producer's key order nor its whitespace: the bytes imported are
``event::text``, PostgreSQL's rendering of the value. Embrasure identifies an event by
its canonical JSON (docs/projection.md), which jsonb does not change, so an event also
sent to Embrasure directly is one event in the graph.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from typing import Any, NamedTuple

import psycopg

from embrasure.errors import StoreUnavailable


class MarquezRow(NamedTuple):
    """One row of ``lineage_events``: where it is in the order, and its event."""

    created_at: datetime.datetime | None
    ctid: str  # "(page,item)"
    event_time: datetime.datetime | None
    event: str  # event::text


@dataclasses.dataclass(frozen=True)
class Position:
    """The last row read: the next page starts after it."""

    created_at: datetime.datetime | None
    ctid: str

    def to_json(self) -> dict[str, Any]:
        return {
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "ctid": self.ctid,
        }

    def rewound(self, by: datetime.timedelta) -> Position:
        """Where a rerun starts: ``by`` before this position's ``created_at`` (the
        undated rows have no later writers: they start where they were)."""
        if self.created_at is None:
            return self
        return Position(self.created_at - by, "(0,0)")  # (0,0): before any row's ctid

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Position:
        created = doc.get("created_at")
        return cls(datetime.datetime.fromisoformat(created) if created else None, doc["ctid"])


class NotMarquez(Exception):
    """The database has no ``lineage_events`` table, or not Marquez 0.50's."""


def _one_line(exc: psycopg.Error) -> str:
    # libpq's message is several lines (a hint on its own): one line, as the CLI says.
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


_COLUMNS = "created_at, ctid::text, event_time, event::text"


class MarquezSource:
    """A Marquez database, read only."""

    def __init__(self, url: str) -> None:
        try:
            self.conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to the Marquez database: {_one_line(exc)}"
            ) from exc
        columns = {
            name
            for (name,) in self._rows(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass('lineage_events')"
                " AND attnum > 0 AND NOT attisdropped"
            )
        }
        if not columns:
            self.conn.close()
            raise NotMarquez("it has no lineage_events table: not a Marquez database")
        if not {"event", "created_at"} <= columns:
            self.conn.close()
            raise NotMarquez(
                "its lineage_events has no created_at column (added by Marquez's migration"
                " V54): upgrade Marquez first"
            )

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement, its own short transaction (autocommit); a failure, the
        connection lost among them, as one line."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"reading the Marquez database failed: {_one_line(exc)}"
            ) from exc

    def count(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM lineage_events")[0][0])

    def count_after(self, after: Position | None) -> int:
        """How many rows come after ``after`` (all of them when None)."""
        if after is None:
            return self.count()
        if after.created_at is None:
            sql = (
                "SELECT COUNT(*) FROM lineage_events WHERE created_at IS NOT NULL OR ctid > %s::tid"
            )
            args: tuple[Any, ...] = (after.ctid,)
        else:
            sql = (
                "SELECT COUNT(*) FROM lineage_events WHERE created_at IS NOT NULL"
                " AND (created_at, ctid) > (%s, %s::tid)"
            )
            args = (after.created_at, after.ctid)
        return int(self._rows(sql, args)[0][0])

    def page(self, after: Position | None, limit: int) -> list[MarquezRow]:
        """Up to ``limit`` rows after ``after``, in the module's order."""
        rows: list[MarquezRow] = []
        if after is None or after.created_at is None:
            sql = (
                f"SELECT {_COLUMNS} FROM lineage_events WHERE created_at IS NULL"
                + (" AND ctid > %s::tid" if after is not None else "")
                + " ORDER BY ctid LIMIT %s"
            )
            args: tuple[Any, ...] = (after.ctid, limit) if after is not None else (limit,)
            rows = [MarquezRow._make(r) for r in self._rows(sql, args)]
            if len(rows) == limit:
                return rows
            after = None  # the undated rows are done: the dated ones from their start
        sql = f"SELECT {_COLUMNS} FROM lineage_events WHERE created_at IS NOT NULL"
        args = ()
        if after is not None:
            sql += " AND (created_at, ctid) > (%s, %s::tid)"
            args = (after.created_at, after.ctid)
        sql += " ORDER BY created_at, ctid LIMIT %s"
        rows += [MarquezRow._make(r) for r in self._rows(sql, (*args, limit - len(rows)))]
        return rows

    def pages(self, after: Position | None, limit: int) -> Iterator[list[MarquezRow]]:
        while True:
            rows = self.page(after, limit)
            if not rows:
                return
            yield rows
            last = rows[-1]
            after = Position(last.created_at, last.ctid)

    def close(self) -> None:
        self.conn.close()
