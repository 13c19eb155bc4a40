"""Window math: explicit instants in named zones, midnight wrap, DST days, parsing.

Every expected DST instant below was checked independently against the zone rules with
the standard library's ``zoneinfo`` (a minute-by-minute scan for the first UTC instant
whose local wall-clock time is at or after HH.MM), not derived from the code under test.
"""

from __future__ import annotations

import datetime as dt

import pytest
import pytz

from restarter.model.windows import (
    DailyWindow,
    ScheduleError,
    earliest,
    is_due,
    next_restart,
    parse_hhmm,
    parse_length,
    parse_zone,
)

UTC = pytz.UTC
HOUR = dt.timedelta(hours=1)
WARSAW = pytz.timezone("Europe/Warsaw")
NEW_YORK = pytz.timezone("America/New_York")
LORD_HOWE = pytz.timezone("Australia/Lord_Howe")
KOLKATA = pytz.timezone("Asia/Kolkata")


def utc(text: str) -> dt.datetime:
    """An aware UTC instant from ``YYYY-MM-DDTHH:MM[:SS]`` (read as UTC)."""
    return UTC.localize(dt.datetime.fromisoformat(text))


def hour_minute(window: DailyWindow) -> str:
    """The window's opening time as its label writes it (``HH.MM``)."""
    return f"{window.hour:02d}.{window.minute:02d}"


def window(hhmm: str, zone: str = "UTC", length: dt.timedelta = HOUR) -> DailyWindow:
    return DailyWindow.parse(hhmm, length, pytz.timezone(zone))


def is_open(daily: DailyWindow, now: dt.datetime) -> bool:
    return daily.occurrence_at(now) is not None


# --- open or closed -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hhmm", "now", "expected"),
    [
        pytest.param("03.00", "2026-12-02T02:59:59", False, id="one-second-before"),
        pytest.param("03.00", "2026-12-02T03:00:00", True, id="at-the-start"),
        pytest.param("03.00", "2026-12-02T03:30:00", True, id="inside"),
        pytest.param("03.00", "2026-12-02T03:59:59", True, id="last-second"),
        pytest.param("03.00", "2026-12-02T04:00:00", False, id="at-the-end-which-is-exclusive"),
        pytest.param("03.00", "2026-12-02T04:00:01", False, id="after"),
        pytest.param("03.00", "2026-12-02T12:00:00", False, id="at-noon"),
        pytest.param("23.30", "2026-12-02T23:29:59", False, id="wrap-before"),
        pytest.param("23.30", "2026-12-02T23:45:00", True, id="wrap-before-midnight"),
        pytest.param("23.30", "2026-12-03T00:00:00", True, id="wrap-at-midnight"),
        pytest.param("23.30", "2026-12-03T00:15:00", True, id="wrap-after-midnight"),
        pytest.param("23.30", "2026-12-03T00:30:00", False, id="wrap-at-the-end"),
        pytest.param("23.30", "2026-12-03T00:31:00", False, id="wrap-after-the-end"),
        pytest.param("00.00", "2026-12-02T00:00:00", True, id="midnight-window-at-midnight"),
        pytest.param("00.00", "2026-12-01T23:59:59", False, id="midnight-window-just-before"),
    ],
)
def test_window_is_open_from_its_start_until_just_before_its_end(
    hhmm: str, now: str, expected: bool
) -> None:
    assert is_open(window(hhmm), utc(now)) is expected


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param("2026-12-02T23:58:59", False, id="before"),
        pytest.param("2026-12-02T23:59:00", True, id="at-the-start"),
        pytest.param("2026-12-03T00:00:00", True, id="at-midnight"),
        pytest.param("2026-12-03T00:00:59", True, id="last-second"),
        pytest.param("2026-12-03T00:01:00", False, id="at-the-end"),
    ],
)
def test_a_two_minute_window_at_23_59_is_open_across_midnight(now: str, expected: bool) -> None:
    assert is_open(window("23.59", length=dt.timedelta(minutes=2)), utc(now)) is expected


def test_the_open_occurrence_spans_the_window_length() -> None:
    occurrence = window("23.30").occurrence_at(utc("2026-12-03T00:15:00"))
    assert occurrence is not None
    assert (occurrence.start, occurrence.end) == (
        utc("2026-12-02T23:30:00"),
        utc("2026-12-03T00:30:00"),
    )


