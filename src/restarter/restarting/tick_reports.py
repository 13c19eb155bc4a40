"""What a tick tells: the restart's Event, count and log line; a clear's; a deferral's; and
what blocks a due restart (``RestartHeld``, ``RestartHalted``, ``GateFailedOpen``). Each is
posted from one of the tick's thread hops in one request, never from the event loop: what
the tick decides on the loop it reports as a ``Report``, posted by its next hop."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import keys, pending, reasons, restart_decisions
from restarter.model.certificates import Deadline
from restarter.model.restart_decisions import Action
from restarter.restarting.blocking import Answer
from restarter.restarting.checking import ObjectLog
from restarter.restarting.timer_state import TimerContext
from restarter.services import metrics

#: Each restart's log line, named by its object (``[namespace/name]``).
RESTARTS_LOG = logging.getLogger("restarter.restarts")


@dataclass(frozen=True)
class Report:
    """An Event decided on the event loop, for the tick's thread to post (``post_reports``)."""

    reason: reasons.Reason
    message: str


def post_reports(
    timer: TimerContext, workload: Mapping[str, Any], reports: Iterable[Report]
) -> None:
    """Post what the tick decided on the event loop: from a thread, as every Event."""
    for report in reports:
        timer.events.post(workload, reason=report.reason, message=report.message)


def report_deferral(
    timer: TimerContext,
    decision: restart_decisions.RestartDecision,
    now: dt.datetime,
) -> Report | None:
    """A window closed while pacing held the restart back: say so once, and why (the
    Event for the tick's thread to post)."""
    refused = timer.state.refused
    if not refused or now < refused[0]:
        return None
    timer.state.refused = None
    if decision.action is not Action.WAIT:
        return None
    upcoming = (
        f"; next window opens {decision.next_start.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
        if decision.next_start
        else ""
    )
    message = (
        f"window closed before pacing let the restart start ({refused[1]}); still pending{upcoming}"
    )
    timer.logger.info(message)
    metrics.RESTARTS.labels(timer.kind, "deferred").inc()
    return Report(reason=reasons.RESTART_DEFERRED, message=message)


def report_restart(
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
        for mark in pending.read(marked["metadata"].get("annotations")).marks
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
    # Posted from this thread in one request, as each stamp posts its RestartScheduled (a
    # line in kopf's logger would be a second Event, posted by kopf, so it goes to
    # restarter's own log). Restarted all the same if the Event is lost.
    timer.events.post(
        restarted,
        reason=reasons.RESTARTED.as_warning() if expired else reasons.RESTARTED,
        message=message,
    )


def report_blockers(timer: TimerContext, workload: Mapping[str, Any], answer: Answer) -> None:
    """What blocks a due restart, reported once per hold: ``RestartHeld`` (a Warning when
    its namespace or a gate could not be read), ``RestartHalted`` for a halted change;
    and the gates that failed open (``GateFailedOpen``). Posted from this thread in one
    request and logged in restarter's own log, as a restart is. A first wave being judged
    is logged only: it lifts by itself, and thousands may wait for it."""
    metadata = workload["metadata"]
    log = ObjectLog(RESTARTS_LOG, metadata["namespace"], metadata["name"])
    if answer.failed_open and answer.failed_open != timer.state.reported_open:
        timer.state.reported_open = answer.failed_open
        post(
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
        post(
            timer,
            workload,
            log,
            reason=reasons.RESTART_HALTED,
            message=f"restart due but {description}; it stays pending until the source "
            "changes again or the change is resumed",
        )
        return
    post(
        timer,
        workload,
        log,
        reason=reasons.RESTART_HELD.as_warning() if hold.unreadable else reasons.RESTART_HELD,
        message=f"restart due but {description}; it stays pending until the hold is removed",
    )


def post(
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
    timer.events.post(workload, reason=reason, message=message)  # held all the same if lost


def report_clear(
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
    timer.events.post(cleared, reason=reasons.RESTART_SKIPPED, message=message)
