"""Restart windows, in one place: what a source asks for, and when that window is open.

- ``parsing``: the text forms (``HH.MM``, cron, zone, length), validated once;
- ``occurrences``: the arithmetic, a ``Window`` value with ``occurrence_at(now)``, and
  ``is_due`` and ``next_restart`` for a workload last restarted at a given instant;
- ``requests``: a source's ``WindowRequest`` (its label and annotations resolved against
  the operator's defaults), written in a mark and read back from one.

Import from this package, not from its modules: the names below are its surface.
"""

from restarter.model.windows.occurrences import (
    UTC,
    AnyWindow,
    CronWindow,
    DailyWindow,
    Immediately,
    Occurrence,
    Window,
    earliest,
    is_due,
    local_start,
    next_restart,
)
from restarter.model.windows.parsing import (
    MAX_LENGTH,
    ScheduleError,
    daily_starts,
    format_length,
    parse_cron,
    parse_hhmm,
    parse_length,
    parse_zone,
)
from restarter.model.windows.requests import (
    AT_CRON,
    FROM_RELOADER,
    FROM_SOURCE,
    FROM_WORKLOAD,
    MARK_KEYS,
    NOW,
    ORIGINS,
    WindowDefaults,
    WindowRequest,
    from_mark,
    from_mark_fields,
    from_source,
    from_workload,
)

__all__ = [
    "AT_CRON",
    "FROM_RELOADER",
    "FROM_SOURCE",
    "FROM_WORKLOAD",
    "MARK_KEYS",
    "MAX_LENGTH",
    "NOW",
    "ORIGINS",
    "UTC",
    "AnyWindow",
    "CronWindow",
    "DailyWindow",
    "Immediately",
    "Occurrence",
    "ScheduleError",
    "Window",
    "WindowDefaults",
    "WindowRequest",
    "daily_starts",
    "earliest",
    "format_length",
    "from_mark",
    "from_mark_fields",
    "from_source",
    "from_workload",
    "is_due",
    "local_start",
    "next_restart",
    "parse_cron",
    "parse_hhmm",
    "parse_length",
    "parse_zone",
]
