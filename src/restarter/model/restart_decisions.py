"""The timer's decision on a pending workload: restart now, wait for a window, clear the
marks, or report why not; and the one atomic patch that restarts it (or clears it) and
leaves kopf's timer."""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import certificates, keys, kinds, waves
from restarter.model.kinds import DEPLOYMENTS, Restart, WorkloadKind
from restarter.model.stamps import (
    MAX_RECORDED,
    Mark,
    mark_window,
    opted_out,
    pending_marks,
    restarted_for,
    satisfied,
)
from restarter.model.windows import (
    Immediately,
    ScheduleError,
    Window,
    WindowDefaults,
    earliest,
    is_due,
    next_restart,
)


class Action(enum.Enum):
    WAIT = "wait"
    RESTART = "restart"
    PAUSED = "paused"
    INVALID = "invalid"
    OPTED_OUT = "opted-out"  # clear the marks, restart nothing
    SATISFIED = "satisfied"  # every mark is for a change already restarted for: clear them


@dataclass(frozen=True)
class RestartDecision:
    action: Action
    patch: dict[str, Any] = field(default_factory=dict)
    next_start: dt.datetime | None = None
    sources: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    due: dt.datetime | None = None
    """When the restart became due: the start of the open occurrence (for ``now``, when the
    change was seen); pacing lets the earliest due go first."""
    closes: dt.datetime | None = None
    """When the last open window closes; None for ``now`` (it never closes)."""
    next_due: dt.datetime | None = None
    """For WAIT: the earliest instant a window can restart it (a window open now but that
    already restarted it counts from its next start)."""
    deadline: certificates.Deadline | None = None
    """For RESTART: the certificate deadline that moved it before its window (no window
    of its marks is open)."""
    quiet_until: dt.datetime | None = None
    """For WAIT: a window is open, but a source changed less than its quiet time ago; it
    restarts at this instant if a window is still open then."""


#: Seconds a ``restart-ts`` may lie ahead of ``now`` and still be restarter's own: the
#: clocks of two replicas, or a ``now`` read before the restart's (the pacer's streams).
RESTART_TS_AHEAD = 60


def last_restart_seconds(annotations: Mapping[str, str] | None, now: float) -> int | None:
    """restarter's last restart of a workload (``restart-ts``, epoch seconds): the one
    reader of that annotation, for the timer's decision, ``plan`` and pacing alike.

    None without one, and for a value more than ``RESTART_TS_AHEAD`` seconds after
    ``now``: restarter did not write it (it writes its own ``now``), and it is ignored
    rather than allowed to block every window (and hold a pacing slot) until then.
    """
    seconds = keys.epoch_seconds((annotations or {}).get(keys.RESTART_TS))
    if seconds is None or seconds > now + RESTART_TS_AHEAD:
        return None
    return seconds


def last_restart(annotations: Mapping[str, str], now: dt.datetime) -> dt.datetime | None:
    """``last_restart_seconds`` as an instant."""
    seconds = last_restart_seconds(annotations, now.timestamp())
    return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)


def decide_restart(
    workload: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime
) -> RestartDecision:
    """Restart now, wait, or report why not; the patch is one atomic merge patch."""
    metadata = workload.get("metadata", {})
    annotations = metadata.get("annotations") or {}
    kind = kinds.of_body(workload)
    marks = pending_marks(annotations)
    sources = tuple(mark.token for mark in marks)
    if opted_out(annotations):
        return RestartDecision(
            Action.OPTED_OUT, patch=clear_patch(annotations, metadata, kind), sources=sources
        )
    # A mark stamped again for a change this workload already restarted for (a fan-out
    # resumed after a crash, or retried after a refused stamp) asks for nothing.
    recorded = restarted_for(annotations)
    marks = [mark for mark in marks if not satisfied(mark, recorded)]
    if not marks:
        return RestartDecision(
            Action.SATISFIED, patch=clear_patch(annotations, metadata, kind), sources=sources
        )
    requested, problems = _windows_of(marks, defaults)
    if not requested:
        return RestartDecision(Action.INVALID, sources=sources, problems=problems)
    next_start = earliest([window for _, window in requested], now).next_start(now)
    timing = _timing(requested, marks, annotations, now)
    if timing.due is None:
        return RestartDecision(
            Action.WAIT,
            next_start=next_start,
            sources=sources,
            problems=problems,
            next_due=timing.next_due,
            quiet_until=timing.quiet_until,
        )
    if (workload.get("spec") or {}).get("paused"):
        return RestartDecision(
            Action.PAUSED, next_start=next_start, sources=sources, problems=problems
        )
    return RestartDecision(
        Action.RESTART,
        patch=restart_patch(annotations, metadata, now, _restarted_at_of(workload, kind), kind),
        next_start=next_start,
        sources=sources,
        problems=problems,
        due=timing.due,
        closes=timing.closes,
        deadline=timing.deadline,
    )


