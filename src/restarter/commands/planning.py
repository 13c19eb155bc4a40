"""What is pending and when it restarts: the rows of ``restarter plan`` and their renderings.

Pure: workloads come in as plain dicts with their resource plural, ``now`` as an argument.
One row per pending source of a workload. A workload restarts at the earliest next
restart of its sources (one rollout satisfies them all), so every row of a workload
shows that same instant, in the zone of the row's own window and in UTC.

JSON (``-o json``) is a list of rows, one object each, sorted like the table::

    {"namespace": "shop", "kind": "Deployment", "name": "web",
     "source": "Secret/db", "mark": "secret.db", "changedKeys": ["password"],
     "changedAt": "2025-01-01T10:00:00Z",
     "window": "03.00 Europe/Warsaw (1h long)", "windowFrom": "source",
     "timezone": "Europe/Warsaw",
     "nextRestart": "2025-01-02T03:00:00+01:00", "nextRestartUtc": "2025-01-02T02:00:00Z",
     "state": "waiting", "notes": []}

``windowFrom`` says whose window it is: ``source`` (the source's ``restart-at`` label),
``workload`` (the workload's ``restarter.io/restart-at``: a workload that opted in) or
``reloader-default`` (the operator's window for Reloader's annotations).
``changedKeys`` names the changed keys of the source that the workload reads (never
their values; at most ``windows.MARK_KEYS``, a note says how many more). It, ``changedAt``,
``window``, ``timezone`` and both ``nextRestart`` fields are null when unknown; ``state``
is one of ``STATES``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from restarter.model import certificates, holds, keys, pending, restart_decisions, stamps, waves
from restarter.model.holds import Hold
from restarter.model.kinds import WORKLOAD_KINDS
from restarter.model.pending import PendingMark, PendingState
from restarter.model.windows import next_restart, parse_zone
from restarter.services.settings import Settings

WAITING = "waiting"  # the next restart is in the future
DUE = "due"  # a window is open: the operator's next tick restarts it
PAUSED = "paused"  # a paused Deployment: a due restart waits until it is resumed
OPTED_OUT = "opted-out"  # restarter.io/ignore: the operator drops the marks, restarts nothing
INVALID = "invalid"  # this mark cannot be read; it never triggers a restart
DONE = "done"  # already restarted for this very change: the operator drops the mark
HELD = "held"  # a restarter.io/hold (or the operator's --hold) keeps it waiting, as of now
QUIETING = "quieting"  # due, but a source changed less than its quiet time ago
NEXT_WAVE = "next-wave"  # due, but its change's first wave is still being judged
HALTED = "halted"  # due, but its change is halted: its first wave failed with the new data
STATES = (WAITING, DUE, PAUSED, OPTED_OUT, INVALID, DONE, HELD, QUIETING, NEXT_WAVE, HALTED)


@dataclass(frozen=True)
class PlanRow:
    """One pending source of one workload, and when that workload restarts."""

    namespace: str
    kind: str
    """``Deployment``, ``StatefulSet`` or ``DaemonSet``."""

    name: str
    source: str
    """``Secret/db`` as the mark names it; the mark's token for a mark that does not."""

    mark: str
    """The token after the ``/`` in the mark's keys (``secret.db``)."""

    changed_at: dt.datetime | None
    """When the operator saw the change; None when the pending-restart mark is unreadable."""

    changed_keys: tuple[str, ...] | None
    """The changed keys the workload reads, as the mark names them; None when unknown."""

    window: str | None
    """The window the source asked for, described; None for an unreadable mark."""

    window_from: str | None
    """Whose window it is (``windows.ORIGINS``); None for an unreadable mark."""

    timezone: str | None
    """The zone the window is read in, and ``next_restart`` is shown in."""

    next_restart: dt.datetime | None
    """When the workload restarts (earliest of its sources); None if it never will."""

    state: str
    notes: tuple[str, ...] = ()


def _source(mark: PendingMark) -> str:
    return mark.source or mark.token


