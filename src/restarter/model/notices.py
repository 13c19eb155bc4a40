"""Notifications: which Events are told, and how a batch of them reads.

An Event restarter posts with a reason in ``TOLD`` becomes a ``Notice``; the notices of one
namespace that arrive together (a window's restarts) go out as one message. A notice holds
the Event's own text, which names sources, keys and workloads, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from restarter.model import reasons

RESTARTED, HELD = reasons.RESTARTED.name, reasons.RESTART_HELD.name
STAMP_FAILED = reasons.STAMP_FAILED.name
HALTED = reasons.CHANGE_HALTED.name
#: The Event reasons that are notified.
TOLD = (RESTARTED, HELD, STAMP_FAILED, HALTED)

#: How a Restarted Event moved before its window by a certificate deadline begins.
BEFORE_WINDOW = "restarted before its window"

#: Notices listed in one message at most; the others are counted.
LISTED = 50


@dataclass(frozen=True)
class Notice:
    namespace: str
    subject: str
    """``Deployment/web``, ``Secret/db``: the object the Event is about."""

    reason: str
    message: str
    warning: bool

    @property
    def category(self) -> str:
        """How the message's title counts it."""
        if self.reason == RESTARTED:
            return "restarted early for a certificate" if self.early else "restarted"
        return {HELD: "held", STAMP_FAILED: "could not be scheduled", HALTED: "halted"}[self.reason]

    @property
    def early(self) -> bool:
        return self.reason == RESTARTED and self.message.startswith(BEFORE_WINDOW)


def notice_of(obj: Mapping[str, Any], type: str, reason: str, message: str) -> Notice | None:
    """The notice of an Event on ``obj``; None when its reason is not notified."""
    if reason not in TOLD:
        return None
    metadata = obj.get("metadata") or {}
    subject = f"{obj.get('kind') or 'object'}/{metadata.get('name', '')}"
    return Notice(metadata.get("namespace", ""), subject, reason, message, type == "Warning")


def render(namespace: str, notices: Sequence[Notice]) -> tuple[str, str, bool]:
    """One message for a batch of one namespace: title, body, and whether it warns."""
    counts: dict[str, int] = {}
    for notice in notices:
        counts[notice.category] = counts.get(notice.category, 0) + 1
    summary = ", ".join(f"{count} {category}" for category, count in counts.items())
    title = f"restarter in {namespace}: {summary}"
    lines = [f"{n.subject}: {n.reason}: {n.message}" for n in notices[:LISTED]]
    if len(notices) > LISTED:
        lines.append(f"and {len(notices) - LISTED} more")
    warns = any(n.warning or n.reason in (HELD, STAMP_FAILED, HALTED) for n in notices)
    return title, "\n".join(lines), warns
