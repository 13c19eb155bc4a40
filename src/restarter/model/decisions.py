"""What to do and what to patch: pure functions of objects, settings and ``now``."""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import certificates, keys, windows
from restarter.model.checksums import (
    EXACT_BUDGET,
    SALT_BYTES,
    ChangedKeys,
    Digests,
    bucket_digests,
    changes,
    checksum,
    fitting_digests,
    new_salt,
    read_key_digests,
)
from restarter.model.references import SOURCE_KINDS, KeyNames
from restarter.model.schedule import (
    Immediately,
    ScheduleError,
    Window,
    earliest,
    is_due,
    next_restart,
)
from restarter.model.windows import WindowDefaults, WindowRequest


class Change(enum.Enum):
    BASELINE = "baseline"  # first sight: record the checksum, restart nothing
    UNCHANGED = "unchanged"
    CHANGED = "changed"


def classify(source: Mapping[str, Any], remembered: str | None = None) -> tuple[Change, str]:
    """Compare a source's data with its recorded checksum; return the new checksum too.

    ``remembered`` is the checksum this operator saw for the same name earlier in its run:
    a source replaced or re-created with new data has lost its annotation but still
    counts as changed.
    """
    current = checksum(source.get("data"), source.get("binaryData"))
    recorded = (source.get("metadata", {}).get("annotations") or {}).get(keys.CHECKSUM)
    if recorded is None:
        changed = remembered is not None and remembered != current
        return (Change.CHANGED if changed else Change.BASELINE), current
    return (Change.UNCHANGED if recorded == current else Change.CHANGED), current


def recorded_key_digests(metadata: Mapping[str, Any]) -> Digests | None:
    """The source's key digests (either form), if they describe the data its checksum was
    taken of."""
    annotations = metadata.get("annotations") or {}
    digests = read_key_digests(annotations.get(keys.KEY_DIGESTS))
    if digests is None or digests.checksum != annotations.get(keys.CHECKSUM):
        return None  # none yet (restarter 0.x), or the checksum was recorded without them
    return digests


def key_digests_current(source: Mapping[str, Any], current: str) -> bool:
    """True when the source's key digests are recorded for its data now, in a compact form
    (an annotation of one digest per key past ``EXACT_BUDGET``, as restarter wrote before
    it kept digests per bucket, is recorded again, smaller)."""
    metadata = source.get("metadata") or {}
    digests = recorded_key_digests(metadata)
    if digests is None or digests.checksum != current:
        return False
    recorded = (metadata.get("annotations") or {}).get(keys.KEY_DIGESTS) or ""
    return len(recorded) <= EXACT_BUDGET


#: The apiserver's limit on all of an object's annotations together: the bytes of every
#: key and value (``TotalAnnotationSizeLimitB``).
ANNOTATIONS_LIMIT = 256 * 1024
#: Bytes left unused below it: another writer may add an annotation between restarter's
#: read of the source and its patch.
ANNOTATIONS_MARGIN = 1024
#: The annotations the checksum patch sets or removes.
_RECORDED = (keys.CHECKSUM, keys.KEY_DIGESTS, keys.CHANGE)


def annotation_bytes(annotations: Mapping[str, str], skip: tuple[str, ...] = ()) -> int:
    """The bytes annotations take, as the apiserver counts them against its limit."""
    return sum(
        len(key.encode()) + len(value.encode())
        for key, value in annotations.items()
        if key not in skip
    )


def digests_room(metadata: Mapping[str, Any], current: str) -> int:
    """Bytes the key-digests annotation's value may take on the source: the limit, less
    the source's other annotations, the checksum, the margin and the key's own name."""
    others = annotation_bytes(metadata.get("annotations") or {}, _RECORDED)
    recorded = len(keys.CHECKSUM) + len(current) + len(keys.KEY_DIGESTS)
    return ANNOTATIONS_LIMIT - ANNOTATIONS_MARGIN - others - recorded


@dataclass(frozen=True)
class KeyChange:
    """The key digests to record for the data now, and what changed since those recorded."""

    record: Digests | None
    """None: not even per-bucket digests fit beside the source's own annotations; only
    the checksum is recorded, and the next change affects every reader."""

    changed: ChangedKeys
    """None: unknown (no digests recorded, as after restarter 0.x): every reader counts as
    affected."""

    room: int
    """Bytes the digests annotation could take (what ``record`` None could not fit in)."""


