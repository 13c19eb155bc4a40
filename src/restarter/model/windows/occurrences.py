"""When a restart window is open: pure wall-clock math in a named IANA zone.

A window opens at local wall-clock starts (every day at HH.MM, or at the minutes a
5-field cron expression matches) and lasts ``length``. A start that does not exist that
day (spring forward) moves to the first instant after the gap; an ambiguous one (fall
back) is the first occurrence, so a start never fires twice in one day. A restart only
starts inside a window, and a workload restarted inside one occurrence is not restarted
again in the same occurrence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

import pytz
from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from restarter.model.windows.parsing import ScheduleError, parse_cron, parse_hhmm

UTC = pytz.UTC
#: Wider than any DST shift (at most 2 h anywhere), so a local-time search never misses.
_DST_MARGIN = dt.timedelta(hours=3)


@dataclass(frozen=True)
class Occurrence:
    start: dt.datetime
    end: dt.datetime

    def contains(self, instant: dt.datetime) -> bool:
        return self.start <= instant < self.end


class Window(Protocol):
    """Anything that says which occurrence is open at an instant and when the next opens."""

    def occurrence_at(self, now: dt.datetime) -> Occurrence | None: ...

    def next_start(self, now: dt.datetime) -> dt.datetime: ...

    def start_after(self, instant: dt.datetime) -> dt.datetime: ...


def local_start(naive: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """The UTC instant of a local wall-clock start, by the DST rules above."""
    pytz_zone: Any = zone  # a pytz zone: localize() is not on dt.tzinfo
    local: dt.datetime
    try:
        local = pytz_zone.localize(naive, is_dst=None)
    except pytz.AmbiguousTimeError:
        local = pytz_zone.localize(naive, is_dst=True)
    except pytz.NonExistentTimeError:
        return _first_instant_at_or_after(naive, zone)
    return local.astimezone(UTC)


@dataclass(frozen=True)
class DailyWindow:
    """A window opening at hour:minute every local day in ``zone`` and lasting ``length``."""

    hour: int
    minute: int
    length: dt.timedelta
    zone: dt.tzinfo

    @classmethod
    def parse(cls, hhmm: str, length: dt.timedelta, zone: dt.tzinfo) -> DailyWindow:
        hour, minute = parse_hhmm(hhmm)
        return cls(hour, minute, length, zone)

    def start_on(self, day: dt.date) -> dt.datetime:
        """The UTC instant the window opens on local ``day``."""
        return local_start(dt.datetime.combine(day, dt.time(self.hour, self.minute)), self.zone)

    def occurrence_at(self, now: dt.datetime) -> Occurrence | None:
        """The occurrence open at ``now`` (aware), if any."""
        today = now.astimezone(self.zone).date()
        for day in (today, today - dt.timedelta(days=1)):
            start = self.start_on(day)
            occurrence = Occurrence(start, start + self.length)
            if occurrence.contains(now):
                return occurrence
        return None

    def next_start(self, now: dt.datetime) -> dt.datetime:
        """The start of the occurrence open at ``now``, else of the next one."""
        if open_now := self.occurrence_at(now):
            return open_now.start
        return self.start_after(now)

    def start_after(self, instant: dt.datetime) -> dt.datetime:
        """The first start strictly after ``instant``."""
        today = instant.astimezone(self.zone).date()
        for offset in range(0, 3):
            start = self.start_on(today + dt.timedelta(days=offset))
            if start > instant:
                return start
        raise AssertionError("a daily window opens within three days")


@dataclass(frozen=True)
class CronWindow:
    """A window opening at each local wall-clock minute a cron expression matches.

    croniter walks naive local times; each is turned into an instant by ``local_start``,
    so DST is handled exactly as for HH.MM windows. Overlapping occurrences (a start
    inside the previous one) count from the latest start.
    """

    expression: str
    length: dt.timedelta
    zone: dt.tzinfo

    @classmethod
    def parse(cls, expression: str, length: dt.timedelta, zone: dt.tzinfo) -> CronWindow:
        window = cls(parse_cron(expression), length, zone)
        try:
            window.next_start(dt.datetime(2000, 1, 1, tzinfo=UTC))
        except CroniterBadDateError:
            raise ScheduleError(f"cron {expression!r} never matches a date") from None
        except CroniterBadCronError as error:
            raise ScheduleError(f"cron {expression!r} is not valid: {error}") from None
        return window

    def _local(self, now: dt.datetime) -> dt.datetime:
        return now.astimezone(self.zone).replace(tzinfo=None)

    def last_start(self, now: dt.datetime) -> dt.datetime:
        """The latest start at or before ``now``."""
        walker = croniter(self.expression, self._local(now) + _DST_MARGIN)
        while True:
            start = local_start(walker.get_prev(dt.datetime), self.zone)
            if start <= now:
                return start

    def occurrence_at(self, now: dt.datetime) -> Occurrence | None:
        start = self.last_start(now)
        occurrence = Occurrence(start, start + self.length)
        return occurrence if occurrence.contains(now) else None

    def next_start(self, now: dt.datetime) -> dt.datetime:
        """The start of the occurrence open at ``now``, else of the next one."""
        if open_now := self.occurrence_at(now):
            return open_now.start
        return self.start_after(now)

    def start_after(self, instant: dt.datetime) -> dt.datetime:
        """The first start strictly after ``instant``."""
        walker = croniter(self.expression, self._local(instant) - _DST_MARGIN)
        while True:
            start = local_start(walker.get_next(dt.datetime), self.zone)
            if start > instant:
                return start


@dataclass(frozen=True)
class AnyWindow:
    """Several windows (``03.00_15.00``): open when any is, the latest open start counts."""

    windows: tuple[Window, ...]

    def occurrence_at(self, now: dt.datetime) -> Occurrence | None:
        open_now = [o for w in self.windows if (o := w.occurrence_at(now)) is not None]
        return max(open_now, key=lambda occurrence: occurrence.start, default=None)

    def next_start(self, now: dt.datetime) -> dt.datetime:
        if open_now := self.occurrence_at(now):
            return open_now.start
        return self.start_after(now)

    def start_after(self, instant: dt.datetime) -> dt.datetime:
        return min(window.start_after(instant) for window in self.windows)


@dataclass(frozen=True)
class Immediately:
    """``restart-at=now``: always open, so the next timer tick restarts."""

    def occurrence_at(self, now: dt.datetime) -> Occurrence | None:
        return Occurrence(now, now + dt.timedelta(seconds=1))

    def next_start(self, now: dt.datetime) -> dt.datetime:
        return now

    def start_after(self, instant: dt.datetime) -> dt.datetime:
        return instant


def is_due(window: Window, now: dt.datetime, last_restart: dt.datetime | None) -> bool:
    """True when a window is open at ``now`` and did not already restart this workload."""
    occurrence = window.occurrence_at(now)
    if occurrence is None:
        return False
    return last_restart is None or last_restart < occurrence.start


def next_restart(window: Window, now: dt.datetime, last_restart: dt.datetime | None) -> dt.datetime:
    """When this window can next restart a workload last restarted at ``last_restart``."""
    occurrence = window.occurrence_at(now)
    if occurrence is None:
        return window.next_start(now)
    if last_restart is None or last_restart < occurrence.start:
        return occurrence.start
    # Restarted in the open occurrence: the next start after now opens the next chance
    # (for overlapping occurrences that is before this one ends).
    return window.start_after(now)


def earliest(windows: list[Window], now: dt.datetime) -> Window:
    """The window that opens first from ``now`` (an open one counts as opening now)."""
    return min(windows, key=lambda window: window.next_start(now))


def _first_instant_at_or_after(naive: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    """Binary search, to the second, for the first UTC instant whose local time >= naive."""
    pytz_zone: Any = zone
    low: dt.datetime = pytz_zone.localize(naive, is_dst=True).astimezone(UTC)
    high: dt.datetime = pytz_zone.localize(naive, is_dst=False).astimezone(UTC)
    low, high = min(low, high), max(low, high)
    while high - low > dt.timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) >= naive:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)