def _windows_of(
    marks: list[Mark], defaults: WindowDefaults
) -> tuple[list[tuple[Mark, Window]], tuple[str, ...]]:
    """The window each mark asks for, and what is wrong with those that cannot be read."""
    requested: list[tuple[Mark, Window]] = []
    problems: list[str] = []
    for mark in marks:
        try:
            requested.append((mark, mark_window(mark, defaults).window()))
        except ScheduleError as error:
            problems.append(f"{mark.token}: {error}")
    return requested, tuple(problems)


@dataclass(frozen=True)
class _Timing:
    """When a workload with readable marks restarts: ``due`` when it is due now."""

    due: dt.datetime | None = None
    closes: dt.datetime | None = None
    deadline: certificates.Deadline | None = None
    next_due: dt.datetime | None = None
    quiet_until: dt.datetime | None = None


def _timing(
    requested: list[tuple[Mark, Window]],
    marks: list[Mark],
    annotations: Mapping[str, str],
    now: dt.datetime,
) -> _Timing:
    """In order: a window open now (once its sources are quiet), a certificate deadline
    passed (it wins over the quiet time, and is never later than a window), or the
    earliest instant one of them can restart it."""
    last = last_restart(annotations, now)
    open_now = [(mark, window) for mark, window in requested if is_due(window, now, last)]
    # A certificate deadline moves a restart before its window, never after it.
    early = certificates.earliest_deadline(annotations)
    forced = early is not None and early.at <= now
    quiet_ends = quiet_until(marks)
    if open_now and quiet_ends is not None and now < quiet_ends and not forced:
        # A change that arrives within the quiet time joins the same restart.
        next_due = quiet_ends if early is None else min(quiet_ends, early.at)
        return _Timing(next_due=next_due, quiet_until=quiet_ends)
    if open_now:
        due, closes = _due_and_closes(open_now, now)
        return _Timing(due=due, closes=closes)
    if early is not None and forced:
        return _Timing(due=early.at, deadline=early)  # it never closes: pacing may hold it
    next_due = min(next_restart(window, now, last) for _, window in requested)
    return _Timing(next_due=next_due if early is None else min(next_due, early.at))


def quiet_until(marks: list[Mark]) -> dt.datetime | None:
    """When every source of the marks has been quiet for its quiet time (each mark's own,
    ``waves.quiet_of_mark``); None when no mark asks for one."""
    ends = [
        mark.since + quiet
        for mark in marks
        if mark.since is not None and (quiet := waves.quiet_of_mark(mark.window)) > 0
    ]
    return dt.datetime.fromtimestamp(max(ends), dt.UTC) if ends else None


def _restarted_at_of(workload: Mapping[str, Any], kind: WorkloadKind) -> str | None:
    spec = workload.get("spec") or {}
    if kind.restart is Restart.RESTART_AT:
        value = spec.get("restartAt")
    else:
        template = (spec.get("template") or {}).get("metadata") or {}
        value = (template.get("annotations") or {}).get(keys.KUBECTL_RESTARTED_AT)
    return value if isinstance(value, str) else None


def _due_and_closes(
    open_now: list[tuple[Mark, Window]], now: dt.datetime
) -> tuple[dt.datetime, dt.datetime | None]:
    """The earliest instant the workload became due; the latest its open windows close."""
    starts: list[dt.datetime] = []
    ends: list[dt.datetime | None] = []
    for mark, window in open_now:
        occurrence = window.occurrence_at(now)
        assert occurrence is not None  # is_due said it is open
        if isinstance(window, Immediately):
            seen = mark.since
            starts.append(now if seen is None else dt.datetime.fromtimestamp(seen, dt.UTC))
            ends.append(None)
        else:
            starts.append(occurrence.start)
            ends.append(occurrence.end)
    closes = None if None in ends else max(end for end in ends if end is not None)
    return min(starts), closes