def key_change(source: Mapping[str, Any], current: str, fresh_salt: str) -> KeyChange:
    """The key digests of the source's data now, in the most precise form that fits, and
    the keys changed since the recorded ones, as precisely as those tell.

    The recorded salt is kept; ``fresh_salt`` serves a source that has none yet.
    """
    metadata = source.get("metadata") or {}
    data, binary = source.get("data"), source.get("binaryData")
    before = recorded_key_digests(metadata)
    salt = fresh_salt if before is None else before.salt
    room = digests_room(metadata, current)
    record = fitting_digests(data, binary, salt, current, room)
    changed = None if before is None else changes(before, data, binary, current)
    return KeyChange(record, changed, room)


def bucket_annotation_bytes(current: str) -> int:
    """The bytes of a per-bucket digests annotation (the same for any data and salt)."""
    salt = new_salt(bytes(SALT_BYTES))
    return len(bucket_digests(None, None, salt, current).to_annotation())


def change_id(metadata: Mapping[str, Any], current: str) -> tuple[str, bool]:
    """The id of the change being acted on, and whether it must be recorded on the source.

    A change whose fan-out began before (the source's change annotation holds the same
    checksum) keeps the id it began with, even if the source was updated since without a
    data change; otherwise the id is the source's resourceVersion now.
    """
    begun = ((metadata.get("annotations") or {}).get(keys.CHANGE) or "").split(" ")
    if len(begun) == 2 and begun[1] == current and begun[0]:
        return begun[0], False
    return str(metadata.get("resourceVersion") or ""), True


def begin_change_patch(change: str, current: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {keys.CHANGE: f"{change} {current}"}}}


def stamp_patch(
    kind: str,
    name: str,
    seen: dt.datetime,
    request: WindowRequest,
    change: str | None = None,
    changed_keys: KeyNames = None,
) -> dict[str, Any]:
    """Merge patch marking a workload as pending for one change of the named source (the
    changed keys it reads named in the mark, never their values; None: unknown).

    Marks only: the pending label and the finalizer, which hand the workload to kopf's
    timer, come when its window opens (``admit_patch``), so a workload waiting hours for
    its window costs kopf nothing.
    """
    return {
        "metadata": {
            "annotations": {
                keys.pending_key(kind, name): str(int(seen.timestamp())),
                keys.window_key(kind, name): request.to_mark(
                    f"{SOURCE_KINDS[kind]}/{name}", change, changed_keys
                ),
            }
        }
    }


def admission_due(workload: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime) -> float:
    """Epoch seconds from which a workload with pending marks is for kopf's timer: now when
    the timer has something to do (restart, clear, or report marks it cannot read or a
    pause), else when a window it waits for can next restart it (at least a second ahead:
    a timer that finds it not due hands it back, and must not get it again at once)."""
    decision = decide_restart(workload, defaults, now)
    if decision.action is not Action.WAIT:
        return now.timestamp()
    assert decision.next_due is not None  # a WAIT always knows it
    return max(now.timestamp() + 1.0, decision.next_due.timestamp())


def admit_patch(metadata: Mapping[str, Any], rollout: bool = False) -> dict[str, Any]:
    """The pending label and our finalizer, at the version the marks were read at.

    kopf's timer selects the label. The finalizer goes in the same request (``finalizers``
    merges as a set under a strategic merge patch), so kopf finds it present and sends no
    patch of its own. A Rollout takes only a JSON merge patch, which would replace its
    whole finalizer list: there kopf's timer adds it before its first tick.
    """
    patched: dict[str, Any] = {
        "resourceVersion": metadata.get("resourceVersion"),
        "labels": {keys.PENDING_LABEL: "true"},
    }
    if not rollout:
        patched["finalizers"] = [keys.FINALIZER]
    return {"metadata": patched}


def hand_back_patch(metadata: Mapping[str, Any], rollout: bool = False) -> dict[str, Any]:
    """The pending label and our finalizer removed, the marks kept: a workload whose window
    is not open leaves kopf's timer until it is."""
    return {"metadata": _released(metadata, rollout)}


