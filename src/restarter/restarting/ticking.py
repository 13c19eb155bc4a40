"""The timer flow: a pending workload's tick → restart it in one patch when due, or say why not."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from restarter.model import pending, reasons, restart_decisions, stamps, timer_admission
from restarter.model.holds import Hold
from restarter.model.kinds import KINDS
from restarter.model.references import WorkloadKey, workload_key
from restarter.model.restart_decisions import Action
from restarter.restarting import pacing, tick_reports
from restarter.restarting.blocking import Blockers
from restarter.restarting.tick_reports import Report
from restarter.restarting.timer_state import TimerContext, settle, settled
from restarter.services import metrics
from restarter.services.kube.errors import Conflict

#: Decisions whose patch drops the marks without restarting.
CLEARING = (Action.OPTED_OUT, Action.SATISFIED)

#: Seconds between a waiting restart's requests for a pacing slot.
PACING_POLL = 0.5


def _decide(
    timer: TimerContext, workload: Mapping[str, Any], now: dt.datetime, reports: list[Report]
) -> restart_decisions.RestartDecision | None:
    """The decision of one tick; None when nothing is to be sent. On the event loop: the
    Events it decides on are added to ``reports``, for a thread to post."""
    memo, logger = timer.state, timer.logger
    metadata = workload["metadata"]
    if settled(timer.memo, metadata):
        return None
    decision = restart_decisions.decide_restart(workload, timer.settings, now)
    if decision.action is not Action.RESTART:
        timer.pacer.withdraw(workload_key(timer.plural, workload))
        if deferred := tick_reports.report_deferral(timer, decision, now):
            reports.append(deferred)
    reported = memo.reported_problems
    for problem in decision.problems:
        if problem not in reported:
            reported.add(problem)
            logger.warning(f"ignoring pending mark {problem}")
            reports.append(Report(reason=reasons.INVALID_PENDING_MARK, message=problem))
    if decision.action is Action.PAUSED:
        if not memo.reported_paused:
            memo.reported_paused = True
            message = f"restart due but the {timer.kind} is paused; it stays pending until resumed"
            logger.info(message)
            reports.append(Report(reason=reasons.RESTART_DEFERRED, message=message))
        return None
    memo.reported_paused = False
    if decision.action in (Action.RESTART, Action.WAIT, *CLEARING):
        return decision
    return None


async def restart_when_due(timer: TimerContext, workload: Mapping[str, Any]) -> None:
    """One timer tick on a pending workload: restart in one patch, or say why not.

    The tick's body says whether anything is to be done; what is sent is decided on a
    fresh read (``_act``). A due restart first asks the pacer for a slot, polling for up
    to one timer interval (earliest due first); a window that closes meanwhile leaves it
    pending, and the first tick after the close posts ``RestartDeferred``.
    """
    now = dt.datetime.now(dt.UTC)
    reports: list[Report] = []
    decision = _decide(timer, workload, now, reports)
    if reports:  # rare (a deferral, an unreadable mark, a pause): one more thread hop
        await asyncio.to_thread(tick_reports.post_reports, timer, workload, reports)
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
            marked = pending.read(metadata.get("annotations"))
            restarted = pending.read(annotations).restart_for(marked)
            if restarted is not None:
                # An earlier try of this tick restarted it; its answer was lost.
                at = dt.datetime.fromtimestamp(restarted, dt.UTC)
                tick_reports.report_restart(timer, ticked, fresh, marked.tokens, at)
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
            tick_reports.report_clear(timer, sent, decision)
            return None
        tick_reports.report_restart(timer, fresh, sent, decision.sources, now, decision.deadline)
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


async def _blocked(timer: TimerContext, blockers: Blockers, workload: Mapping[str, Any]) -> bool:
    """True when a blocker keeps the due restart back. While only the circuit breaker's
    judging of a first wave does (it lifts by itself), it is asked again for up to one
    timer interval, so the rest of a change start within a poll of its release rather than
    a tick later: every ``PACING_POLL`` by one of the restarts that source holds, while the
    others wait for that one (``JudgingWaits``)."""
    give_up = time.monotonic() + timer.settings.timer_interval
    namespace = workload["metadata"].get("namespace", "")
    me = object()
    try:
        while True:
            hold = await asyncio.to_thread(_ask, timer, blockers, workload)
            left = give_up - time.monotonic()
            if hold is None:
                return False
            if not hold.judging or left <= 0:
                return True
            if timer.waits is None or timer.waits.asks((namespace, hold.name), me):
                await asyncio.sleep(min(PACING_POLL, left))
            else:
                await timer.waits.wait((namespace, hold.name), left)
    finally:
        if timer.waits is not None:
            timer.waits.leave(me)


def _ask(timer: TimerContext, blockers: Blockers, workload: Mapping[str, Any]) -> Hold | None:
    """The blockers' answer, reported: one thread hop, beside the restart's own."""
    answer = blockers.ask(workload, dt.datetime.now(dt.UTC))
    tick_reports.report_blockers(timer, workload, answer)
    return answer.hold