def clear_patch(
    annotations: Mapping[str, str], metadata: Mapping[str, Any], kind: WorkloadKind = DEPLOYMENTS
) -> dict[str, Any]:
    """Strategic merge patch: every mark, the pending label and our finalizer removed.

    Conditional on the resourceVersion: a mark stamped after we read the object makes
    the patch fail (409) rather than be erased unseen. The finalizer goes in the same
    request because, once the label is gone, kopf's label-selected watch no longer sees
    the workload and so would never remove it.
    """
    patched = leave_timer(metadata, kind)
    patched["annotations"] = {
        key: None for key in annotations if key.startswith(keys.MARK_PREFIXES)
    }
    return {"metadata": patched}


def leave_timer(metadata: Mapping[str, Any], kind: WorkloadKind) -> dict[str, Any]:
    """Metadata patch leaving kopf's timer: no pending label, no finalizer of ours, at the
    version read. For a kind patched by JSON merge (a Rollout) the finalizer list is sent
    whole, without ours: the resourceVersion makes that safe."""
    patched: dict[str, Any] = {
        "resourceVersion": metadata.get("resourceVersion"),
        "labels": {keys.PENDING_LABEL: None},
    }
    finalizers = list(metadata.get("finalizers") or [])
    if kind.merges_finalizers:
        # Removed even if the body read lacks it: kopf may have added it since, and
        # removing an absent entry is a no-op.
        patched["$deleteFromPrimitiveList/finalizers"] = [keys.FINALIZER]
    elif keys.FINALIZER in finalizers:
        patched["finalizers"] = [name for name in finalizers if name != keys.FINALIZER]
    return patched


def restart_patch(
    annotations: Mapping[str, str],
    metadata: Mapping[str, Any],
    now: dt.datetime,
    previous: str | None = None,
    kind: WorkloadKind = DEPLOYMENTS,
) -> dict[str, Any]:
    """restartedAt on the pod template, restart-ts, marks, label, finalizer: one request.

    A Rollout gets ``spec.restartAt`` instead: Argo Rollouts replaces its pods when that
    time is past and later than its ``status.restartedAt``. The changes the marks were
    for are added to restarted-for, so a mark stamped again for one of them is cleared,
    not restarted for a second time.
    """
    patch = clear_patch(annotations, metadata, kind)
    patch["metadata"]["annotations"][keys.RESTART_TS] = str(int(now.timestamp()))
    now_for = {mark.token: mark.change for mark in pending_marks(annotations) if mark.change}
    earlier = [item for item in restarted_for(annotations).items() if item[0] not in now_for]
    recorded = dict(earlier[: max(0, MAX_RECORDED - len(now_for))]) | now_for
    if recorded:
        patch["metadata"]["annotations"][keys.RESTARTED_FOR] = json.dumps(
            recorded, sort_keys=True, separators=(",", ":")
        )
    if kind.restart is Restart.RESTART_AT:
        return {**patch, "spec": {"restartAt": rollout_restart_at(now, previous)}}
    return {
        **patch,
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {keys.KUBECTL_RESTARTED_AT: restarted_at(now, previous)}
                }
            }
        },
    }


def restarted_at(now: dt.datetime, previous: str | None) -> str:
    """restartedAt for a restart at ``now``: RFC 3339 seconds, as kubectl writes it, one
    second later when the pod template already carries that value (two restarts within a
    second), or the template would not change and nothing would roll."""
    value = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if value == previous:
        value = (now + dt.timedelta(seconds=1)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def rollout_restart_at(now: dt.datetime, previous: str | None) -> str:
    """spec.restartAt for a Rollout restarted at ``now``: the next whole second.

    Argo Rollouts keeps every pod whose creationTimestamp (whole seconds) is not before
    restartAt. A pod created earlier in this same second may hold what changed in its
    old form, so restartAt is the second after ``now``: Argo waits for it (under a second)
    and then replaces every pod created up to ``now``.
    """
    return restarted_at(now.replace(microsecond=0) + dt.timedelta(seconds=1), previous)
