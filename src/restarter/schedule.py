"""When a restart window is open: pure wall-clock math in a named IANA zone.

A window starts every day at HH.MM local time and lasts ``length``. A start that does not
exist that day (spring forward) moves to the first instant after the gap; an ambiguous
one (fall back) is the first occurrence. A restart only starts inside a window, and a
workload restarted inside one occurrence is not restarted again in the same occurrence.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import pytz

UTC = pytz.UTC
MAX_LENGTH = dt.timedelta(hours=24)
_HHMM = re.compile(r"([01][0-9]|2[0-3])\.([0-5][0-9])")
_DURATION = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")


class ScheduleError(ValueError):
    """A window, zone or length that cannot be used; the message says what and why."""


def parse_hhmm(text: str) -> tuple[int, int]:
    """``'03.00'`` → ``(3, 0)``; anything but two-digit 24-hour HH.MM is an error."""
    match = _HHMM.fullmatch(text or "")
    if not match:
        raise ScheduleError(f"window {text!r} is not HH.MM (24-hour, e.g. 03.00 or 23.45)")
    return int(match.group(1)), int(match.group(2))


def parse_zone(name: str) -> dt.tzinfo:
    try:
        return pytz.timezone(name)
    except pytz.UnknownTimeZoneError:
        raise ScheduleError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Warsaw)"
        ) from None


def parse_length(text: str) -> dt.timedelta:
    """``'1h'``, ``'90m'``, ``'1h30m'``, ``'45s'``: more than zero, at most 24 h."""
    match = _DURATION.fullmatch(text or "")
    if not text or not match:
        raise ScheduleError(f"window length {text!r} is not like 1h, 90m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    length = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if not dt.timedelta(0) < length <= MAX_LENGTH:
        raise ScheduleError(f"window length {text!r} must be more than 0 and at most 24h")
    return length


@dataclass(frozen=True)
class Occurrence:
    start: dt.datetime
    end: dt.datetime

    def contains(self, instant: dt.datetime) -> bool:
        return self.start <= instant < self.end


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

    @property
    def label(self) -> str:
        return f"{self.hour:02d}.{self.minute:02d}"

    def start_on(self, day: dt.date) -> dt.datetime:
        """The UTC instant the window opens on local ``day``."""
        naive = dt.datetime.combine(day, dt.time(self.hour, self.minute))
        zone: Any = self.zone  # a pytz zone: localize() is not on dt.tzinfo
        local: dt.datetime
        try:
            local = zone.localize(naive, is_dst=None)
        except pytz.AmbiguousTimeError:
            local = zone.localize(naive, is_dst=True)
        except pytz.NonExistentTimeError:
            return _first_instant_at_or_after(naive, zone)
        return local.astimezone(UTC)

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
        today = now.astimezone(self.zone).date()
        for offset in range(0, 3):
            start = self.start_on(today + dt.timedelta(days=offset))
            if start > now:
                return start
        raise AssertionError("a daily window opens within three days")


def is_due(window: DailyWindow, now: dt.datetime, last_restart: dt.datetime | None) -> bool:
    """True when a window is open at ``now`` and did not already restart this workload."""
    occurrence = window.occurrence_at(now)
    if occurrence is None:
        return False
    return last_restart is None or last_restart < occurrence.start


def next_restart(
    window: DailyWindow, now: dt.datetime, last_restart: dt.datetime | None
) -> dt.datetime:
    """When this window can next restart a workload last restarted at ``last_restart``."""
    occurrence = window.occurrence_at(now)
    if occurrence is None:
        return window.next_start(now)
    if last_restart is None or last_restart < occurrence.start:
        return occurrence.start
    return window.next_start(occurrence.end)


def earliest(windows: list[DailyWindow], now: dt.datetime) -> DailyWindow:
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
