"""Cron windows, several daily starts and ``now``: explicit instants in named zones.

The DST instants were checked independently with the standard library's ``zoneinfo``
(a minute-by-minute scan for the first UTC instant whose local wall-clock time is at or
after the start on that local day), not derived from the code under test.
"""

from __future__ import annotations

import datetime as dt

import pytest
import pytz

from restarter.model.windows import (
    AnyWindow,
    CronWindow,
    DailyWindow,
    Immediately,
    ScheduleError,
    is_due,
    next_restart,
    parse_cron,
)

UTC = pytz.UTC
HOUR = dt.timedelta(hours=1)


def utc(text: str) -> dt.datetime:
    return UTC.localize(dt.datetime.fromisoformat(text))


def cron(expression: str, zone: str = "UTC", length: dt.timedelta = HOUR) -> CronWindow:
    return CronWindow.parse(expression, length, pytz.timezone(zone))


# --- cron: next start, including the 2026 and 2027 transition days -----------------------


@pytest.mark.parametrize(
    ("expression", "zone", "now", "expected"),
    [
        pytest.param("0 3 * * *", "UTC", "2026-12-02T12:00", "2026-12-03T03:00", id="daily"),
        pytest.param("0 3 * * *", "UTC", "2026-12-02T03:20", "2026-12-02T03:00", id="open-now"),
        pytest.param(
            "0 3 * * 1-5", "UTC", "2026-12-04T05:00", "2026-12-07T03:00", id="friday-to-monday"
        ),
        pytest.param(
            "0 3 * * 1-5", "Asia/Kolkata", "2026-12-04T00:00", "2026-12-06T21:30", id="kolkata"
        ),
        pytest.param("0 */6 * * *", "UTC", "2026-12-02T07:00", "2026-12-02T12:00", id="every-6h"),
        pytest.param(
            "30 2 * * *", "Europe/Warsaw", "2026-03-28T12:00", "2026-03-29T01:00", id="warsaw-gap"
        ),
        pytest.param(
            "30 2 * * *",
            "Europe/Warsaw",
            "2026-10-24T12:00",
            "2026-10-25T00:30",
            id="warsaw-ambiguous-first",
        ),
        pytest.param(
            "30 2 * * *",
            "Europe/Warsaw",
            "2026-10-25T01:35",
            "2026-10-26T01:30",
            id="warsaw-second-pass-is-not-a-start",
        ),
        pytest.param(
            "30 2 * * *", "America/New_York", "2026-03-07T12:00", "2026-03-08T07:00", id="ny-gap"
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00",
            "2026-11-01T05:30",
            id="ny-ambiguous-first",
        ),
        pytest.param(
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2026-10-03T00:00",
            "2026-10-03T15:30",
            id="lord-howe-30-minute-gap",
        ),
        pytest.param(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2026-04-04T00:00",
            "2026-04-04T14:45",
            id="lord-howe-30-minute-ambiguous",
        ),
        pytest.param(
            "30 2 * * *", "Europe/Warsaw", "2027-03-27T12:00", "2027-03-28T01:00", id="warsaw-2027"
        ),
        pytest.param(
            "30 2 * * *",
            "Europe/Warsaw",
            "2027-10-30T12:00",
            "2027-10-31T00:30",
            id="warsaw-2027-fall",
        ),
        pytest.param(
            "30 2 * * *", "America/New_York", "2027-03-13T12:00", "2027-03-14T07:00", id="ny-2027"
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "2027-11-06T12:00",
            "2027-11-07T05:30",
            id="ny-2027-fall",
        ),
    ],
)
def test_a_cron_window_opens_at_the_next_matching_local_minute(
    expression: str, zone: str, now: str, expected: str
) -> None:
    assert cron(expression, zone).next_start(utc(now)) == utc(expected)


@pytest.mark.parametrize(
    ("expression", "now", "expected_start"),
    [
        pytest.param("0 3 * * *", "2026-12-02T03:00", "2026-12-02T03:00", id="at-the-start"),
        pytest.param("0 3 * * *", "2026-12-02T03:59:59", "2026-12-02T03:00", id="last-second"),
        pytest.param("0 3 * * *", "2026-12-02T04:00", None, id="end-is-exclusive"),
        pytest.param("0 3 * * *", "2026-12-02T02:59:59", None, id="before"),
        pytest.param("*/10 * * * *", "2026-12-02T10:25", "2026-12-02T10:20", id="latest-start"),
        pytest.param("30 23 * * *", "2026-12-03T00:10", "2026-12-02T23:30", id="midnight-wrap"),
    ],
)
def test_a_cron_occurrence_counts_from_the_latest_start(
    expression: str, now: str, expected_start: str | None
) -> None:
    occurrence = cron(expression).occurrence_at(utc(now))
    if expected_start is None:
        assert occurrence is None
    else:
        assert occurrence is not None
        assert (occurrence.start, occurrence.end) == (
            utc(expected_start),
            utc(expected_start) + HOUR,
        )


def test_a_cron_window_restarts_once_per_occurrence() -> None:
    weekdays = cron("0 3 * * 1-5")
    restarted = utc("2026-12-02T03:05")
    assert is_due(weekdays, utc("2026-12-02T03:04"), None)
    assert not is_due(weekdays, utc("2026-12-02T03:30"), restarted)
    assert next_restart(weekdays, utc("2026-12-02T03:30"), restarted) == utc("2026-12-03T03:00")
    assert is_due(weekdays, utc("2026-12-03T03:00"), restarted)


