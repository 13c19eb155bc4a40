"""Window math: explicit instants, named zones, midnight wrap and DST days."""

from __future__ import annotations

import datetime as dt

import pytest
import pytz

from restarter.schedule import (
    DailyWindow,
    ScheduleError,
    is_due,
    next_restart,
    parse_hhmm,
    parse_length,
    parse_zone,
)

UTC = pytz.UTC
HOUR = dt.timedelta(hours=1)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


def window(hhmm: str, zone: str = "UTC", length: dt.timedelta = HOUR) -> DailyWindow:
    return DailyWindow.parse(hhmm, length, pytz.timezone(zone))


@pytest.mark.parametrize(
    ("hhmm", "now", "is_open"),
    [
        ("03.00", "2026-12-02T02:59:59+00:00", False),  # before
        ("03.00", "2026-12-02T03:00:00+00:00", True),  # at the start
        ("03.00", "2026-12-02T03:30:00+00:00", True),  # inside
        ("03.00", "2026-12-02T04:00:00+00:00", False),  # the end is exclusive
        ("03.00", "2026-12-02T12:00:00+00:00", False),  # after: never at noon
        ("23.30", "2026-12-02T23:45:00+00:00", True),  # before midnight
        ("23.30", "2026-12-03T00:15:00+00:00", True),  # wraps past midnight
        ("23.30", "2026-12-03T00:30:00+00:00", False),
        ("23.30", "2026-12-03T00:31:00+00:00", False),
    ],
)
def test_window_is_open_exactly_between_start_and_end(hhmm: str, now: str, is_open: bool) -> None:
    assert (window(hhmm).occurrence_at(at(now)) is not None) is is_open


def test_a_two_minute_window_at_23_59_is_open_at_midnight() -> None:
    assert window("23.59", length=dt.timedelta(minutes=2)).occurrence_at(
        at("2026-12-03T00:00:30+00:00")
    )


def test_window_is_read_in_its_zone() -> None:
    warsaw = window("03.00", "Europe/Warsaw")
    assert warsaw.occurrence_at(at("2026-12-02T02:30:00+00:00"))  # 03:30 CET
    assert not warsaw.occurrence_at(at("2026-12-02T03:30:00+00:00"))  # 04:30 CET


@pytest.mark.parametrize(
    ("last_restart", "due"),
    [
        (None, True),
        ("2026-12-01T03:10:00+00:00", True),  # yesterday's occurrence
        ("2026-12-02T02:59:00+00:00", True),  # just before this occurrence
        ("2026-12-02T03:05:00+00:00", False),  # already restarted in this occurrence
    ],
)
def test_due_once_per_occurrence(last_restart: str | None, due: bool) -> None:
    last = at(last_restart) if last_restart else None
    assert is_due(window("03.00"), at("2026-12-02T03:20:00+00:00"), last) is due


def test_not_due_when_the_whole_window_was_missed() -> None:
    assert not is_due(window("03.00"), at("2026-12-02T12:00:00+00:00"), None)


@pytest.mark.parametrize(
    ("zone", "hhmm", "day", "expected_utc"),
    [
        # Spring forward: 02:30 does not exist; the first instant after the gap is 03:00 CEST.
        ("Europe/Warsaw", "02.30", "2026-03-29", "2026-03-29T01:00:00"),
        ("Europe/Warsaw", "02.30", "2027-03-28", "2027-03-28T01:00:00"),
        # Fall back: 02:30 happens twice; the first is CEST (UTC+2).
        ("Europe/Warsaw", "02.30", "2026-10-25", "2026-10-25T00:30:00"),
        ("Europe/Warsaw", "02.30", "2027-10-31", "2027-10-31T00:30:00"),
        ("America/New_York", "02.30", "2026-03-08", "2026-03-08T07:00:00"),
        ("America/New_York", "01.30", "2026-11-01", "2026-11-01T05:30:00"),
        # Lord Howe moves 30 minutes: 02:00 → 02:30 local (UTC+10:30 → UTC+11).
        ("Australia/Lord_Howe", "02.15", "2026-10-04", "2026-10-03T15:30:00"),
        ("Asia/Kolkata", "03.00", "2026-06-01", "2026-05-31T21:30:00"),
        ("Europe/Warsaw", "03.00", "2026-03-29", "2026-03-29T01:00:00"),
    ],
)
def test_dst_start_rules(zone: str, hhmm: str, day: str, expected_utc: str) -> None:
    start = window(hhmm, zone).start_on(dt.date.fromisoformat(day))
    assert start == UTC.localize(dt.datetime.fromisoformat(expected_utc))


def test_next_start_is_the_open_occurrence_or_the_next_one() -> None:
    daily = window("03.00")
    assert daily.next_start(at("2026-12-02T03:20:00+00:00")) == at("2026-12-02T03:00:00+00:00")
    assert daily.next_start(at("2026-12-02T04:20:00+00:00")) == at("2026-12-03T03:00:00+00:00")
    assert daily.next_start(at("2026-12-02T01:00:00+00:00")) == at("2026-12-02T03:00:00+00:00")


@pytest.mark.parametrize("text", ["25.00", "3.5", "abc", "", "24.00", "12.60", "3:00", "03.0"])
def test_bad_hhmm_is_refused(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"HH\.MM"):
        parse_hhmm(text)


@pytest.mark.parametrize(("text", "parsed"), [("00.00", (0, 0)), ("23.59", (23, 59))])
def test_good_hhmm_is_parsed(text: str, parsed: tuple[int, int]) -> None:
    assert parse_hhmm(text) == parsed


@pytest.mark.parametrize(
    ("text", "minutes"), [("1h", 60), ("90m", 90), ("1h30m", 90), ("24h", 1440)]
)
def test_lengths_are_parsed(text: str, minutes: int) -> None:
    assert parse_length(text) == dt.timedelta(minutes=minutes)


@pytest.mark.parametrize("text", ["", "0m", "25h", "2h30", "abc", "-1h"])
def test_bad_lengths_are_refused(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_length(text)


def test_unknown_zone_is_refused() -> None:
    with pytest.raises(ScheduleError, match="Mars/Base"):
        parse_zone("Mars/Base")


@pytest.mark.parametrize(
    ("now", "last_restart", "expected"),
    [
        ("2026-12-02T01:00:00+00:00", None, "2026-12-02T03:00:00+00:00"),  # before the window
        ("2026-12-02T03:20:00+00:00", None, "2026-12-02T03:00:00+00:00"),  # open: now
        # Already restarted in this occurrence: tomorrow's window.
        ("2026-12-02T03:20:00+00:00", "2026-12-02T03:05:00+00:00", "2026-12-03T03:00:00+00:00"),
        ("2026-12-02T03:20:00+00:00", "2026-12-01T03:05:00+00:00", "2026-12-02T03:00:00+00:00"),
    ],
)
def test_next_restart_accounts_for_a_restart_in_the_open_occurrence(
    now: str, last_restart: str | None, expected: str
) -> None:
    last = at(last_restart) if last_restart else None
    assert next_restart(window("03.00"), at(now), last) == at(expected)