@pytest.mark.parametrize(
    ("zone", "now", "expected"),
    [
        # Winter: Warsaw is UTC+1, so 03.00 local is 02:00 UTC.
        pytest.param("Europe/Warsaw", "2026-12-02T01:59:59", False, id="warsaw-before"),
        pytest.param("Europe/Warsaw", "2026-12-02T02:00:00", True, id="warsaw-start"),
        pytest.param("Europe/Warsaw", "2026-12-02T02:30:00", True, id="warsaw-inside"),
        pytest.param("Europe/Warsaw", "2026-12-02T03:00:00", False, id="warsaw-end"),
        pytest.param("Europe/Warsaw", "2026-12-02T03:30:00", False, id="warsaw-0430-local"),
        # Kolkata is UTC+5:30 all year, so 03.00 local is 21:30 UTC the day before.
        pytest.param("Asia/Kolkata", "2026-06-01T21:29:59", False, id="kolkata-before"),
        pytest.param("Asia/Kolkata", "2026-06-01T21:30:00", True, id="kolkata-start"),
        pytest.param("Asia/Kolkata", "2026-06-01T22:30:00", False, id="kolkata-end"),
    ],
)
def test_a_window_is_read_in_its_own_zone(zone: str, now: str, expected: bool) -> None:
    assert is_open(window("03.00", zone), utc(now)) is expected


# --- due --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hhmm", "now", "last_restart", "expected"),
    [
        pytest.param("03.00", "2026-12-02T03:20:00", None, True, id="never-restarted"),
        pytest.param("03.00", "2026-12-02T03:20:00", "2026-12-01T03:10:00", True, id="yesterday"),
        pytest.param(
            "03.00", "2026-12-02T03:20:00", "2026-12-02T02:59:59", True, id="before-the-start"
        ),
        pytest.param("03.00", "2026-12-02T03:20:00", "2026-12-02T03:00:00", False, id="at-start"),
        pytest.param(
            "03.00", "2026-12-02T03:20:00", "2026-12-02T03:05:00", False, id="this-occurrence"
        ),
        pytest.param("03.00", "2026-12-02T02:59:00", None, False, id="before-the-window"),
        pytest.param("03.00", "2026-12-02T04:00:00", None, False, id="at-the-end"),
        pytest.param(
            "23.30", "2026-12-03T00:15:00", "2026-12-02T23:40:00", False, id="wrapped-same"
        ),
        pytest.param(
            "23.30", "2026-12-03T00:15:00", "2026-12-01T23:40:00", True, id="wrapped-yesterday"
        ),
    ],
)
def test_is_due_once_per_open_occurrence(
    hhmm: str, now: str, last_restart: str | None, expected: bool
) -> None:
    last = utc(last_restart) if last_restart else None
    assert is_due(window(hhmm), utc(now), last) is expected


@pytest.mark.parametrize("last_restart", [None, "2026-12-01T03:10:00"], ids=["never", "yesterday"])
def test_a_window_missed_while_the_operator_was_down_is_not_due_at_noon(
    last_restart: str | None,
) -> None:
    last = utc(last_restart) if last_restart else None
    assert not is_due(window("03.00"), utc("2026-12-02T12:00:00"), last)