def test_in_a_fall_back_hour_a_cron_window_never_opens_twice() -> None:
    window = cron("30 2 * * *", "Europe/Warsaw")
    first_pass = utc("2026-10-25T00:30")  # 02:30 CEST
    second_pass = utc("2026-10-25T01:30")  # 02:30 CET, the same wall-clock minute again
    assert is_due(window, first_pass, None)
    assert not is_due(window, second_pass, first_pass)
    assert window.occurrence_at(second_pass) is None


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        pytest.param("61 3 * * *", "not a valid cron", id="minute-61"),
        pytest.param("0 24 * * *", "not a valid cron", id="hour-24"),
        pytest.param("0 3 * *", "5 fields", id="four-fields"),
        pytest.param("0 0 3 * * *", "5 fields", id="six-fields-with-seconds"),
        pytest.param("@daily", "5 fields", id="nickname"),
        pytest.param("", "5 fields", id="empty"),
        pytest.param("0 0 30 2 *", "never matches", id="february-30"),
        pytest.param("a b c d e", "may use numbers", id="letters"),
        pytest.param("R R * * *", "no random", id="random-minute-and-hour"),
        pytest.param("H 3 * * *", "no random", id="hashed-minute"),
    ],
)
def test_a_bad_cron_expression_is_refused_with_the_reason(expression: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason):
        CronWindow.parse(expression, HOUR, UTC)


def test_a_cron_expression_is_normalised_to_single_spaces() -> None:
    assert parse_cron("  0   3 * *  1-5 ") == "0 3 * * 1-5"


# --- several daily starts --------------------------------------------------------------


def twice_daily(zone: str = "UTC") -> AnyWindow:
    tz = pytz.timezone(zone)
    return AnyWindow((DailyWindow(3, 0, HOUR, tz), DailyWindow(15, 0, HOUR, tz)))


@pytest.mark.parametrize(
    ("now", "open_start", "next_start"),
    [
        pytest.param("2026-12-02T03:30", "2026-12-02T03:00", "2026-12-02T03:00", id="first-open"),
        pytest.param("2026-12-02T05:00", None, "2026-12-02T15:00", id="between"),
        pytest.param("2026-12-02T15:10", "2026-12-02T15:00", "2026-12-02T15:00", id="second-open"),
        pytest.param("2026-12-02T16:30", None, "2026-12-03T03:00", id="after-both"),
    ],
)
def test_several_daily_starts_open_at_each(
    now: str, open_start: str | None, next_start: str
) -> None:
    window = twice_daily()
    occurrence = window.occurrence_at(utc(now))
    assert (occurrence.start if occurrence else None) == (utc(open_start) if open_start else None)
    assert window.next_start(utc(now)) == utc(next_start)


def test_a_restart_in_the_morning_window_leaves_the_afternoon_one_due() -> None:
    window = twice_daily()
    morning = utc("2026-12-02T03:01")
    assert not is_due(window, utc("2026-12-02T03:40"), morning)
    assert next_restart(window, utc("2026-12-02T03:40"), morning) == utc("2026-12-02T15:00")
    assert is_due(window, utc("2026-12-02T15:00"), morning)


def test_overlapping_daily_windows_count_from_the_latest_start() -> None:
    tz = UTC
    window = AnyWindow((DailyWindow(3, 0, 2 * HOUR, tz), DailyWindow(4, 0, HOUR, tz)))
    occurrence = window.occurrence_at(utc("2026-12-02T04:10"))
    assert occurrence is not None and occurrence.start == utc("2026-12-02T04:00")


# --- now -------------------------------------------------------------------------------


def test_now_is_always_due_and_restarts_at_once() -> None:
    now = utc("2026-12-02T15:15:00.5")
    window = Immediately()
    assert is_due(window, now, None)
    assert is_due(window, now, utc("2026-12-02T15:14"))
    assert window.next_start(now) == now
    assert next_restart(window, now, None) == now


@pytest.mark.parametrize(
    "expression", ["0 3 * * MON-FRI", "0 3 L * *", "0 3 * * 5#3", "*/15 0-6 1,15 jan,feb *"]
)
def test_deterministic_cron_forms_are_accepted(expression: str) -> None:
    assert CronWindow.parse(expression, HOUR, UTC).expression == expression


# --- the next restart when occurrences overlap ---------------------------------------------


@pytest.mark.parametrize(
    ("window", "now", "restarted", "expected"),
    [
        pytest.param(
            cron("*/10 * * * *"),
            "2026-12-02T03:45",
            "2026-12-02T03:42",
            "2026-12-02T03:50",
            id="cron-every-10-minutes-1h-long",
        ),
        pytest.param(
            AnyWindow((DailyWindow(3, 0, HOUR, UTC), DailyWindow(3, 30, HOUR, UTC))),
            "2026-12-02T03:15",
            "2026-12-02T03:10",
            "2026-12-02T03:30",
            id="daily-03.00-and-03.30-1h-long",
        ),
    ],
)
def test_after_a_restart_the_next_one_is_at_the_next_start_even_inside_an_occurrence(
    window: CronWindow | AnyWindow, now: str, restarted: str, expected: str
) -> None:
    last = utc(restarted)
    assert next_restart(window, utc(now), last) == utc(expected)
    assert not is_due(window, utc(expected) - dt.timedelta(seconds=1), last)
    assert is_due(window, utc(expected), last)
