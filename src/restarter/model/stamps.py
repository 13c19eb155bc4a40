"""The stamp: the pending marks restarter writes on a dependent of a changed source, and
reading them back (which sources it waits for, in which windows, for which changes, and
the changes its restarts already satisfied)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import keys, windows
from restarter.model.references import SOURCE_KINDS, KeyNames
from restarter.model.windows import ScheduleError, WindowDefaults, WindowRequest


def stamp_patch(
    kind: str,
    name: str,
    seen: dt.datetime,
    request: WindowRequest,
    change: str | None = None,
    changed_keys: KeyNames = None,
    extra: Mapping[str, int] | None = None,
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
                    f"{SOURCE_KINDS[kind]}/{name}", change, changed_keys, extra
                ),
            }
        }
    }


@dataclass(frozen=True)
class Mark:
    """One pending source on a workload, as read back from its annotations."""

    token: str
    since: int | None
    window: str | None
    change: str | None = None


_MARK_SLOTS = ((keys.PENDING_MARK + "/", "since"), (keys.WINDOW_MARK + "/", "window"))


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
MAX_RECORDED = 64


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
    return any(key.startswith(keys.PENDING_MARK + "/") for key in (annotations or {}))


def opted_out(annotations: Mapping[str, str] | None) -> bool:
    return (annotations or {}).get(keys.IGNORE) == "true"


def mark_window(mark: Mark, defaults: WindowDefaults) -> WindowRequest:
    """The window a mark asks for; ScheduleError when it cannot be read."""
    if mark.window is None:
        raise ScheduleError("pending mark without its restart-at mark")
    return windows.from_mark(mark.window, defaults.timezone, defaults.window_length)
