"""eventTime parsing: RFC 3339 / ISO 8601 to a sortable UTC key
(docs/projection.md#validation, docs/queries.md#the-graph-served)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embrasure.model import EventTime
from embrasure.projector import times
from embrasure.projector.times import parse_event_time
from embrasure.query.entities import seconds_between


def _ok(value: str) -> EventTime:
    time, warning = parse_event_time(value)
    assert warning is None, warning
    assert time is not None
    return time


@pytest.mark.parametrize(
    ("value", "key", "text"),
    [
        ("2026-11-30T09:00:00Z", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        ("2026-11-30T09:00:00.1Z", "2026-11-30T09:00:00.100000000Z", "2026-11-30T09:00:00.1Z"),
        ("2026-11-30T09:00:00.120Z", "2026-11-30T09:00:00.120000000Z", "2026-11-30T09:00:00.120Z"),
        (
            "2026-11-30T09:00:00.123456Z",
            "2026-11-30T09:00:00.123456000Z",
            "2026-11-30T09:00:00.123456Z",
        ),
        (
            "2026-11-30T09:00:00.123456789Z",
            "2026-11-30T09:00:00.123456789Z",
            "2026-11-30T09:00:00.123456789Z",
        ),
        (
            "2026-11-30T09:00:00.000000001Z",
            "2026-11-30T09:00:00.000000001Z",
            "2026-11-30T09:00:00.000000001Z",
        ),
        # offsets: RFC 3339 ±HH:MM, ISO 8601 basic ±HHMM and ±HH, "-00:00" (RFC 3339 §4.3)
        ("2026-11-30T14:30:00+05:30", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        ("2026-11-30T01:00:00-0800", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        ("2026-11-30T11:00:00+02", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        ("2026-11-30T09:00:00-00:00", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        ("2026-11-30T09:00:00+00:00", "2026-11-30T09:00:00.000000000Z", "2026-11-30T09:00:00Z"),
        # lowercase t/z and a space (RFC 3339 §5.6 NOTE), comma decimal sign (ISO 8601)
        ("2026-11-30t09:00:00.5z", "2026-11-30T09:00:00.500000000Z", "2026-11-30T09:00:00.5Z"),
        ("2026-11-30 09:00:00,25Z", "2026-11-30T09:00:00.250000000Z", "2026-11-30T09:00:00.25Z"),
        # an offset moves the date: day, month, year, both ways
        ("2026-11-30T23:30:00-01:00", "2026-12-01T00:30:00.000000000Z", "2026-12-01T00:30:00Z"),
        ("2026-12-31T23:30:00.5-01:00", "2027-01-01T00:30:00.500000000Z", "2027-01-01T00:30:00.5Z"),
        ("2027-01-01T00:30:00+01:00", "2026-12-31T23:30:00.000000000Z", "2026-12-31T23:30:00Z"),
        ("2026-03-01T00:00:00+00:01", "2026-02-28T23:59:00.000000000Z", "2026-02-28T23:59:00Z"),
        # leap years: 2024 yes, 2000 yes (÷400), 2100 no (÷100)
        ("2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00.000000000Z", "2024-02-29T23:30:00Z"),
        ("2024-02-29T12:00:00Z", "2024-02-29T12:00:00.000000000Z", "2024-02-29T12:00:00Z"),
        ("2000-02-29T12:00:00Z", "2000-02-29T12:00:00.000000000Z", "2000-02-29T12:00:00Z"),
        ("2100-03-01T00:30:00+01:00", "2100-02-28T23:30:00.000000000Z", "2100-02-28T23:30:00Z"),
        ("2024-02-29T23:30:00-01:00", "2024-03-01T00:30:00.000000000Z", "2024-03-01T00:30:00Z"),
        # the ends of the calendar
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000000Z", "0001-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999999Z", None),
        ("0999-06-01T00:00:00-23:59", "0999-06-01T23:59:00.000000000Z", "0999-06-01T23:59:00Z"),
    ],
)
def test_valid_times(value: str, key: str, text: str | None) -> None:
    time = _ok(value)
    assert time.key == key
    assert time.text == (text if text is not None else value)
    assert len(time.key) == 30


def test_missing_or_null_time_is_unknown() -> None:
    assert parse_event_time(None) == (None, None)


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("2021-11-03T10:53:52.427343", "2021-11-03T10:53:52.427343000Z"),
        ("2020-12-28T19:51:01", "2020-12-28T19:51:01.000000000Z"),
    ],
)
def test_no_timezone_reads_as_utc_with_a_warning(value: str, key: str) -> None:
    time, warning = parse_event_time(value)
    assert time is not None and time.key == key
    assert warning == f"eventTime {value!r} has no timezone; read as UTC"


def test_more_than_nine_fraction_digits_are_cut_with_a_warning() -> None:
    time, warning = parse_event_time("2026-01-01T00:00:00.1234567899Z")
    assert time == EventTime("2026-01-01T00:00:00.123456789Z", "2026-01-01T00:00:00.123456789Z")
    assert warning is not None and "cut to nanoseconds" in warning


def test_two_warnings_join() -> None:
    _, warning = parse_event_time("2026-01-01T00:00:00.1234567899")
    assert warning is not None and "no timezone" in warning and "nanoseconds" in warning


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (1700000000, "eventTime is a number, not a string"),
        (1.5, "eventTime is a number, not a string"),
        (True, "eventTime is a boolean, not a string"),
        ([], "eventTime is an array, not a string"),
        ({}, "eventTime is an object, not a string"),
        ("", "is not an ISO-8601 date and time"),
        ("yesterday", "is not an ISO-8601 date and time"),
        ("2026-11-30", "is not an ISO-8601 date and time"),
        ("09:00:00Z", "is not an ISO-8601 date and time"),
        ("2026-11-30T09:00Z", "is not an ISO-8601 date and time"),
        ("2026-1-30T09:00:00Z", "is not an ISO-8601 date and time"),
        ("2026-11-30T09:00:00.Z", "is not an ISO-8601 date and time"),
        ("2026-11-30T09:00:00Z ", "is not an ISO-8601 date and time"),
        ("2026-11-30T09:00:00+5:00", "is not an ISO-8601 date and time"),
        ("2026-11-30T09:00:00 UTC", "is not an ISO-8601 date and time"),
        (
            "\uff12\uff10\uff12\uff16-11-30T09:00:00Z",
            "is not an ISO-8601 date",
        ),  # full-width digits
        ("2026-02-30T00:00:00Z", "is not a valid date and time (day is out of range"),
        ("2023-02-29T00:00:00Z", "is not a valid date and time (day is out of range"),
        ("2100-02-29T00:00:00Z", "is not a valid date and time (day is out of range"),
        ("2026-04-31T00:00:00Z", "is not a valid date and time (day is out of range"),
        ("2026-13-01T00:00:00Z", "is not a valid date and time (month must be in 1..12"),
        ("2026-00-01T00:00:00Z", "is not a valid date and time (month must be in 1..12"),
        ("0000-01-01T00:00:00Z", "is not a valid date and time (year 0 is out of range"),
        ("2026-11-30T24:00:00Z", "is not a valid date and time (hour must be in 0..23"),
        ("2026-11-30T09:60:00Z", "is not a valid date and time (minute must be in 0..59"),
        ("2026-11-30T09:00:61Z", "is not a valid date and time (second must be in 0..59"),
        ("2016-12-31T23:59:60Z", "is a leap second (:60), which is not supported"),
        ("2026-11-30T09:00:00+24:00", "has a UTC offset beyond ±23:59"),
        ("2026-11-30T09:00:00+05:60", "has a UTC offset beyond ±23:59"),
        ("0001-01-01T00:30:00+01:00", "falls outside years 1 to 9999 in UTC"),
        ("9999-12-31T23:30:00-01:00", "falls outside years 1 to 9999 in UTC"),
    ],
)
def test_unparseable_times_raise_with_a_reason(value: Any, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_event_time(value)
    assert reason in str(caught.value)


def test_a_long_bad_value_is_cut_in_the_reason() -> None:
    with pytest.raises(ValueError) as caught:
        parse_event_time("x" * 10_000)
    assert len(str(caught.value)) < 200


# -- properties --------------------------------------------------------------------------------

_instants = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9998, 12, 30), timezones=st.just(UTC)
)
_offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59)
_fractions = st.text(alphabet="0123456789", max_size=9)


def _spell(instant: datetime, offset_minutes: int, fraction: str) -> str:
    local = instant.astimezone(timezone(timedelta(minutes=offset_minutes)))
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    dot = f".{fraction}" if fraction else ""
    return f"{local:%Y-%m-%dT%H:%M:%S}{dot}{sign}{hours:02d}:{minutes:02d}"


@given(_instants, _offsets, _fractions)
def test_any_offset_gives_the_same_utc_instant(
    instant: datetime, offset_minutes: int, fraction: str
) -> None:
    time = _ok(_spell(instant, offset_minutes, fraction))
    assert time.key == f"{instant:%Y-%m-%dT%H:%M:%S}.{fraction.ljust(9, '0')}Z"
    assert time.text == f"{instant:%Y-%m-%dT%H:%M:%S}" + (f".{fraction}" if fraction else "") + "Z"
    assert _ok(time.text) == time  # the shown text reads back as the same time


@given(
    st.tuples(_instants, _offsets, _fractions),
    st.tuples(_instants, _offsets, _fractions),
)
def test_keys_sort_as_the_instants_do(
    a: tuple[datetime, int, str], b: tuple[datetime, int, str]
) -> None:
    def instant(t: tuple[datetime, int, str]) -> tuple[datetime, int]:
        return t[0].replace(microsecond=0), int(t[2].ljust(9, "0"))

    ka, kb = _ok(_spell(*a)).key, _ok(_spell(*b)).key
    assert (ka < kb) == (instant(a) < instant(b))
    assert (ka == kb) == (instant(a) == instant(b))


def test_run_duration_is_exact_across_fraction_digits() -> None:
    start, _ = parse_event_time("2026-11-30T23:59:59.999999999Z")
    end, _ = parse_event_time("2026-12-01T00:00:00.5+00:00")
    assert start is not None and end is not None
    assert seconds_between(start.key, end.key) == 0.500000001
    assert seconds_between(start.key, None) is None


_digits = st.text("0123456789", min_size=1, max_size=11)


@settings(max_examples=500)
@given(
    st.tuples(
        st.integers(0, 9999),
        st.integers(0, 13),
        st.integers(0, 32),
        st.integers(0, 25),
        st.integers(0, 61),
        st.integers(0, 61),
        st.none() | _digits,
    )
)
def test_the_plain_utc_form_is_read_as_the_general_rule_reads_it(
    parts: tuple[int, int, int, int, int, int, str | None],
) -> None:
    year, month, day, hour, minute, second, fraction = parts
    value = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    value += ("" if fraction is None else "." + fraction) + "Z"
    fast = times._plain_utc(value)
    try:
        general = times.parse_general(value)
    except ValueError:
        assert fast is None  # the general rule says what is wrong
        return
    if fast is not None:
        assert (fast, None) == general
