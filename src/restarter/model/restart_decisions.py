"""The timer's decision on a pending workload: restart now, wait for a window, clear the
marks, or report why not; and the one atomic patch that restarts it (or clears it) and
leaves kopf's timer."""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import certificates, keys, kinds, pending
from restarter.model.kinds import DEPLOYMENTS, Restart, WorkloadKind
from restarter.model.pending import PendingMark, PendingState
from restarter.model.stamps import MAX_RECORDED
from restarter.model.windows import (
    Immediately,
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


def decide_restart(
    workload: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime
) -> RestartDecision:
    """Restart now, wait, or report why not; the patch is one atomic merge patch. The
    workload's pending state is read once (``pending.read``); every step reads that."""
    metadata = workload.get("metadata", {})
    annotations = metadata.get("annotations") or {}
    kind = kinds.of_body(workload)
    state = pending.read(annotations, defaults)
    sources = state.tokens
    if state.opted_out:
        return RestartDecision(
            Action.OPTED_OUT, patch=clear_patch(annotations, metadata, kind), sources=sources
        )
    # A mark stamped again for a change this workload already restarted for (a fan-out
    # resumed after a crash, or retried after a refused stamp) asks for nothing.
    marks = state.unsatisfied()
    if not marks:
        return RestartDecision(
            Action.SATISFIED, patch=clear_patch(annotations, metadata, kind), sources=sources
        )
    requested = [(mark, mark.request.window()) for mark in marks if mark.request is not None]
    problems = tuple(f"{mark.token}: {mark.problem}" for mark in marks if mark.problem)
    if not requested:
        return RestartDecision(Action.INVALID, sources=sources, problems=problems)
    next_start = earliest([window for _, window in requested], now).next_start(now)
    timing = _timing(requested, marks, state, now)
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
    previous = _restarted_at_of(workload, kind)
    return RestartDecision(
        Action.RESTART,
        patch=restart_patch(annotations, metadata, now, previous, kind, state=state),
        next_start=next_start,
        sources=sources,
        problems=problems,
        due=timing.due,
        closes=timing.closes,
        deadline=timing.deadline,
    )


@dataclass(frozen=True)
class _Timing:
    """When a workload with readable marks restarts: ``due`` when it is due now."""

    due: dt.datetime | None = None
    closes: dt.datetime | None = None
    deadline: certificates.Deadline | None = None
    next_due: dt.datetime | None = None
    quiet_until: dt.datetime | None = None


def _timing(
    requested: list[tuple[PendingMark, Window]],
    marks: list[PendingMark],
    state: PendingState,
    now: dt.datetime,
) -> _Timing:
    """In order: a window open now (once its sources are quiet), a certificate deadline
    passed (it wins over the quiet time, and is never later than a window), or the
    earliest instant one of them can restart it."""
    last = state.last_restart(now)
    open_now = [(mark, window) for mark, window in requested if is_due(window, now, last)]
    # A certificate deadline moves a restart before its window, never after it.
    early = state.deadline
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


def quiet_until(marks: Iterable[PendingMark]) -> dt.datetime | None:
    """When every source of the marks has been quiet for its quiet time (each mark's
    own); None when no mark asks for one."""
    ends = [mark.since + mark.quiet for mark in marks if mark.since is not None and mark.quiet > 0]
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
    open_now: list[tuple[PendingMark, Window]], now: dt.datetime
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
    *,
    state: PendingState | None = None,
) -> dict[str, Any]:
    """restartedAt on the pod template, restart-ts, marks, label, finalizer: one request
    (``state``: the annotations' pending state, when the caller has read it).

    A Rollout gets ``spec.restartAt`` instead: Argo Rollouts replaces its pods when that
    time is past and later than its ``status.restartedAt``. The changes the marks were
    for are added to restarted-for, so a mark stamped again for one of them is cleared,
    not restarted for a second time.
    """
    patch = clear_patch(annotations, metadata, kind)
    patch["metadata"]["annotations"][keys.RESTART_TS] = str(int(now.timestamp()))
    state = state or pending.read(annotations)
    now_for = {mark.token: mark.change for mark in state.marks if mark.change}
    earlier = [item for item in state.restarted_for.items() if item[0] not in now_for]
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
