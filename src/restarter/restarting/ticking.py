"""The timer flow: a pending workload's tick → restart it in one patch when due, or say why not."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from restarter.cluster.seen_marks import SeenMarks
from restarter.model import keys, reasons, restart_decisions, stamps, timer_admission
from restarter.model.certificates import Deadline
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.model.references import WorkloadKey, workload_key
from restarter.model.resource_versions import compare_versions
from restarter.model.restart_decisions import Action
from restarter.restarting import pacing
from restarter.restarting.blocking import Answer, Blockers
from restarter.restarting.checking import ObjectLog
from restarter.services import events, metrics
from restarter.services.kube import Api, Conflict
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


#: Decisions whose patch drops the marks without restarting.
CLEARING = (Action.OPTED_OUT, Action.SATISFIED)

#: Seconds between a waiting restart's requests for a pacing slot.
PACING_POLL = 0.5
#: Each restart's log line, named by its object (``[namespace/name]``).
RESTARTS_LOG = logging.getLogger("restarter.restarts")


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

    blockers: Blockers | None = None
    """What may keep a due restart back (holds, gates, the circuit breaker), asked in
    order; None asks none."""

    @property
    def kind(self) -> str:
        return WORKLOAD_KINDS[self.plural]

    @property
    def state(self) -> TimerMemo:
        """What this timer remembers between ticks (``TimerMemo``)."""
        return timer_memo(self.memo)


def _decide(
    timer: TimerContext, workload: Mapping[str, Any], now: dt.datetime
) -> restart_decisions.RestartDecision | None:
    """The decision of one tick, with what it reports; None when nothing is to be sent."""
    memo, logger = timer.state, timer.logger
    metadata = workload["metadata"]
    if settled(timer.memo, metadata):
        return None
    decision = restart_decisions.decide_restart(workload, timer.settings, now)
    if decision.action is not Action.RESTART:
        timer.pacer.withdraw(workload_key(timer.plural, workload))
        _report_deferral(timer, workload, decision, now)
    reported = memo.reported_problems
    for problem in decision.problems:
        if problem not in reported:
            reported.add(problem)
            logger.warning(f"ignoring pending mark {problem}")
            events.QUEUED.post(workload, reason=reasons.INVALID_PENDING_MARK, message=problem)
    if decision.action is Action.PAUSED:
        if not memo.reported_paused:
            memo.reported_paused = True
            message = f"restart due but the {timer.kind} is paused; it stays pending until resumed"
            logger.info(message)
            events.QUEUED.post(workload, reason=reasons.RESTART_DEFERRED, message=message)
        return None
    memo.reported_paused = False
    if decision.action in (Action.RESTART, Action.WAIT, *CLEARING):
        return decision
    return None


def _report_deferral(
    timer: TimerContext,
    workload: Mapping[str, Any],
    decision: restart_decisions.RestartDecision,
    now: dt.datetime,
) -> None:
    """A window closed while pacing held the restart back: say so once, and why."""
    refused = timer.state.refused
    if not refused or now < refused[0]:
        return
    timer.state.refused = None
    if decision.action is not Action.WAIT:
        return
    upcoming = (
        f"; next window opens {decision.next_start.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
        if decision.next_start
        else ""
    )
    message = (
        f"window closed before pacing let the restart start ({refused[1]}); still pending{upcoming}"
    )
    timer.logger.info(message)
    events.QUEUED.post(workload, reason=reasons.RESTART_DEFERRED, message=message)
    metrics.RESTARTS.labels(timer.kind, "deferred").inc()


async def restart_when_due(timer: TimerContext, workload: Mapping[str, Any]) -> None:
    """One timer tick on a pending workload: restart in one patch, or say why not.

    The tick's body says whether anything is to be done; what is sent is decided on a
    fresh read (``_act``). A due restart first asks the pacer for a slot, polling for up
    to one timer interval (earliest due first); a window that closes meanwhile leaves it
    pending, and the first tick after the close posts ``RestartDeferred``.
    """
    now = dt.datetime.now(dt.UTC)
    decision = _decide(timer, workload, now)
    if decision is None:
        return
    if decision.action is Action.WAIT:
        await asyncio.to_thread(_hand_back, timer, workload)
        return
    if decision.action is not Action.RESTART:
        await asyncio.to_thread(_act, timer, workload, now, may_restart=False)
        return
    key = workload_key(timer.plural, workload)
    if timer.blockers is not None and await _blocked(timer, timer.blockers, workload):
        timer.pacer.withdraw(key)
        return
    if not await _slot(timer, key, decision):
        return
    restarted: Mapping[str, Any] | None = None
    try:
        # Waiting for the slot took time: decided again at the instant the patch is sent.
        now = dt.datetime.now(dt.UTC)
        restarted = await asyncio.to_thread(_act, timer, workload, now, may_restart=True)
    except Exception:
        metrics.RESTARTS.labels(timer.kind, "failed").inc()
        raise
    finally:
        if restarted is None:
            timer.pacer.abandoned(key)
        else:
            timer.pacer.started(key, pacing.uid_of(restarted), float(int(now.timestamp())))


async def _slot(
    timer: TimerContext, key: WorkloadKey, decision: restart_decisions.RestartDecision
) -> bool:
    """True when the pacer lets this restart start; False after one interval, or when
    its window closes, remembering why for the deferral notice."""
    assert decision.due is not None
    due = decision.due.timestamp()
    give_up = time.monotonic() + timer.settings.timer_interval
    while (why := timer.pacer.try_start(key, due, time.time())) is not None:
        now = dt.datetime.now(dt.UTC)
        if decision.closes is not None:
            timer.state.refused = (decision.closes, why)
            if now >= decision.closes:
                timer.pacer.withdraw(key)
                return False
        if time.monotonic() >= give_up:
            return False  # the next tick asks again, keeping its place by due time
        await asyncio.sleep(PACING_POLL)
    timer.state.refused = None
    return True


def _act(
    timer: TimerContext, ticked: Mapping[str, Any], now: dt.datetime, *, may_restart: bool
) -> Mapping[str, Any] | None:
    """Restart (when ``may_restart``) or clear, decided on the workload as it is at a
    version, never on an echo; the restarted body.

    The tick's body can be the echo of a change that removed the marks: kopf hands its
    timers the body of its label-selected watch's DELETED event, which shows the object
    as it was before that change but carries the new resourceVersion, so a patch
    conditional on it would apply. That happens when a restart's answer was lost (the
    apiserver went away after applying it) and the tick is tried again, or when marks and
    label were removed by hand. So the tick's body is decided on only when restarter's own
    streams (which select no label, so hand over no echo) saw the workload at that very
    version with those very marks (the common case: stamped seconds or hours before);
    otherwise it is read first. The patch is conditional on the version decided on; on a
    conflict the workload is read and decided once more at once, so a busy one keeps its
    window.
    """
    plural, api, memo = timer.plural, timer.api, timer.memo
    metadata = ticked["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    vouched = timer.seen.vouches_for(plural, ticked)
    for attempt in range(2):
        fresh = ticked if vouched and not attempt else api.read_workload(plural, namespace, name)
        if fresh is None:
            return None
        annotations = fresh["metadata"].get("annotations")
        if not stamps.has_pending(annotations):
            settle(memo, ticked, fresh)
            restarted = stamps.restart_for_marks(metadata.get("annotations"), annotations)
            if restarted is not None:
                # An earlier try of this tick restarted it; its answer was lost.
                marks = stamps.pending_marks(metadata.get("annotations"))
                at = dt.datetime.fromtimestamp(restarted, dt.UTC)
                _report_restart(timer, ticked, fresh, tuple(m.token for m in marks), at)
                return fresh
            timer.logger.info("no pending mark any more (cleared meanwhile); nothing sent")
            return None
        decision = restart_decisions.decide_restart(fresh, timer.settings, now)
        restart = decision.action is Action.RESTART
        if not ((restart and may_restart) or decision.action in CLEARING):
            return None  # the next tick decides on what changed
        try:
            sent = api.patch_workload(plural, namespace, name, decision.patch)
        except Conflict:
            continue
        if sent is None:
            return None
        settle(memo, ticked, fresh, sent)
        if not restart:
            _report_clear(timer, sent, decision)
            return None
        _report_restart(timer, fresh, sent, decision.sources, now, decision.deadline)
        return sent
    timer.logger.info("changed while deciding; deciding again on the next tick")
    return None


def _hand_back(timer: TimerContext, workload: Mapping[str, Any]) -> None:
    """No window of its marks is open: the workload leaves kopf's timer (label and
    finalizer removed, marks kept, at the version decided on) and waits in restarter's own
    table for its window, as after a stamp. A workload changed meanwhile is decided again
    on its next tick."""
    metadata = workload["metadata"]
    patch = timer_admission.hand_back_patch(metadata, KINDS[timer.plural])
    try:
        timer.api.patch_workload(timer.plural, metadata["namespace"], metadata["name"], patch)
    except Conflict:
        return
    timer.logger.debug("not due: waiting for its window without a timer")


def _report_restart(
    timer: TimerContext,
    marked: Mapping[str, Any],
    restarted: Mapping[str, Any],
    sources: tuple[str, ...],
    at: dt.datetime,
    deadline: Deadline | None = None,
) -> None:
    """The restart's count, change-to-restart time, log line and ``Restarted`` Event (a
    Warning when a certificate deadline moved it and that certificate already expired)."""
    metrics.RESTARTS.labels(timer.kind, "restarted").inc()
    stamped = [
        mark.since
        for mark in stamps.pending_marks(marked["metadata"].get("annotations") or {})
        if mark.since is not None
    ]
    if stamped:
        metrics.CHANGE_TO_RESTART.observe(max(0.0, at.timestamp() - min(stamped)))
    when = "in window" if deadline is None else deadline.describe(at)
    message = (
        f"restarted {when} (pending for {', '.join(sources)}); "
        f"restartedAt {at.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
    )
    metadata = restarted["metadata"]
    log = ObjectLog(RESTARTS_LOG, metadata["namespace"], metadata["name"])
    log.info(message)
    expired = deadline is not None and deadline.expired(at)
    if deadline is not None:
        metrics.DEADLINE_RESTARTS.labels(timer.kind, "expired" if expired else "before").inc()
    # Posted from this thread in one request, as each stamp posts its RestartScheduled: a
    # window restarting thousands queues nothing in kopf's Event queue (its log line would
    # be a second Event there, so it goes to restarter's own log).
    try:
        events.Direct(timer.api).post(
            restarted,
            reason=reasons.RESTARTED.as_warning() if expired else reasons.RESTARTED,
            message=message,
        )
    except Exception as error:  # restarted all the same; the Event is what is lost
        log.warning(f"the Restarted Event was not posted: {type(error).__name__}")


async def _blocked(timer: TimerContext, blockers: Blockers, workload: Mapping[str, Any]) -> bool:
    """True when a blocker keeps the due restart back. While only the circuit breaker's
    judging of a first wave does (it lifts by itself), it is asked again every
    ``PACING_POLL`` for up to one timer interval, so the rest of a change start within a
    second of its release rather than a tick later."""
    give_up = time.monotonic() + timer.settings.timer_interval
    while True:
        answer = await asyncio.to_thread(blockers.ask, workload, dt.datetime.now(dt.UTC))
        await asyncio.to_thread(_report_blockers, timer, workload, answer)
        hold = answer.hold
        if hold is None:
            return False
        if not hold.judging or time.monotonic() >= give_up:
            return True
        await asyncio.sleep(PACING_POLL)


def _report_blockers(timer: TimerContext, workload: Mapping[str, Any], answer: Answer) -> None:
    """What blocks a due restart, reported once per hold: ``RestartHeld`` (a Warning when
    its namespace or a gate could not be read), ``RestartHalted`` for a halted change;
    and the gates that failed open (``GateFailedOpen``). Posted from this thread in one
    request and logged in restarter's own log, as a restart is. A first wave being judged
    is logged only: it lifts by itself, and thousands may wait for it."""
    metadata = workload["metadata"]
    log = ObjectLog(RESTARTS_LOG, metadata["namespace"], metadata["name"])
    if answer.failed_open and answer.failed_open != timer.state.reported_open:
        timer.state.reported_open = answer.failed_open
        _post(
            timer,
            workload,
            log,
            reason=reasons.GATE_FAILED_OPEN,
            message=f"restart let through although {'; '.join(answer.failed_open)}: the "
            "gates fail open",
        )
    hold = answer.hold
    if hold is None:
        timer.state.reported_hold = None
        return
    description = hold.describe()
    if timer.state.reported_hold == description:
        return
    timer.state.reported_hold = description
    if hold.judging:
        log.debug(f"restart due but {description}")
        return
    metrics.HELD.labels(timer.kind, hold.where).inc()
    if hold.halted:
        _post(
            timer,
            workload,
            log,
            reason=reasons.RESTART_HALTED,
            message=f"restart due but {description}; it stays pending until the source "
            "changes again or the change is resumed",
        )
        return
    _post(
        timer,
        workload,
        log,
        reason=reasons.RESTART_HELD.as_warning() if hold.unreadable else reasons.RESTART_HELD,
        message=f"restart due but {description}; it stays pending until the hold is removed",
    )


def _post(
    timer: TimerContext,
    workload: Mapping[str, Any],
    log: ObjectLog,
    *,
    reason: reasons.Reason,
    message: str,
) -> None:
    if reason.type == reasons.WARNING:
        log.warning(message)
    else:
        log.info(message)
    try:
        events.Direct(timer.api).post(workload, reason=reason, message=message)
    except Exception as error:  # held all the same; the Event is what is lost
        log.warning(f"the {reason} Event was not posted: {type(error).__name__}")


def _report_clear(
    timer: TimerContext, cleared: Mapping[str, Any], decision: restart_decisions.RestartDecision
) -> None:
    """Opted out while pending, or pending only for changes already restarted for: the
    marks were dropped, nothing restarted."""
    metrics.RESTARTS.labels(timer.kind, "skipped").inc()
    sources = ", ".join(decision.sources)
    if decision.action is Action.OPTED_OUT:
        message = f"{keys.IGNORE}=true: pending restart for {sources} dropped; nothing restarted"
    else:
        message = (
            f"already restarted for the change of {sources} it was marked for again; "
            "mark dropped, nothing restarted"
        )
    timer.logger.info(message)
    events.QUEUED.post(cleared, reason=reasons.RESTART_SKIPPED, message=message)
