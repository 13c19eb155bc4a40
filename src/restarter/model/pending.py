"""A workload's pending state, read from its annotations once: its marks (each with the
source, window, change, wave and quiet time its JSON names), the changes its restarts
satisfied (``restarted-for``), its last restart (``restart-ts``), whether it opted out,
and the earliest certificate deadline stamped on it.

This module is the one reader of those annotations: ``read`` parses them into the
``PendingState`` that the timer's decision, the breaker and ``plan`` read, each mark's JSON
decoded once. ``restarted_for`` and ``last_restart_seconds`` read one annotation each, for
callers that need nothing else (a stamp's answer, pacing over every workload). What
restarter writes there is built by ``stamps`` (a change's marks), ``certificates`` (a
deadline) and ``restart_decisions`` (the restart's record). An unreadable mark is kept, with
the ``problem`` that the timer reports as ``InvalidPendingMark``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import certificates, keys, windows
from restarter.model.windows import ScheduleError, WindowDefaults, WindowRequest

#: The wave of a mark (the mark JSON's ``wave``, ``model.waves``): the first, or the rest.
FIRST, REST = 1, 2

#: Seconds a ``restart-ts`` may lie ahead of ``now`` and still be restarter's own: the
#: clocks of two replicas, or a ``now`` read before the restart's (the pacer's streams).
RESTART_TS_AHEAD = 60

#: The zone and length a ``now`` mark is read in when no defaults are given (the breaker
#: reads no window): a ``now`` window is open at once in any zone.
_NO_DEFAULTS = ("UTC", dt.timedelta(0))


@dataclass(frozen=True)
class PendingMark:
    """One pending source on a workload: its pending-restart mark and its restart-at mark."""

    token: str
    since: int | None
    """Epoch seconds the change was seen (pending-restart); None when absent or unreadable."""

    value: str | None
    """The restart-at mark as written (JSON); None when only the pending-restart mark is."""

    change: str | None = None
    """The id of the change the mark is for; None for marks written before ids."""

    source: str | None = None
    """``Kind/name``, for a mark of ours in JSON form."""

    wave: int | None = None
    """``FIRST`` or ``REST``; None when the change has no waves."""

    quiet: float = 0.0
    """Seconds the source must stay quiet before the restart (0: none)."""

    named_keys: tuple[tuple[str, ...], int] | None = None
    """The changed keys the mark names and how many more it left out; None: unknown."""

    request: WindowRequest | None = None
    """The window the mark asks for; None when it cannot be read (``problem`` says why)."""

    problem: str | None = None

    def satisfied(self, recorded: Mapping[str, str]) -> bool:
        """True when the workload already restarted for the very change this mark is for."""
        return self.change is not None and recorded.get(self.token) == self.change


@dataclass(frozen=True)
class PendingState:
    """What a workload's annotations say about its pending restart."""

    marks: tuple[PendingMark, ...] = ()
    """By token."""

    restarted_for: Mapping[str, str] = field(default_factory=dict)
    """The changes (mark token → change id) restarter's restarts of it satisfied."""

    restart_ts: int | None = None
    """``restart-ts`` as written (epoch seconds); ``last_restart`` is what decisions use."""

    opted_out: bool = False
    """``restarter.io/ignore`` is true: its marks are dropped, nothing restarts."""

    deadline: certificates.Deadline | None = None
    """The earliest certificate deadline stamped on it (every change it waits for)."""

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(mark.token for mark in self.marks)

    def unsatisfied(self) -> list[PendingMark]:
        """The marks for a change its restarts have not satisfied yet."""
        return [mark for mark in self.marks if not mark.satisfied(self.restarted_for)]

    def last_restart(self, now: dt.datetime) -> dt.datetime | None:
        """restarter's last restart, for the timer's decision and ``plan``
        (``last_restart_seconds``)."""
        seconds = _own_restart(self.restart_ts, now.timestamp())
        return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)

    def restart_for(self, marked: PendingState) -> int | None:
        """The restart-ts of a restart (recorded here) for every mark of ``marked``: each
        change recorded, the restart at or after each stamp; else None. Set: a restart was
        sent for these marks (one whose answer was lost), not a clear."""
        restarted = self.restart_ts
        if not marked.marks or restarted is None:
            return None
        for mark in marked.marks:
            if not (
                mark.satisfied(self.restarted_for)
                and mark.since is not None
                and restarted >= mark.since
            ):
                return None
        return restarted


_MARK_SLOTS = ((keys.PENDING_MARK + "/", "since"), (keys.WINDOW_MARK + "/", "window"))


