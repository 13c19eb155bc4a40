"""``restarter plan --at``: the instant a plan is shown as of.

Either an instant with an offset (``2026-03-29T03:00+02:00``, ``2026-03-29T01:00Z``) or a
local time in a named zone (``2026-03-29 03:00 Europe/Warsaw``), read by the windows' own
DST rules: a local time that does not exist that day (spring forward) is the first instant
after the gap, one that exists twice (fall back) is the first of the two.
"""

from __future__ import annotations

import datetime as dt

from restarter.model.windows import ScheduleError, local_start, parse_zone


def parse_at(text: str) -> dt.datetime:
    """The UTC instant ``text`` names; ScheduleError says what is wrong with it."""
    text = text.strip()
    head, _, zone_name = text.rpartition(" ")
    if head and zone_name and zone_name[0].isalpha() and zone_name.upper() != "Z":
        zone = parse_zone(zone_name)
        try:
            naive = dt.datetime.fromisoformat(head.strip())
        except ValueError:
            raise ScheduleError(f"--at {text!r}: {head!r} is not a local date and time") from None
        if naive.tzinfo is not None:
            raise ScheduleError(f"--at {text!r}: give an offset or a zone, not both")
        return local_start(naive, zone)
    try:
        instant = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(
            f"--at {text!r} is not like 2026-03-29T03:00+02:00 or '2026-03-29 03:00 Europe/Warsaw'"
        ) from None
    if instant.tzinfo is None:
        raise ScheduleError(f"--at {text!r} has no offset: add one, or a zone name after it")
    return instant.astimezone(dt.UTC)
