"""Marquez's stats (``GET /api/v1/stats/{lineage-events,jobs,datasets,sources}?period=
DAY|WEEK&timezone=``, its StatsResource and StatsDao; docs/marquez.md#stats), the
charts on marquez-web's home page.

- ``period=DAY``: 24 hourly intervals, from the hour 23 hours before now to the current
  one; ``WEEK``: 7 daily intervals, today and the 6 days before, days starting at
  midnight in ``timezone`` (an IANA name; required for lineage-events, as Marquez).
- ``lineage-events``: per interval, the events whose eventTime falls in it, by type
  (``fail``, ``start``, ``complete``, ``abort``).
- ``jobs``, ``datasets``, ``sources``: per interval, how many there were by its end
  (cumulative): every job, every dataset identity the namespaces list, every source
  ``/api/v1/sources`` lists, so the last interval's count is the lists' total, as
  Marquez counts its rows. Each is counted from when it was first seen (Marquez counts
  rows by their creation time; Embrasure's graph holds eventTimes): a job's first
  edge, run or JobEvent, a dataset's first edge or facet value
  (GraphReader.first_seen_keys), a source's first namespace; one whose time is not
  known (an eventTime that could not be read) is counted in every interval.
"""

from __future__ import annotations

import bisect
import datetime
import zoneinfo
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute

from embrasure.marquez.http import not_found, route
from embrasure.marquez.model import enum_param, instant
from embrasure.marquez.sources import sources
from embrasure.store import Store
from embrasure.store.base import GraphReader
from embrasure.web.auth import requires
from embrasure.web.responses import answer

Interval = tuple[datetime.datetime, datetime.datetime]


def key_of(moment: datetime.datetime) -> str:
    """A UTC datetime as the stored eventTime key (projector/times.py)."""
    utc = moment.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond:06d}000Z"


def intervals(period: str, zone: datetime.tzinfo, now: datetime.datetime) -> list[Interval]:
    if period == "DAY":
        hour = now.astimezone(datetime.UTC).replace(minute=0, second=0, microsecond=0)
        starts = [hour - datetime.timedelta(hours=23 - i) for i in range(24)]
        return [(s, s + datetime.timedelta(hours=1)) for s in starts]
    today = now.astimezone(zone).date()
    days = [today - datetime.timedelta(days=6 - i) for i in range(7)]
    midnight = datetime.time(tzinfo=zone)
    return [
        (
            datetime.datetime.combine(d, midnight),
            datetime.datetime.combine(d + datetime.timedelta(days=1), midnight),
        )
        for d in days
    ]


def lineage_events(reader: GraphReader, spans: list[Interval]) -> list[dict[str, Any]]:
    out = []
    for start, end in spans:
        counts = {
            c.event_type: c.events for c in reader.event_type_counts(key_of(start), key_of(end))
        }
        out.append(
            {
                "startInterval": instant(key_of(start)),
                "endInterval": instant(key_of(end)),
                "fail": counts.get("FAIL", 0),
                "start": counts.get("START", 0),
                "complete": counts.get("COMPLETE", 0),
                "abort": counts.get("ABORT", 0),
            }
        )
    return out


def cumulative(first_seen: list[str], spans: list[Interval]) -> list[dict[str, Any]]:
    keys = sorted(first_seen)
    return [
        {
            "startInterval": instant(key_of(start)),
            "endInterval": instant(key_of(end)),
            "count": bisect.bisect_left(keys, key_of(end)),
        }
        for start, end in spans
    ]


def _sources_first_seen(reader: GraphReader) -> list[str]:
    return [s.first_key or "" for s in sources(reader)]


KINDS: dict[str, Callable[[GraphReader, list[Interval]], list[dict[str, Any]]]] = {
    "lineage-events": lineage_events,
    "jobs": lambda r, spans: cumulative(r.first_seen_keys("job"), spans),
    "datasets": lambda r, spans: cumulative(r.first_seen_keys("dataset"), spans),
    "sources": lambda r, spans: cumulative(_sources_first_seen(r), spans),
}


class StatsRoutes:
    def __init__(self, store: Store, now: Callable[[], datetime.datetime]) -> None:
        self.store = store
        self.now = now

    async def stats(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind not in KINDS:
            raise not_found("HTTP 404 Not Found")
        period = enum_param(request.query_params.get("period") or "")
        timezone = request.query_params.get("timezone") or ""
        # Marquez answers these two 400s with a plain-text body.
        if period not in ("DAY", "WEEK"):
            return PlainTextResponse("Invalid period", 400)
        if period == "WEEK" and kind == "lineage-events" and not timezone:
            return PlainTextResponse("Timezone must be specified for period 'WEEK'", 400)
        try:
            zone = zoneinfo.ZoneInfo(timezone) if timezone else datetime.UTC
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return PlainTextResponse(f"Unknown timezone: {timezone}", 400)
        spans = intervals(period, zone, self.now())

        def work(reader: GraphReader) -> Any:
            return KINDS[kind](reader, spans)

        return await answer(self.store, work)


def routes(
    store: Store, now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
) -> list[BaseRoute]:
    api = StatsRoutes(store, now)
    read = requires("read", everywhere=True)  # counts over every namespace
    return [route("/stats/{kind}", read(api.stats))]
