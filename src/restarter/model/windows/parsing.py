"""The text forms of a window, read and written: ``HH.MM`` starts, a 5-field cron
expression, an IANA zone and a length. Each is validated once, and a value that cannot be
used is a ``ScheduleError`` whose message says what and why."""

from __future__ import annotations

import datetime as dt
import re

import pytz
from croniter import croniter

MAX_LENGTH = dt.timedelta(hours=24)
_HHMM = re.compile(r"([01][0-9]|2[0-3])\.([0-5][0-9])")
_DURATION = re.compile(r"(?:([0-9]{1,5})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,9})s)?")
#: What a cron field may hold once month and weekday names are removed: numbers, ranges,
#: lists, steps, ``*``, and croniter's deterministic ``L``, ``#`` and ``?``. Not ``R``
#: (random) or ``H`` (hashed): a window must open at the same minute on every tick.
_CRON_FIELD = re.compile(r"[0-9*,/\-L#?]+")
_CRON_NAMES = re.compile(
    r"JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT"
)


class ScheduleError(ValueError):
    """A window, zone or length that cannot be used; the message says what and why."""


def parse_hhmm(text: str) -> tuple[int, int]:
    """``'03.00'`` → ``(3, 0)``; anything but two-digit 24-hour HH.MM is an error."""
    match = _HHMM.fullmatch(text or "")
    if not match:
        raise ScheduleError(f"window {text!r} is not HH.MM (24-hour, e.g. 03.00 or 23.45)")
    return int(match.group(1)), int(match.group(2))


def daily_starts(label: str) -> tuple[str, ...]:
    """``'15.00_03.00'`` → ``('03.00', '15.00')``: validated, sorted, without repeats."""
    parts = label.split("_")
    for part in parts:
        parse_hhmm(part)
    return tuple(sorted(set(parts)))


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


def format_length(length: dt.timedelta) -> str:
    """``timedelta(minutes=90)`` → ``'1h30m'`` (the form ``parse_length`` reads)."""
    total = int(length.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (seconds, "s")]
    return "".join(f"{value}{unit}" for value, unit in parts if value) or "0s"


def parse_cron(expression: str) -> str:
    """A standard 5-field cron expression (minute hour day month weekday), normalised."""
    fields = (expression or "").split()
    if len(fields) != 5:
        raise ScheduleError(
            f"cron {expression!r} must have 5 fields: minute hour day-of-month month day-of-week"
        )
    normalised = " ".join(fields)
    if not all(_CRON_FIELD.fullmatch(_CRON_NAMES.sub("0", f.upper())) for f in fields):
        raise ScheduleError(
            f"cron {expression!r} may use numbers, names, '*', ',', '-', '/', 'L' and '#' "
            "only (no random 'R' or hashed 'H': a window must not move)"
        )
    if not croniter.is_valid(normalised):
        raise ScheduleError(f"cron {expression!r} is not a valid cron expression")
    return normalised