def _notes(
    mark: PendingMark, annotations: Mapping[str, str], restarted_by: str | None
) -> tuple[str, ...]:
    notes = []
    if mark.since is None:
        if f"{keys.PENDING_MARK}/{mark.token}" in annotations:
            notes.append("pending-restart mark is not epoch seconds")
        else:
            notes.append("restart-at mark without its pending-restart mark")
    if mark.problem is not None:
        notes.append(f"unreadable mark: {mark.problem}")
    if mark.named_keys is not None and mark.named_keys[1]:
        notes.append(f"and {mark.named_keys[1]} more changed key(s)")
    if restarted_by is not None and restarted_by != _source(mark):
        # One rollout clears every mark, so another source's window decides for this one.
        verb = "dropped when it restarts" if mark.problem else "restarts"
        notes.append(f"{verb} with {restarted_by}")
    return tuple(notes)


@dataclass(frozen=True)
class _Workload:
    """What every row of one workload shares: when it restarts, and why not now."""

    namespace: str
    annotations: Mapping[str, str]
    done: frozenset[str]
    """The tokens of the marks for changes it already restarted for."""

    restarted_by: str | None
    """The source whose window comes first (one rollout satisfies every mark)."""

    restart_at: dt.datetime | None
    early: certificates.Deadline | None
    """The certificate deadline that moves the restart before that window, if any."""

    quiet: dt.datetime | None
    opted_out: bool
    paused: bool
    hold: Hold | None


def _workload(
    workload: Mapping[str, Any], state: PendingState, now: dt.datetime, hold: Hold | None
) -> _Workload:
    metadata = workload.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    last = state.last_restart(now)
    done = frozenset(m.token for m in state.marks if m.satisfied(state.restarted_for))
    restarts = {
        _source(mark): next_restart(mark.request.window(), now, last)
        for mark in state.marks
        if mark.request is not None and mark.token not in done
    }
    # Ties go to the first source by name, so the note is stable.
    restarted_by = min(sorted(restarts), key=lambda source: restarts[source], default=None)
    restart_at = None if restarted_by is None else restarts[restarted_by]
    # A certificate deadline moves the restart before its window (as the timer decides).
    early = state.deadline
    if early is not None and restart_at is not None and early.at < restart_at:
        restart_at = early.at
    else:
        early = None
    return _Workload(
        namespace=metadata.get("namespace", ""),
        annotations=annotations,
        done=done,
        restarted_by=restarted_by,
        restart_at=restart_at,
        early=early,
        quiet=restart_decisions.quiet_until(state.marks),
        opted_out=state.opted_out,
        paused=bool((workload.get("spec") or {}).get("paused")),
        hold=hold,
    )


def _state(mark: PendingMark, of: _Workload, now: dt.datetime) -> tuple[str, list[str]]:
    """One row's state, and the notes that say why (beyond those of its mark)."""
    hold, restart_at = of.hold, of.restart_at
    if of.opted_out:
        return OPTED_OUT, [f"{keys.IGNORE} is true: the marks are dropped, nothing restarts"]
    if mark.token in of.done:
        return DONE, ["already restarted for this change: the mark is dropped"]
    if mark.request is None:
        return INVALID, []
    if of.paused:
        return PAUSED, ["paused: a due restart waits until the Deployment is resumed"]
    if hold is not None and hold.where == holds.BREAKER:
        if not hold.halted:
            return NEXT_WAVE, [hold.describe()]
        kind, _, name = hold.name.partition("/")
        resume = f"restarter resume -n {of.namespace} {kind.lower()}/{name}"
        return HALTED, [hold.describe(), f"fix the data, or resume: {resume}"]
    if hold is not None:
        return HELD, [f"{hold.describe()}; it restarts in a window open once it is removed"]
    if restart_at is None or restart_at > now:
        return WAITING, []
    if of.early is None and of.quiet is not None and of.quiet > now:
        return QUIETING, [
            f"restarts once its sources have been quiet, at {of.quiet:%H:%M:%S} UTC, if a "
            "window is open then"
        ]
    return DUE, []


def workload_rows(
    plural: str,
    workload: Mapping[str, Any],
    now: dt.datetime,
    defaults: Settings,
    hold: Hold | None = None,
) -> list[PlanRow]:
    """The rows of one workload; none when it carries no pending mark. ``hold``: what holds
    its restarts now, if anything."""
    metadata = workload.get("metadata") or {}
    if not stamps.has_pending(metadata.get("annotations")):
        return []
    state = pending.read(metadata["annotations"], defaults)
    of = _workload(workload, state, now, hold)
    rows = []
    for mark in state.marks:
        notes = list(_notes(mark, of.annotations, None if of.opted_out else of.restarted_by))
        waiting = not of.opted_out and mark.token not in of.done
        if of.early is not None and waiting:
            notes.append(of.early.describe(now))
        if mark.wave is not None and mark.token not in of.done:
            notes.append(
                "first wave of its change" if mark.wave == waves.FIRST else "after its first wave"
            )
        row_state, why = _state(mark, of, now)
        rows.append(_row(plural, metadata, mark, of, row_state, (*notes, *why)))
    return rows