# --- DST --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "hhmm", "day", "expected_utc"),
    [
        # Spring forward 02:00 CET → 03:00 CEST: 02:30 does not exist; the first instant
        # after the gap is 03:00 CEST = 01:00 UTC.
        pytest.param("Europe/Warsaw", "02.30", "2026-03-29", "2026-03-29T01:00", id="waw-gap"),
        pytest.param("Europe/Warsaw", "02.00", "2026-03-29", "2026-03-29T01:00", id="waw-gap-2"),
        pytest.param("Europe/Warsaw", "03.00", "2026-03-29", "2026-03-29T01:00", id="waw-after"),
        pytest.param("Europe/Warsaw", "01.30", "2026-03-29", "2026-03-29T00:30", id="waw-pre"),
        pytest.param("Europe/Warsaw", "02.30", "2027-03-28", "2027-03-28T01:00", id="waw-2027"),
        # Fall back 03:00 CEST → 02:00 CET: 02:30 happens twice; the first is CEST (UTC+2).
        pytest.param("Europe/Warsaw", "02.30", "2026-10-25", "2026-10-25T00:30", id="waw-fold"),
        pytest.param("Europe/Warsaw", "02.30", "2027-10-31", "2027-10-31T00:30", id="waw-f-27"),
        # Spring forward 02:00 EST → 03:00 EDT: the first instant after is 03:00 EDT.
        pytest.param("America/New_York", "02.30", "2026-03-08", "2026-03-08T07:00", id="nyc-gap"),
        # Fall back 02:00 EDT → 01:00 EST: the first 01:30 is EDT (UTC-4).
        pytest.param("America/New_York", "01.30", "2026-11-01", "2026-11-01T05:30", id="nyc-fold"),
        # Lord Howe springs forward by 30 minutes, 02:00 LHST (UTC+10:30) → 02:30 LHDT
        # (UTC+11): 02:15 does not exist; the first instant after is 02:30 LHDT, which is
        # 15:30 UTC on the previous UTC day.
        pytest.param(
            "Australia/Lord_Howe", "02.15", "2026-10-04", "2026-10-03T15:30", id="lhi-gap"
        ),
        # Lord Howe falls back 02:00 LHDT → 01:30 LHST: 01:45 happens twice; the first is
        # LHDT (UTC+11), 14:45 UTC on the previous UTC day.
        pytest.param(
            "Australia/Lord_Howe", "01.45", "2026-04-05", "2026-04-04T14:45", id="lhi-fold"
        ),
        pytest.param("Asia/Kolkata", "03.00", "2026-06-01", "2026-05-31T21:30", id="kolkata"),
    ],
)
def test_a_window_starts_at_the_first_instant_at_or_after_its_local_time(
    zone: str, hhmm: str, day: str, expected_utc: str
) -> None:
    assert window(hhmm, zone).start_on(dt.date.fromisoformat(day)) == utc(expected_utc)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param("2026-03-29T00:59:59", False, id="just-before-0300-cest"),
        pytest.param("2026-03-29T01:00:00", True, id="at-0300-cest"),
        pytest.param("2026-03-29T01:59:59", True, id="last-second"),
        pytest.param("2026-03-29T02:00:00", False, id="one-hour-later"),
    ],
)
def test_a_nonexistent_start_opens_after_the_gap_and_lasts_the_full_length(
    now: str, expected: bool
) -> None:
    assert is_open(window("02.30", "Europe/Warsaw"), utc(now)) is expected


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param("2026-10-25T00:29:59", False, id="before-first-0230"),
        pytest.param("2026-10-25T00:30:00", True, id="first-0230-cest"),
        pytest.param("2026-10-25T01:29:59", True, id="0229-cet-second-pass"),
        pytest.param("2026-10-25T01:30:00", False, id="second-0230-cet-is-no-new-window"),
        pytest.param("2026-10-25T02:00:00", False, id="0300-cet"),
    ],
)
def test_an_ambiguous_start_opens_once_at_its_first_occurrence(now: str, expected: bool) -> None:
    assert is_open(window("02.30", "Europe/Warsaw"), utc(now)) is expected


def test_the_window_length_is_elapsed_time_across_a_dst_gap() -> None:
    # 01.30 CET = 00:30 UTC; one hour later is 01:30 UTC = 03:30 CEST, not 02:30 local.
    daily = window("01.30", "Europe/Warsaw")
    assert is_open(daily, utc("2026-03-29T01:29:59"))
    assert not is_open(daily, utc("2026-03-29T01:30:00"))


# --- next start and earliest -------------------------------------------------------------


@pytest.mark.parametrize(
    ("hhmm", "now", "expected"),
    [
        pytest.param("03.00", "2026-12-02T01:00:00", "2026-12-02T03:00:00", id="later-today"),
        pytest.param("03.00", "2026-12-02T03:00:00", "2026-12-02T03:00:00", id="open-at-start"),
        pytest.param("03.00", "2026-12-02T03:20:00", "2026-12-02T03:00:00", id="open-inside"),
        pytest.param("03.00", "2026-12-02T04:00:00", "2026-12-03T03:00:00", id="at-the-end"),
        pytest.param("03.00", "2026-12-02T12:00:00", "2026-12-03T03:00:00", id="tomorrow"),
        pytest.param("23.30", "2026-12-03T00:15:00", "2026-12-02T23:30:00", id="open-wrapped"),
        pytest.param("23.30", "2026-12-03T00:30:00", "2026-12-03T23:30:00", id="after-wrap"),
    ],
)
def test_next_start_is_the_open_occurrence_start_or_the_next_future_start(
    hhmm: str, now: str, expected: str
) -> None:
    assert window(hhmm).next_start(utc(now)) == utc(expected)


