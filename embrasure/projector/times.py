"""eventTime parsing (docs/projection.md#validation).

OpenLineage 2-0-2 types ``eventTime`` as a JSON Schema ``date-time``, i.e. an RFC 3339
§5.6 timestamp. Producers stray from it in known ways, and a lineage server has to read
what they send:

- no timezone (openlineage-python's serde examples, Marquez's
  ``event_required_no_timezone.json``): read as UTC, with a warning (docs/projection.md#validation);
- nanoseconds (Java's ``Instant`` prints up to 9 fraction digits; Marquez's
  ``event_required_nanoseconds.json``): kept exactly, never rounded through a float;
- ``±HHMM`` and ``±HH`` offsets (ISO 8601 basic format) and ``,`` as the decimal sign
  (ISO 8601 §4.2.2.4): accepted, as are a lowercase ``t``/``z`` and a space between date
  and time (RFC 3339 §5.6 allows both).

More than 9 fraction digits are cut to nanoseconds with a warning (no producer sends
them; the sort key has room for 9). Everything else — a date that does not exist
(2026-02-30), an hour 24, a leap second (``:60``: Python's calendar has none, and
RFC 3339's leap seconds need a table we do not carry), an offset beyond ±23:59, a
result outside years 1-9999 — raises ValueError naming what is wrong.

The result is an ``EventTime``: ``key`` is the UTC instant in a fixed-width form that sorts
as text (always 9 fraction digits), ``text`` is RFC 3339 UTC keeping the source's sub-second
digits (docs/queries.md#the-graph-served: "times are returned … keeping the source's
sub-second precision"), without a fraction when none was sent.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from embrasure.model import EventTime
from embrasure.receiver.jsonguard import json_type

MAX_FRACTION_DIGITS = 9  # nanoseconds: the finest any OpenLineage client emits

_TIMESTAMP = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"[Tt ]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"
    r"(?:[.,](?P<fraction>\d+))?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?",
    re.ASCII,
)


def _offset(zone: str) -> timedelta | None:
    """``Z`` or ``±HH[[:]MM]`` as a UTC offset (RFC 3339 §5.6 time-numoffset), None when
    out of range."""
    if zone in ("Z", "z"):
        return timedelta(0)
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or "0")
    if hours > 23 or minutes > 59:
        return None
    # "-00:00" means "UTC, local offset unknown" (RFC 3339 §4.3): the instant is the same.
    return sign * timedelta(hours=hours, minutes=minutes)


def parse_event_time(value: Any) -> tuple[EventTime | None, str | None]:
    """The event's time and a warning (or None).

    ``value`` is the event's ``eventTime`` as parsed from JSON: absent or null gives
    ``(None, None)``, an unknown time. Raises ValueError with the reason when the value
    cannot be read as a time.
    """
    if value is None:
        return None, None
    if not isinstance(value, str):
        raise ValueError(f"eventTime is {json_type(value)}, not a string")
    found = _plain_utc(value)
    if found is not None:
        return found, None
    return parse_general(value)


def parse_general(value: str) -> tuple[EventTime, str | None]:
    """``parse_event_time`` of a string by the general rule (whatever the form)."""
    shown = value if len(value) <= 64 else value[:61] + "..."
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        raise ValueError(
            f"eventTime {shown!r} is not an ISO-8601 date and time "
            "(expected e.g. 2026-11-30T09:00:00.123Z)"
        )
    warnings: list[str] = []
    fraction = match["fraction"] or ""
    if len(fraction) > MAX_FRACTION_DIGITS:
        fraction = fraction[:MAX_FRACTION_DIGITS]
        warnings.append(
            f"eventTime {shown!r} has more than {MAX_FRACTION_DIGITS} fraction digits; "
            "cut to nanoseconds"
        )
    zone = match["zone"]
    if zone is None:
        warnings.append(f"eventTime {shown!r} has no timezone; read as UTC")
        zone = "Z"
    if match["second"] == "60":
        raise ValueError(f"eventTime {shown!r} is a leap second (:60), which is not supported")
    if zone in ("Z", "z"):
        # Already UTC, the common case: only check that the date and time exist.
        try:
            year, month, day, hour, minute, second = (int(match[part]) for part in _FIELDS)
            datetime(year, month, day, hour, minute, second)
        except ValueError as exc:
            raise ValueError(f"eventTime {shown!r} is not a valid date and time ({exc})") from None
        base = "{}-{}-{}T{}:{}:{}".format(*(match[part] for part in _FIELDS))
        return _event_time(base, fraction), "; ".join(warnings) or None
    offset = _offset(zone)
    if offset is None:
        raise ValueError(f"eventTime {shown!r} has a UTC offset beyond ±23:59")
    try:
        local = datetime(
            int(match["year"]),
            int(match["month"]),
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            int(match["second"]),
            tzinfo=timezone(offset),
        )
    except ValueError as exc:
        raise ValueError(f"eventTime {shown!r} is not a valid date and time ({exc})") from None
    try:
        # The offset is whole minutes, so it never touches the fraction: only the
        # seconds-resolution part goes through the calendar (which handles day, month,
        # year and leap-year carries).
        utc = local.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"eventTime {shown!r} falls outside years 1 to 9999 in UTC") from None
    base = f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}"
    return _event_time(base, fraction), "; ".join(warnings) or None


_FIELDS = ("year", "month", "day", "hour", "minute", "second")

# What nearly every producer sends: RFC 3339 in UTC, ``Z``, up to 9 fraction digits. Read
# without the general pattern's groups and the calendar's datetime (6 µs an event on
# the projector's hot path): a date is checked once, then remembered.
_PLAIN_UTC = re.compile(
    r"(\d{4}-\d{2}-\d{2})T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(?:\.(\d{1,9}))?Z", re.ASCII
)
_DATES_REMEMBERED = 4096
_dates: set[str] = set()


def _plain_utc(value: str) -> EventTime | None:
    """``value`` read as the general rule reads it, when it is the plain form; None
    otherwise (the general rule then reads it, or says what is wrong)."""
    match = _PLAIN_UTC.fullmatch(value)
    if match is None:
        return None
    date, hour, minute, second, fraction = match.groups()
    if date not in _dates:
        try:
            datetime(int(date[:4]), int(date[5:7]), int(date[8:10]))
        except ValueError:
            return None
        if len(_dates) >= _DATES_REMEMBERED:
            _dates.clear()
        _dates.add(date)
    return _event_time(f"{date}T{hour}:{minute}:{second}", fraction or "")


def _event_time(base: str, fraction: str) -> EventTime:
    """From ``YYYY-MM-DDTHH:MM:SS`` in UTC and the fraction digits as sent."""
    key = f"{base}.{fraction.ljust(MAX_FRACTION_DIGITS, '0')}Z"
    text = f"{base}.{fraction}Z" if fraction else f"{base}Z"
    return EventTime(key=key, text=text)