def label_repair(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The patch that removes a pending label without marks (marks removed by hand: kopf
    would keep watching for nothing), or None. A label is added only by admission."""
    labelled = keys.PENDING_LABEL in (metadata.get("labels") or {})
    if not labelled or has_pending(metadata.get("annotations")):
        return None
    # Conditional on the resourceVersion: a listed or watched body may be old, and the
    # workload stamped and admitted since.
    return {
        "metadata": {
            "resourceVersion": metadata.get("resourceVersion"),
            "labels": {keys.PENDING_LABEL: None},
        }
    }


def checksum_patch(
    value: str, digests: Digests | None = None, *, drop_digests: bool = False
) -> dict[str, Any]:
    """The checksum (and the key digests of the same data) recorded; the change annotation
    (if any) dropped: the change is done. ``drop_digests``: the recorded digests removed
    (they fit no longer, and would describe other data)."""
    annotations: dict[str, str | None] = {keys.CHECKSUM: value, keys.CHANGE: None}
    if digests is not None:
        annotations[keys.KEY_DIGESTS] = digests.to_annotation()
    elif drop_digests:
        annotations[keys.KEY_DIGESTS] = None
    return {"metadata": {"annotations": annotations}}


@dataclass(frozen=True)
class Mark:
    """One pending source on a workload, as read back from its annotations."""

    token: str
    since: int | None
    window: str | None
    change: str | None = None


_MARK_SLOTS = ((keys.PENDING_RESTART + "/", "since"), (keys.RESTART_AT + "/", "window"))


def pending_marks(annotations: Mapping[str, str] | None) -> list[Mark]:
    tokens: dict[str, dict[str, str]] = {}
    for key, value in (annotations or {}).items():
        for prefix, slot in _MARK_SLOTS:
            if key.startswith(prefix):
                tokens.setdefault(key[len(prefix) :], {})[slot] = value
    marks = []
    for token, slots in sorted(tokens.items()):
        window = slots.get("window")
        change = None if window is None else windows.change_of_mark(window)
        marks.append(Mark(token, keys.epoch_seconds(slots.get("since")), window, change))
    return marks


#: Entries kept in restarted-for: more than the sources any workload uses.
_MAX_RECORDED = 64


def restarted_for(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The changes (mark token → change id) restarter's restarts of a workload satisfied."""
    try:
        recorded = json.loads((annotations or {}).get(keys.RESTARTED_FOR) or "{}")
    except ValueError:
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {k: v for k, v in recorded.items() if isinstance(k, str) and isinstance(v, str)}


def satisfied(mark: Mark, recorded: Mapping[str, str]) -> bool:
    """True when the workload already restarted for the very change this mark is for."""
    return mark.change is not None and recorded.get(mark.token) == mark.change


def restart_for_marks(
    marked: Mapping[str, str] | None, now_annotations: Mapping[str, str] | None
) -> int | None:
    """The restart-ts of a restart for every mark of ``marked`` that ``now_annotations``
    show (each change recorded, the restart at or after each stamp), or None. Set: a
    restart was sent for these marks (one whose answer was lost), not a clear."""
    marks = pending_marks(marked)
    recorded = restarted_for(now_annotations)
    restarted = keys.epoch_seconds((now_annotations or {}).get(keys.RESTART_TS))
    if not marks or restarted is None:
        return None
    for mark in marks:
        if not (satisfied(mark, recorded) and mark.since is not None and restarted >= mark.since):
            return None
    return restarted


def has_pending(annotations: Mapping[str, str] | None) -> bool:
    """True when the workload carries any pending mark (the timer's filter)."""
    return any(key.startswith(keys.PENDING_RESTART + "/") for key in (annotations or {}))


def opted_out(annotations: Mapping[str, str] | None) -> bool:
    return (annotations or {}).get(keys.IGNORE) == "true"


def mark_window(mark: Mark, defaults: WindowDefaults) -> WindowRequest:
    """The window a mark asks for; ScheduleError when it cannot be read."""
    if mark.window is None:
        raise ScheduleError("pending mark without its restart-at mark")
    return windows.from_mark(mark.window, defaults.timezone, defaults.window_length)


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


def last_restart(annotations: Mapping[str, str], now: dt.datetime) -> dt.datetime | None:
    """The instant of restarter's last restart of a workload, from restart-ts.

    A value after ``now`` was not written by restarter (it writes its own ``now``); it is
    ignored rather than allowed to block every window until then.
    """
    seconds = keys.epoch_seconds(annotations.get(keys.RESTART_TS))
    if seconds is None:
        return None
    instant = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return instant if instant <= now else None


def decide_restart(
    workload: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime
) -> RestartDecision:
    """Restart now, wait, or report why not; the patch is one atomic merge patch."""
    metadata = workload.get("metadata", {})
    annotations = metadata.get("annotations") or {}
    rollout = is_rollout(workload)
    marks = pending_marks(annotations)
    sources = tuple(mark.token for mark in marks)
    if opted_out(annotations):
        return RestartDecision(
            Action.OPTED_OUT, patch=clear_patch(annotations, metadata, rollout), sources=sources
        )
    # A mark stamped again for a change this workload already restarted for (a fan-out
    # resumed after a crash, or retried after a refused stamp) asks for nothing.
    recorded = restarted_for(annotations)
    marks = [mark for mark in marks if not satisfied(mark, recorded)]
    if not marks:
        return RestartDecision(
            Action.SATISFIED, patch=clear_patch(annotations, metadata, rollout), sources=sources
        )
    requested: list[tuple[Mark, Window]] = []
    problems: list[str] = []
    for mark in marks:
        try:
            requested.append((mark, mark_window(mark, defaults).window()))
        except ScheduleError as error:
            problems.append(f"{mark.token}: {error}")
    if not requested:
        return RestartDecision(Action.INVALID, sources=sources, problems=tuple(problems))
    next_start = earliest([window for _, window in requested], now).next_start(now)
    last = last_restart(annotations, now)
    open_now = [(mark, window) for mark, window in requested if is_due(window, now, last)]
    # A certificate deadline moves a restart before its window, never after it.
    early = certificates.earliest_deadline(annotations)
    if open_now:
        due, closes = _due_and_closes(open_now, now)
        early = None
    elif early is not None and early.at <= now:
        due, closes = early.at, None  # it never closes: pacing may hold it, not a window
    else:
        next_due = min(next_restart(window, now, last) for _, window in requested)
        return RestartDecision(
            Action.WAIT,
            next_start=next_start,
            sources=sources,
            problems=tuple(problems),
            next_due=next_due if early is None else min(next_due, early.at),
        )
    if (workload.get("spec") or {}).get("paused"):
        return RestartDecision(
            Action.PAUSED, next_start=next_start, sources=sources, problems=tuple(problems)
        )
    return RestartDecision(
        Action.RESTART,
        patch=restart_patch(annotations, metadata, now, _restarted_at_of(workload), rollout),
        next_start=next_start,
        sources=sources,
        problems=tuple(problems),
        due=due,
        closes=closes,
        deadline=early,
    )


def is_rollout(workload: Mapping[str, Any]) -> bool:
    """True for an Argo Rollout: restarted through ``spec.restartAt``, patched by JSON merge."""
    return workload.get("kind") == "Rollout"


def _restarted_at_of(workload: Mapping[str, Any]) -> str | None:
    spec = workload.get("spec") or {}
    if is_rollout(workload):
        value = spec.get("restartAt")
    else:
        template = (spec.get("template") or {}).get("metadata") or {}
        value = (template.get("annotations") or {}).get(keys.RESTARTED_AT)
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
    annotations: Mapping[str, str], metadata: Mapping[str, Any], rollout: bool = False
) -> dict[str, Any]:
    """Strategic merge patch: every mark, the pending label and our finalizer removed.

    Conditional on the resourceVersion: a mark stamped after we read the object makes
    the patch fail (409) rather than be erased unseen. The finalizer goes in the same
    request because, once the label is gone, kopf's label-selected watch no longer sees
    the workload and so would never remove it.
    """
    patched = _released(metadata, rollout)
    patched["annotations"] = {
        key: None for key in annotations if key.startswith(keys.MARK_PREFIXES)
    }
    return {"metadata": patched}


