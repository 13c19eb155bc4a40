"""What a workload's timer keeps between its ticks, and what every step of one tick needs:
``TimerMemo`` in kopf's memo of the object, and ``TimerContext``."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from restarter.cluster.seen_marks import SeenMarks
from restarter.model import stamps
from restarter.model.kinds import WORKLOAD_KINDS
from restarter.model.resource_versions import compare_versions
from restarter.restarting import pacing
from restarter.restarting.blocking import Blockers
from restarter.restarting.judging_waits import JudgingWaits
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.settings import Settings


@dataclass
class TimerMemo:
    """What a workload's timer remembers between its ticks, in kopf's memo of the object.

    kopf keeps its memos in memory only (an operator restart starts them afresh), so this
    has no stored form to read back from an earlier version.
    """

    settled: tuple[str, ...] = ()
    """The resourceVersions at which this operator restarted or cleared the workload (the
    body the tick read, the one read fresh and, when a patch was sent, its result; the
    newest last). Marks, label and finalizer are then gone, so kopf's label-selected
    watch reports it DELETED with the body as it was *before* the patch but the new
    resourceVersion: an echo that looks pending. A body at a settled version or older
    is skipped by the timer's filter and its ticks (kopf stops a timer whose filter
    fails). A newer body is decided again: kopf keeps a memo until it sees the DELETED
    event, which a reconnecting watch may never show, so the same memo meets the
    workload stamped again, and that must be cleared, not skipped forever."""

    reported_problems: set[str] = field(default_factory=set)
    """Marks it cannot read, already reported (once per operator run)."""

    reported_paused: bool = False
    """A paused Deployment's deferral, already reported."""

    refused: tuple[dt.datetime, str] | None = None
    """Pacing refused a slot in an open window: when the window closes, and why."""

    reported_hold: str | None = None
    """The hold last reported on a due restart (``RestartHeld``, once per hold)."""

    reported_open: tuple[str, ...] = ()
    """The gates last reported as failed open (``GateFailedOpen``, once per failure)."""


#: The key of the ``TimerMemo`` in kopf's memo of a workload.
MEMO_KEY = "timer"


def timer_memo(memo: MutableMapping[str, Any]) -> TimerMemo:
    """The ``TimerMemo`` in kopf's memo of a workload, made on first use."""
    found = memo.get(MEMO_KEY)
    if not isinstance(found, TimerMemo):
        found = memo[MEMO_KEY] = TimerMemo()
    return found


def settle(memo: MutableMapping[str, Any], *bodies: Mapping[str, Any]) -> None:
    """Remember the versions of a restart or clear this timer sent, its result last."""
    settled = tuple(str(body["metadata"].get("resourceVersion")) for body in bodies)
    timer_memo(memo).settled = settled


def settled(memo: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """True when the body of ``metadata`` is no newer than the versions this timer
    settled the workload at (``TimerMemo.settled``)."""
    found = memo.get(MEMO_KEY)
    versions = found.settled if isinstance(found, TimerMemo) else ()
    version = metadata.get("resourceVersion")
    if not versions or version is None:
        return False
    order = compare_versions(str(version), versions[-1])
    return str(version) in versions if order is None else order <= 0


def timer_wanted(
    annotations: Mapping[str, str] | None,
    metadata: Mapping[str, Any],
    memo: Mapping[str, Any],
) -> bool:
    """The timer's filter: the body carries pending marks and is not one it settled."""
    return stamps.has_pending(annotations) and not settled(memo, metadata)


@dataclass(frozen=True, kw_only=True)
class TimerContext:
    """What every step of one tick needs; the timer's handler makes one per tick.

    The flow reads ``plural``, ``settings``, ``api`` and ``seen``, and changes ``pacer``
    (slots asked for, taken, freed) and ``memo`` (what a tick leaves for the next).
    """

    plural: str
    """The workload's resource plural: ``deployments``, ``statefulsets`` or ``daemonsets``."""

    settings: Settings
    api: Api

    pacer: pacing.Pacer
    """Shared by every timer: the restarts in flight and the queue of due workloads."""

    seen: SeenMarks
    """The marks restarter's own streams saw: a tick's body they vouch for is not read again."""

    memo: MutableMapping[str, Any]
    """kopf's memory of this workload; restarter's part of it is ``state``."""

    logger: logging.Logger | logging.LoggerAdapter[Any]
    """kopf's logger of this workload."""

    events: Events
    """The one Event path: posted from the tick's thread hops, never from the event loop."""

    blockers: Blockers | None = None
    """What may keep a due restart back (holds, gates, the circuit breaker), asked in
    order; None asks none."""

    waits: JudgingWaits | None = None
    """Shared by every timer: the restarts held while a first wave is judged wait for one
    of them to ask again (None: each asks for itself)."""

    @property
    def kind(self) -> str:
        return WORKLOAD_KINDS[self.plural]

    @property
    def state(self) -> TimerMemo:
        """What this timer remembers between ticks (``TimerMemo``)."""
        return timer_memo(self.memo)
