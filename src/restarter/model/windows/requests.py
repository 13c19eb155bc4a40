"""The window a source asks for: read from its label and annotations, carried in marks.

A source (Secret or ConfigMap) chooses its window with the label ``restart-at``:

- ``HH.MM``, or several joined by ``_`` (``03.00_15.00``): daily starts;
- ``now``: restart at the next timer tick;
- ``cron``: the starts are the 5-field cron expression in the ``restarter.io/cron``
  annotation (labels cannot hold spaces).

The annotations ``restarter.io/timezone`` and ``restarter.io/window-length`` override the
operator's zone and length for that source. The resolved request is stamped on every
dependent workload as JSON, so the restart follows what the source asked at the change,
whatever happens to the source or the operator's defaults afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from restarter.model import keys
from restarter.model.windows.occurrences import (
    AnyWindow,
    CronWindow,
    DailyWindow,
    Immediately,
    Window,
)
from restarter.model.windows.parsing import (
    ScheduleError,
    daily_starts,
    format_length,
    parse_cron,
    parse_length,
    parse_zone,
)

NOW = "now"
AT_CRON = "cron"

#: Where a mark's window came from: the source's ``restart-at`` label, the workload's
#: ``restarter.io/restart-at`` annotation, or the operator's default for workloads that
#: opted in through Reloader's annotations alone.
FROM_SOURCE, FROM_WORKLOAD, FROM_RELOADER = "source", "workload", "reloader-default"
ORIGINS = (FROM_SOURCE, FROM_WORKLOAD, FROM_RELOADER)


#: Changed keys named in a mark at most (a mark must stay small; the Event names them all).
MARK_KEYS = 20


class WindowDefaults(Protocol):
    """The zone and length of a window whose mark names neither (``now``): the operator's
    settings."""

    @property
    def timezone(self) -> str: ...

    @property
    def window_length(self) -> dt.timedelta: ...


@functools.lru_cache(maxsize=1024)
def _build_window(at: str, timezone: str, length: dt.timedelta, cron: str | None) -> Window:
    """The window for a request's fields. Windows are immutable, and every timer tick of
    every pending workload asks again for the same few, so each is built (and a cron
    expression parsed and checked) once; errors are raised each time, never cached."""
    if at == NOW:
        return Immediately()
    zone = parse_zone(timezone)
    if at == AT_CRON:
        return CronWindow.parse(cron or "", length, zone)
    starts = daily_starts(at)
    dailies = tuple(DailyWindow.parse(start, length, zone) for start in starts)
    return dailies[0] if len(dailies) == 1 else AnyWindow(dailies)


@dataclass(frozen=True)
class WindowRequest:
    """A source's window, resolved against the operator's defaults and validated."""

    at: str
    """``HH.MM[_HH.MM...]``, ``now`` or ``cron``: the label's value, normalised."""

    timezone: str
    length: dt.timedelta
    cron: str | None = None
    origin: str = FROM_SOURCE
    """Where the window was read (``ORIGINS``): it is named in the mark and in ``plan``."""

    def window(self) -> Window:
        return _build_window(self.at, self.timezone, self.length, self.cron)

    def describe(self) -> str:
        """How Events, logs and ``plan`` name the window."""
        if self.at == NOW:
            return "now"
        length = format_length(self.length)
        if self.at == AT_CRON:
            return f"cron '{self.cron}' {self.timezone} ({length} long)"
        return f"{self.at.replace('_', ', ')} {self.timezone} ({length} long)"

    def to_mark(
        self,
        source: str,
        change: str | None = None,
        changed_keys: Iterable[str] | None = None,
        extra: Mapping[str, int] | None = None,
    ) -> str:
        """The mark's value on a workload: compact JSON naming the source (and its change,
        the first ``MARK_KEYS`` changed keys the workload reads, when known, and ``extra``:
        its wave and quiet time, ``model.waves``)."""
        value: dict[str, Any] = {"source": source, "at": self.at, **(extra or {})}
        if change is not None:
            value["change"] = change
        if changed_keys is not None:
            names = sorted(changed_keys)
            value["keys"] = names[:MARK_KEYS]
            if len(names) > MARK_KEYS:
                value["moreKeys"] = len(names) - MARK_KEYS
        if self.at != NOW:
            value |= {"timezone": self.timezone, "length": format_length(self.length)}
        if self.cron is not None:
            value["cron"] = self.cron
        if self.origin != FROM_SOURCE:
            value["from"] = self.origin
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _validated(request: WindowRequest, min_length: dt.timedelta) -> WindowRequest:
    request.window()
    if request.at != NOW and request.length <= min_length:
        raise ScheduleError(
            f"window length {format_length(request.length)} must be longer than "
            f"{format_length(min_length)} (two timer intervals), or a window could pass "
            "between two checks"
        )
    return request