def _row(
    plural: str,
    metadata: Mapping[str, Any],
    mark: PendingMark,
    of: _Workload,
    state: str,
    notes: tuple[str, ...],
) -> PlanRow:
    request = mark.request
    since = mark.since
    return PlanRow(
        namespace=of.namespace,
        kind=WORKLOAD_KINDS[plural],
        name=metadata.get("name", ""),
        source=_source(mark),
        mark=mark.token,
        changed_at=None if since is None else dt.datetime.fromtimestamp(since, dt.UTC),
        changed_keys=None if mark.named_keys is None else mark.named_keys[0],
        window=None if request is None else request.describe(),
        window_from=None if request is None else request.origin,
        timezone=None if request is None else request.timezone,
        next_restart=None if of.opted_out or request is None or state == DONE else of.restart_at,
        state=state,
        notes=notes,
    )


def plan(
    workloads: Iterable[tuple[str, Mapping[str, Any]]],
    now: dt.datetime,
    default_zone: str,
    default_length: dt.timedelta,
    hold_of: Callable[[Mapping[str, Any]], Hold | None] = lambda _: None,
) -> list[PlanRow]:
    """Rows of every pending workload, sorted; ``now`` marks are shown in the default zone.
    ``hold_of`` tells what holds a workload now."""
    defaults = Settings(timezone=default_zone, window_length=default_length)
    rows = [
        row
        for plural, item in workloads
        for row in workload_rows(plural, item, now, defaults, hold_of(item))
    ]
    return sorted(rows, key=lambda row: (row.namespace, row.kind, row.name, row.source))


def _utc(instant: dt.datetime | None) -> str | None:
    return None if instant is None else f"{instant.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"


def _local(instant: dt.datetime | None, zone: str | None) -> dt.datetime | None:
    return None if instant is None or zone is None else instant.astimezone(parse_zone(zone))


def to_json(rows: Sequence[PlanRow]) -> str:
    """The documented JSON shape (see the module docstring); ``[]`` when nothing is pending."""
    items = []
    for row in rows:
        local = _local(row.next_restart, row.timezone)
        items.append(
            {
                "namespace": row.namespace,
                "kind": row.kind,
                "name": row.name,
                "source": row.source,
                "mark": row.mark,
                "changedKeys": None if row.changed_keys is None else list(row.changed_keys),
                "changedAt": _utc(row.changed_at),
                "window": row.window,
                "windowFrom": row.window_from,
                "timezone": row.timezone,
                "nextRestart": None if local is None else local.isoformat(timespec="seconds"),
                "nextRestartUtc": _utc(row.next_restart),
                "state": row.state,
                "notes": list(row.notes),
            }
        )
    return json.dumps(items, indent=2)


def _minutes(instant: dt.datetime | None) -> str:
    """``2025-01-02 03:00 CET``: the zone's abbreviation tells the reader which clock."""
    return "-" if instant is None else f"{instant:%Y-%m-%d %H:%M %Z}"


def to_table(rows: Sequence[PlanRow], with_namespace: bool) -> str:
    """Columns like kubectl's: left-aligned, padded by the widest cell, notes last."""
    header = ["NAMESPACE"] if with_namespace else []
    header += ["WORKLOAD", "SOURCE", "KEYS", "CHANGED", "WINDOW", "FROM", "NEXT RESTART"]
    header += ["NEXT RESTART UTC"]
    header += ["STATE", "NOTES"]
    lines = [header]
    for row in rows:
        cells = [
            f"{row.kind}/{row.name}",
            row.source,
            "unknown" if row.changed_keys is None else ",".join(row.changed_keys),
            _minutes(row.changed_at and row.changed_at.astimezone(dt.UTC)),
            row.window or "-",
            row.window_from or "-",
            _minutes(_local(row.next_restart, row.timezone)),
            _minutes(row.next_restart and row.next_restart.astimezone(dt.UTC)),
            row.state,
            "; ".join(row.notes),
        ]
        lines.append(([row.namespace] if with_namespace else []) + cells)
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