def read(
    annotations: Mapping[str, str] | None, defaults: WindowDefaults | None = None
) -> PendingState:
    """A workload's pending state. ``defaults``: the operator's zone and length, which a
    ``now`` mark (naming neither) is read in."""
    found = annotations or {}
    tokens: dict[str, dict[str, str]] = {}
    for key, value in found.items():
        for prefix, slot in _MARK_SLOTS:
            if key.startswith(prefix):
                tokens.setdefault(key[len(prefix) :], {})[slot] = value
    zone, length = _NO_DEFAULTS if defaults is None else (defaults.timezone, defaults.window_length)
    return PendingState(
        marks=tuple(
            parse_mark(token, slots.get("since"), slots.get("window"), zone, length)
            for token, slots in sorted(tokens.items())
        ),
        restarted_for=_restarted_for(found.get(keys.RESTARTED_FOR)),
        restart_ts=keys.epoch_seconds(found.get(keys.RESTART_TS)),
        opted_out=found.get(keys.IGNORE) == "true",
        deadline=_earliest_deadline(found),
    )


def last_restart_seconds(annotations: Mapping[str, str] | None, now: float) -> int | None:
    """restarter's last restart of a workload (``restart-ts``, epoch seconds), for pacing,
    which reads it alone of many workloads: ``read(annotations).last_restart``'s rule."""
    return _own_restart(keys.epoch_seconds((annotations or {}).get(keys.RESTART_TS)), now)


def _own_restart(seconds: int | None, now: float) -> int | None:
    """A restart-ts as restarter's own: None without one, and for a value more than
    ``RESTART_TS_AHEAD`` seconds after ``now``: restarter did not write it (it writes its
    own ``now``), and it is ignored rather than allowed to block every window (and hold a
    pacing slot) until then."""
    if seconds is None or seconds > now + RESTART_TS_AHEAD:
        return None
    return seconds


def restarted_for(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The changes (mark token → change id) restarter's restarts of a workload satisfied:
    ``read(annotations).restarted_for``, for a reader that needs nothing else."""
    return _restarted_for((annotations or {}).get(keys.RESTARTED_FOR))


def parse_mark(
    token: str,
    since: str | None,
    value: str | None,
    default_zone: str = _NO_DEFAULTS[0],
    default_length: dt.timedelta = _NO_DEFAULTS[1],
) -> PendingMark:
    """One mark from its pending-restart value (``since``) and its restart-at JSON."""
    seen = keys.epoch_seconds(since)
    if value is None:
        return PendingMark(token, seen, None, problem="pending mark without its restart-at mark")
    try:
        decoded: Any = json.loads(value)
    except ValueError:
        decoded = None
    # The fields beside the window are read only from an object written as one.
    fields: Mapping[str, Any] = (
        decoded if value.startswith("{") and isinstance(decoded, dict) else {}
    )
    try:
        request = windows.from_mark_fields(decoded, value, default_zone, default_length)
        problem = None
    except ScheduleError as error:
        request, problem = None, str(error)
    wave = _number(fields.get("wave"))
    return PendingMark(
        token,
        seen,
        value,
        change=_text(fields.get("change")),
        source=_text(fields.get("source")),
        wave=int(wave) if wave in (FIRST, REST) else None,
        quiet=max(0.0, _number(fields.get("quiet")) or 0.0),
        named_keys=_named_keys(fields),
        request=request,
        problem=problem,
    )


def _text(found: Any) -> str | None:
    return found if isinstance(found, str) else None


def _number(found: Any) -> float | None:
    return float(found) if isinstance(found, int | float) and not isinstance(found, bool) else None


def _named_keys(fields: Mapping[str, Any]) -> tuple[tuple[str, ...], int] | None:
    """None when the mark names no keys (they were unknown, or restarter wrote it before
    key-level dependencies)."""
    names, more = fields.get("keys"), fields.get("moreKeys", 0)
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return None
    return tuple(names), more if isinstance(more, int) and more > 0 else 0


def _restarted_for(text: str | None) -> dict[str, str]:
    try:
        recorded = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {k: v for k, v in recorded.items() if isinstance(k, str) and isinstance(v, str)}


def _earliest_deadline(annotations: Mapping[str, str]) -> certificates.Deadline | None:
    """The earliest deadline stamped on a workload (``certificates.stamp_deadline``); None
    when it has none that can be read."""
    earliest: certificates.Deadline | None = None
    prefix = keys.DEADLINE + "/"
    for key, value in annotations.items():
        if not key.startswith(prefix):
            continue
        seconds = keys.epoch_seconds(key[len(prefix) :])
        try:
            fields = json.loads(value)
            not_after = certificates.parse_instant(fields.get("notAfter"))
            source = fields.get("source")
        except (ValueError, AttributeError):
            continue
        if seconds is None or not_after is None or not isinstance(source, str):
            continue
        deadline = certificates.Deadline(
            dt.datetime.fromtimestamp(seconds, dt.UTC), not_after, source
        )
        if earliest is None or deadline.at < earliest.at:
            earliest = deadline
    return earliest