def _from_fields(
    at: str,
    annotations: Mapping[str, str],
    default_zone: str,
    default_length: dt.timedelta,
    min_length: dt.timedelta,
    asked_by: str,
) -> WindowRequest:
    """The request an ``at`` value (``asked_by`` names where it was read, for errors)
    and its companion annotations make."""
    cron = annotations.get(keys.CRON)
    zone = annotations.get(keys.TIMEZONE, default_zone)
    length_text = annotations.get(keys.WINDOW_LENGTH)
    length = default_length if length_text is None else parse_length(length_text)
    if at == AT_CRON:
        if cron is None:
            raise ScheduleError(
                f"{asked_by}=cron needs the annotation {keys.CRON} (e.g. '0 3 * * 1-5')"
            )
        request = WindowRequest(AT_CRON, zone, length, parse_cron(cron))
    elif cron is not None:
        raise ScheduleError(
            f"annotation {keys.CRON} is only read with {asked_by}=cron (it says {at!r})"
        )
    elif at == NOW:
        parse_zone(zone)  # a bad zone is an error even where it does not matter
        request = WindowRequest(NOW, zone, length)
    else:
        request = WindowRequest("_".join(daily_starts(at)), zone, length)
    return _validated(request, min_length)


def from_source(
    metadata: Mapping[str, Any],
    default_zone: str,
    default_length: dt.timedelta,
    min_length: dt.timedelta = dt.timedelta(0),
) -> WindowRequest:
    """The request a source's label and annotations make; ScheduleError says what is wrong."""
    label = (metadata.get("labels") or {}).get(keys.RESTART_AT_LABEL, "")
    annotations = metadata.get("annotations") or {}
    return _from_fields(
        label, annotations, default_zone, default_length, min_length, "label restart-at"
    )


def from_workload(
    annotations: Mapping[str, str],
    default_zone: str,
    default_length: dt.timedelta,
    min_length: dt.timedelta = dt.timedelta(0),
    default_at: str = NOW,
) -> WindowRequest:
    """The request a workload that opted in makes: its ``restarter.io/restart-at``
    annotation (same grammar as the label) and the companion annotations on it, or
    ``default_at`` (the operator's window for Reloader's annotations) without one."""
    at = annotations.get(keys.WORKLOAD_RESTART_AT)
    if at is None:
        request = _from_fields(
            default_at,
            {k: v for k, v in annotations.items() if k != keys.CRON},
            default_zone,
            default_length,
            min_length,
            "the default window",
        )
        return dataclasses.replace(request, origin=FROM_RELOADER)
    asked_by = f"annotation {keys.WORKLOAD_RESTART_AT}"
    try:
        request = _from_fields(
            at.strip(), annotations, default_zone, default_length, min_length, asked_by
        )
    except ScheduleError as error:
        if asked_by in str(error):
            raise
        raise ScheduleError(f"{asked_by}={at!r}: {error}") from None
    return dataclasses.replace(request, origin=FROM_WORKLOAD)


def from_mark(value: str, default_zone: str, default_length: dt.timedelta) -> WindowRequest:
    """Read a mark back (``to_mark``'s JSON); ScheduleError for any other value."""
    try:
        fields = json.loads(value)
    except ValueError:
        fields = None
    return from_mark_fields(fields, value, default_zone, default_length)


def from_mark_fields(
    fields: Any, value: str, default_zone: str, default_length: dt.timedelta
) -> WindowRequest:
    """The request of a mark whose JSON (``value``) decoded to ``fields`` (None: it is not
    JSON); ScheduleError, naming ``value``, when it is not a window restarter wrote."""
    try:
        at = fields["at"]
        origin = fields.get("from", FROM_SOURCE)
        if origin not in ORIGINS:
            origin = FROM_SOURCE
        if at == NOW:
            return WindowRequest(NOW, default_zone, default_length, origin=origin)
        request = WindowRequest(
            at=at if at == AT_CRON else "_".join(daily_starts(at)),
            timezone=fields["timezone"],
            length=parse_length(fields["length"]),
            cron=parse_cron(fields["cron"]) if at == AT_CRON else None,
            origin=origin,
        )
    except ScheduleError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ScheduleError(f"mark {value!r} is not a window restarter wrote") from None
    request.window()
    return request