def _released(metadata: Mapping[str, Any], rollout: bool) -> dict[str, Any]:
    """Metadata patch leaving kopf's timer: no pending label, no finalizer of ours, at the
    version read. For a Rollout (a JSON merge patch) the finalizer list is sent whole,
    without ours: the resourceVersion makes that safe."""
    patched: dict[str, Any] = {
        "resourceVersion": metadata.get("resourceVersion"),
        "labels": {keys.PENDING_LABEL: None},
    }
    finalizers = list(metadata.get("finalizers") or [])
    if not rollout:
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
    rollout: bool = False,
) -> dict[str, Any]:
    """restartedAt on the pod template, restart-ts, marks, label, finalizer: one request.

    A Rollout gets ``spec.restartAt`` instead: Argo Rollouts replaces its pods when that
    time is past and later than its ``status.restartedAt``. The changes the marks were
    for are added to restarted-for, so a mark stamped again for one of them is cleared,
    not restarted for a second time.
    """
    patch = clear_patch(annotations, metadata, rollout)
    patch["metadata"]["annotations"][keys.RESTART_TS] = str(int(now.timestamp()))
    now_for = {mark.token: mark.change for mark in pending_marks(annotations) if mark.change}
    earlier = [item for item in restarted_for(annotations).items() if item[0] not in now_for]
    recorded = dict(earlier[: max(0, _MAX_RECORDED - len(now_for))]) | now_for
    if recorded:
        patch["metadata"]["annotations"][keys.RESTARTED_FOR] = json.dumps(
            recorded, sort_keys=True, separators=(",", ":")
        )
    if rollout:
        return {**patch, "spec": {"restartAt": rollout_restart_at(now, previous)}}
    return {
        **patch,
        "spec": {
            "template": {
                "metadata": {"annotations": {keys.RESTARTED_AT: restarted_at(now, previous)}}
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