@pytest.mark.parametrize(
    ("zone", "hhmm", "day"),
    [
        ("Europe/Warsaw", "02.30", "2026-03-29"),
        ("Europe/Warsaw", "02.30", "2026-10-25"),
        ("America/New_York", "02.30", "2026-03-08"),
        ("America/New_York", "01.30", "2026-11-01"),
        ("Australia/Lord_Howe", "02.15", "2026-10-04"),
        ("Australia/Lord_Howe", "01.45", "2026-04-05"),
        ("UTC", "23.59", "2026-12-02"),
        ("Asia/Kolkata", "00.00", "2026-06-01"),
    ],
)
def test_next_start_is_never_in_the_past_unless_open_and_skips_no_occurrence(
    zone: str, hhmm: str, day: str
) -> None:
    daily = window(hhmm, zone)
    local_day = dt.date.fromisoformat(day)
    starts = sorted(daily.start_on(local_day + dt.timedelta(days=d)) for d in range(-2, 4))
    sweep_from = starts[1] - dt.timedelta(hours=6)
    for step in range(48 * 4):  # every 15 minutes over two days around the DST day
        now = sweep_from + dt.timedelta(minutes=15 * step)
        found = daily.next_start(now)
        occurrence = daily.occurrence_at(now)
        if occurrence is not None:
            assert found == occurrence.start <= now < occurrence.end, now
        else:
            assert found == min(start for start in starts if start > now), now


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param("2026-12-02T01:00:00", "03.00", id="the-first-to-open"),
        pytest.param("2026-12-02T03:20:00", "03.00", id="an-open-one-opens-now"),
        pytest.param("2026-12-02T04:30:00", "05.00", id="a-closed-one-opens-tomorrow"),
        pytest.param("2026-12-02T06:00:00", "23.30", id="later-today-beats-tomorrow"),
        pytest.param("2026-12-03T00:15:00", "23.30", id="open-across-midnight"),
    ],
)
def test_earliest_is_the_window_that_opens_first(now: str, expected: str) -> None:
    windows = [window("05.00"), window("23.30"), window("03.00")]
    assert hour_minute(earliest(windows, utc(now))) == expected


def test_earliest_of_one_window_is_that_window() -> None:
    only = window("03.00")
    assert earliest([only], utc("2026-12-02T12:00:00")) is only


@pytest.mark.parametrize(
    ("now", "last_restart", "expected"),
    [
        pytest.param("2026-12-02T01:00:00", None, "2026-12-02T03:00:00", id="before"),
        pytest.param("2026-12-02T03:20:00", None, "2026-12-02T03:00:00", id="open-now"),
        pytest.param(
            "2026-12-02T03:20:00", "2026-12-02T03:05:00", "2026-12-03T03:00:00", id="done-today"
        ),
        pytest.param(
            "2026-12-02T03:20:00", "2026-12-01T03:05:00", "2026-12-02T03:00:00", id="yesterday"
        ),
    ],
)
def test_next_restart_skips_an_occurrence_that_already_restarted(
    now: str, last_restart: str | None, expected: str
) -> None:
    last = utc(last_restart) if last_restart else None
    assert next_restart(window("03.00"), utc(now), last) == utc(expected)


# --- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["25.00", "3.5", "abc", "", "24.00", "12.60", "3:00", "03.0", "3.00", " 03.00"]
)
def test_parse_hhmm_rejects_anything_but_two_digit_24_hour_hh_mm(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"HH\.MM"):
        parse_hhmm(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("03.00\n", id="trailing-newline"),
        pytest.param("0\u0663.00", id="arabic-indic-digit"),
    ],
)
def test_parse_hhmm_rejects_a_trailing_newline_and_non_ascii_digits(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_hhmm(text)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("00.00", (0, 0)), ("23.59", (23, 59)), ("03.00", (3, 0)), ("12.05", (12, 5))],
)
def test_parse_hhmm_accepts_two_digit_24_hour_hh_mm(text: str, parsed: tuple[int, int]) -> None:
    assert parse_hhmm(text) == parsed


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h", 3600),
        ("90m", 5400),
        ("1h30m", 5400),
        ("45s", 45),
        ("1h0m1s", 3601),
        ("24h", 86400),
    ],
)
def test_parse_length_accepts_hours_minutes_and_seconds(text: str, seconds: int) -> None:
    assert parse_length(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text", ["", "0m", "0h0m0s", "25h", "24h1s", "2h30", "abc", "-1h", "1d", "30m1h"]
)
def test_parse_length_rejects_empty_zero_too_long_and_malformed_lengths(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_length(text)


@pytest.mark.parametrize(
    "text",
    [pytest.param("1h\n", id="trailing-newline"), pytest.param("\u0661h", id="arabic-indic")],
)
def test_parse_length_rejects_a_trailing_newline_and_non_ascii_digits(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_length(text)


@pytest.mark.parametrize("name", ["Mars/Base", "", "Europe/Nowhere"])
def test_parse_zone_rejects_unknown_zones_naming_them(name: str) -> None:
    with pytest.raises(ScheduleError, match="unknown time zone"):
        parse_zone(name)


@pytest.mark.parametrize("name", ["UTC", "Europe/Warsaw", "Australia/Lord_Howe"])
def test_parse_zone_accepts_iana_names(name: str) -> None:
    assert parse_zone(name) is pytz.timezone(name)


def test_a_parsed_window_keeps_its_hour_and_minute() -> None:
    assert hour_minute(window("03.05")) == "03.05"
    assert hour_minute(DailyWindow(7, 0, HOUR, WARSAW)) == "07.00"
