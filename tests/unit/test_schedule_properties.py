"""Properties of the window math over random instants, starts and zones (hypothesis).

For every zone, start and instant: the next start is never in the past (unless the
window is open now, when it is the open occurrence's start), never inside a DST gap,
and a timer ticking through several days restarts at most once per local day.
"""

from __future__ import annotations

import datetime as dt

import pytz
from hypothesis import given, settings
from hypothesis import strategies as st

from restarter.model.windows import CronWindow, DailyWindow, Window, is_due

UTC = pytz.UTC
ZONES = [
    "Europe/Warsaw",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
]
instants = st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2028, 12, 31)).map(
    UTC.localize
)
zones = st.sampled_from(ZONES).map(pytz.timezone)
lengths = st.sampled_from([dt.timedelta(minutes=m) for m in (5, 30, 60, 90, 180)])


@st.composite
def daily_windows(draw: st.DrawFn) -> DailyWindow:
    return DailyWindow(
        draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(lengths), draw(zones)
    )


@st.composite
def cron_windows(draw: st.DrawFn) -> CronWindow:
    minute, hour = draw(st.integers(0, 59)), draw(st.integers(0, 23))
    expression = draw(
        st.sampled_from(
            [f"{minute} {hour} * * *", f"{minute} {hour} * * 1-5", f"{minute} */6 * * *"]
        )
    )
    return CronWindow.parse(expression, draw(lengths), draw(zones))


windows = st.one_of(daily_windows(), cron_windows())


def in_gap(instant: dt.datetime, zone: dt.tzinfo) -> bool:
    """True when the local wall clock just before ``instant`` reads later than at it."""
    before = (instant - dt.timedelta(seconds=1)).astimezone(zone).replace(tzinfo=None)
    return before > instant.astimezone(zone).replace(tzinfo=None)


@settings(max_examples=300, deadline=None)
@given(windows, instants)
def test_the_next_start_is_never_in_the_past_unless_open_now(
    window: Window, now: dt.datetime
) -> None:
    start = window.next_start(now)
    occurrence = window.occurrence_at(now)
    if occurrence is None:
        assert start > now
    else:
        assert start == occurrence.start <= now < occurrence.end


@settings(max_examples=300, deadline=None)
@given(daily_windows(), instants)
def test_a_daily_start_is_at_its_wall_clock_minute_or_right_after_a_gap(
    window: DailyWindow, now: dt.datetime
) -> None:
    start = window.next_start(now)
    local = start.astimezone(window.zone)
    if (local.hour, local.minute) != (window.hour, window.minute):
        # HH.MM did not exist that day: the start is the first instant after the gap,
        # where the wall clock jumped forward past HH.MM.
        assert local.second == 0 and not in_gap(start, window.zone)
        before = (start - dt.timedelta(seconds=1)).astimezone(window.zone)
        assert before.utcoffset() != local.utcoffset()
        assert before.replace(tzinfo=None) < local.replace(
            hour=window.hour, minute=window.minute, tzinfo=None
        )


@settings(max_examples=40, deadline=None)
@given(windows, instants)
def test_a_ticking_timer_restarts_at_most_once_per_local_day(
    window: Window, start: dt.datetime
) -> None:
    """Tick every 5 minutes for two days; restart whenever due."""
    zone = window.zone  # type: ignore[attr-defined]
    last: dt.datetime | None = None
    restart_days: list[dt.date] = []
    tick = start
    for _ in range(2 * 24 * 12):
        if is_due(window, tick, last):
            occurrence = window.occurrence_at(tick)
            assert occurrence is not None
            restart_days.append(occurrence.start.astimezone(zone).date())
            last = tick
        tick += dt.timedelta(minutes=5)
    per_day = 4 if "*/6" in getattr(window, "expression", "") else 1
    for day in set(restart_days):
        assert restart_days.count(day) <= per_day, restart_days
    if isinstance(window, DailyWindow):
        assert len(restart_days) >= 1  # two days of ticks cover at least one occurrence
