"""The two linear flows: a source changed → stamp dependents; a pending workload → restart."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import kopf

from restarter import decisions, keys, windows
from restarter.decisions import Action, Change
from restarter.kube import Api, Conflict
from restarter.references import SOURCE_KINDS, WORKLOAD_KINDS
from restarter.schedule import ScheduleError, next_restart, parse_zone
from restarter.settings import Settings

#: Memo key of a timer whose workload this operator has restarted (or cleared): marks,
#: label and finalizer are gone, so kopf's label-selected watch reports it DELETED, with
#: the body as it was *before* the patch but the new resourceVersion. That body would
#: look pending, and a patch conditional on its version would succeed: a second restart.
#: The timer's filter reads this key, so the DELETED event stops the timer, and any tick
#: still scheduled does nothing.
RELEASED = "released"

#: Stamps in flight at once for one change (below kube.POOL_SIZE connections).
STAMP_CONCURRENCY = 16


def _event(obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """An Event on the object, posted by kopf's queue as component ``restarter``."""
    kopf.event(cast(Any, obj), type=type, reason=reason, message=message)


def _warn(obj: Mapping[str, Any], *, reason: str, message: str) -> None:
    kopf.warn(cast(Any, obj), reason=reason, message=message)


def _when(instant: dt.datetime, zone_name: str) -> str:
    local = instant.astimezone(parse_zone(zone_name))
    return f"{local:%Y-%m-%d %H:%M} {zone_name}"


def already_seen(
    kind: str, source: Mapping[str, Any], seen: MutableMapping[tuple[str, str, str], str]
) -> bool:
    """True (and remembered) when the source's data matches its recorded checksum."""
    metadata = source["metadata"]
    key = (kind, metadata["namespace"], metadata["name"])
    change, current = decisions.classify(source, seen.get(key))
    if change is Change.UNCHANGED:
        seen[key] = current
        return True
    return False


def reconcile_source(
    kind: str,
    source: Mapping[str, Any],
    dependents: Iterable[tuple[str, str]],
    settings: Settings,
    api: Api,
    now: dt.datetime,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    seen: MutableMapping[tuple[str, str, str], str],
) -> None:
    """Stamp every dependent first, record the checksum second: a crash repeats, never loses.

    ``kind`` is ``secret`` or ``configmap``; ``dependents`` are (resource plural, name)
    pairs; ``seen`` maps (kind, namespace, name) to the checksum recorded in this run.
    """
    metadata = source["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    what = f"{SOURCE_KINDS[kind]} {name}"
    change, current = decisions.classify(source, seen.get((kind, namespace, name)))

    def record_checksum() -> None:
        api.patch_source(kind, namespace, name, decisions.checksum_patch(current))
        seen[kind, namespace, name] = current

    if change is Change.UNCHANGED:
        seen[kind, namespace, name] = current
        return
    try:
        request = windows.from_source(
            metadata, settings.timezone, settings.window_length, settings.min_window_length
        )
    except ScheduleError as error:
        message = f"{error}; no restart is scheduled"
        logger.warning(message)
        _warn(source, reason="InvalidWindow", message=message)
        if change is Change.BASELINE:
            record_checksum()
        return
    window = request.window()
    if change is Change.BASELINE:
        record_checksum()
        logger.info(
            f"first sight: recorded the checksum; restarts follow data changes "
            f"in window {request.describe()}"
        )
        return

    # The change gets an id before the first stamp, kept on the source until the checksum
    # is recorded: a fan-out repeated after a crash stamps under the same id, and a
    # dependent that already restarted for it clears that mark instead of restarting.
    change_id, begin = decisions.change_id(metadata, current)
    if begin:
        api.patch_source(kind, namespace, name, decisions.begin_change_patch(change_id, current))
    patch = decisions.stamp_patch(kind, name, now, request, change_id)
    token = keys.source_token(kind, name)

    def stamp(dependent: tuple[str, str]) -> dict[str, Any] | Exception | None:
        try:
            return api.patch_workload(dependent[0], namespace, dependent[1], patch)
        except Exception as error:  # one refused patch must not stop the others
            return error

    targets = sorted(set(dependents))
    # Stamps go out in parallel; all of them are answered before the checksum is recorded.
    # Logs and Events stay in this thread: kopf's posting needs the handler's context.
    with ThreadPoolExecutor(max_workers=STAMP_CONCURRENCY) as pool:
        outcomes = list(pool.map(stamp, targets))
    stamped, failed, done_before = [], [], []
    for (plural, dependent), workload in zip(targets, outcomes, strict=True):
        label = f"{WORKLOAD_KINDS[plural]} {dependent}"
        if isinstance(workload, Exception):
            logger.error(f"could not stamp {label}: {type(workload).__name__}")
            failed.append(label)
            continue
        if workload is None:
            continue  # deleted since the reference map saw it
        annotations = workload.get("metadata", {}).get("annotations") or {}
        if decisions.restarted_for(annotations).get(token) == change_id:
            done_before.append(label)  # its timer clears the mark; nothing restarts
            continue
        stamped.append(label)
        when = next_restart(window, now, decisions.last_restart(annotations, now))
        _event(
            workload,
            type="Normal",
            reason="RestartScheduled",
            message=f"{what} changed; restart scheduled in window "
            f"{request.describe()} (next restart {_when(when, request.timezone)})",
        )
    if failed:
        # The checksum stays unrecorded, so the next event or re-list of this source
        # stamps again; the stamps that succeeded are idempotent.
        message = f"could not schedule the restart of {', '.join(failed)}; will retry"
        _warn(source, reason="StampFailed", message=message)
        return
    record_checksum()
    message = (
        f"data changed; {len(stamped)} dependent workload(s) scheduled for restart "
        f"in window {request.describe()} "
        f"(next start {_when(window.next_start(now), request.timezone)})"
        + (f": {', '.join(stamped)}" if stamped else "")
        + (
            f"; {len(done_before)} already restarted for this change: {', '.join(done_before)}"
            if done_before
            else ""
        )
    )
    logger.info(message)
    _event(source, type="Normal", reason="ChangeDetected", message=message)


def restart_if_due(
    plural: str,
    workload: Mapping[str, Any],
    settings: Settings,
    api: Api,
    now: dt.datetime,
    memo: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[Any],
    reread_on_conflict: bool = True,
) -> None:
    """One timer tick on a pending workload: restart in one patch, or say why not.

    The patch is conditional on the resourceVersion read; when the workload changed
    meanwhile (a status update, a new mark), it is read again and decided once more at
    once, so a busy workload does not miss a short window.
    """
    if memo.get(RELEASED):
        return
    metadata = workload["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    # A workload waiting for a window that has not started, unchanged since the tick that
    # found so, needs no new decision: thousands of pending workloads tick every interval.
    waiting = memo.get("waiting")
    if waiting and waiting[0] == metadata.get("resourceVersion") and now < waiting[1]:
        return
    decision = decisions.decide_restart(workload, settings, now)
    if decision.action is Action.WAIT and decision.next_start and decision.next_start > now:
        memo["waiting"] = (metadata.get("resourceVersion"), decision.next_start)
    if decision.action in (Action.OPTED_OUT, Action.SATISFIED):
        _clear(plural, workload, decision, api, memo, logger)
        return
    reported = memo.setdefault("reported_problems", set())
    for problem in decision.problems:
        if problem not in reported:
            reported.add(problem)
            logger.warning(f"ignoring pending mark {problem}")
            _warn(workload, reason="InvalidPendingMark", message=problem)
    if decision.action is Action.PAUSED:
        if not memo.get("reported_paused"):
            memo["reported_paused"] = True
            message = "restart due but the Deployment is paused; it stays pending until resumed"
            logger.info(message)
            _event(workload, type="Normal", reason="RestartDeferred", message=message)
        return
    memo.pop("reported_paused", None)
    if decision.action is not Action.RESTART:
        return
    try:
        restarted = api.patch_workload(plural, namespace, name, decision.patch)
    except Conflict:
        fresh = api.read_workload(plural, namespace, name) if reread_on_conflict else None
        if fresh is None:
            logger.info("changed while deciding; deciding again on the next tick")
            return
        restart_if_due(plural, fresh, settings, api, now, memo, logger, reread_on_conflict=False)
        return
    if restarted is None:
        return
    memo[RELEASED] = True
    message = (
        f"restarted in window (pending for {', '.join(decision.sources)}); "
        f"restartedAt {now.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
    )
    logger.info(message)
    _event(restarted, type="Normal", reason="Restarted", message=message)


def _clear(
    plural: str,
    workload: Mapping[str, Any],
    decision: decisions.RestartDecision,
    api: Api,
    memo: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """Opted out while pending, or pending only for changes already restarted for: drop
    the marks, restart nothing."""
    metadata = workload["metadata"]
    try:
        cleared = api.patch_workload(
            plural, metadata["namespace"], metadata["name"], decision.patch
        )
    except Conflict:
        return
    if cleared is None:
        return
    memo[RELEASED] = True
    sources = ", ".join(decision.sources)
    if decision.action is Action.OPTED_OUT:
        message = f"{keys.IGNORE}=true: pending restart for {sources} dropped; nothing restarted"
    else:
        message = (
            f"already restarted for the change of {sources} it was marked for again; "
            "mark dropped, nothing restarted"
        )
    logger.info(message)
    _event(cleared, type="Normal", reason="RestartSkipped", message=message)


def repair_label(plural: str, workload: Mapping[str, Any], api: Api) -> None:
    """Make the pending label agree with the marks (marks from 0.2, or edited by hand)."""
    metadata = workload.get("metadata") or {}
    patch = decisions.label_repair(metadata)
    if patch is None:
        return
    try:
        api.patch_workload(plural, metadata["namespace"], metadata["name"], patch)
    except Conflict:
        return  # changed meanwhile: its next event is looked at again
    except Exception as error:  # a watch stream must not stop on one refused patch
        logging.getLogger(__name__).warning(
            f"could not set the pending label of {WORKLOAD_KINDS[plural]} "
            f"{metadata['namespace']}/{metadata['name']}: {type(error).__name__}"
        )
        return
    added = patch["metadata"]["labels"][keys.PENDING_LABEL] is not None
    logging.getLogger(__name__).info(
        f"{'added' if added else 'removed'} the {keys.PENDING_LABEL} label "
        f"{'to' if added else 'from'} {WORKLOAD_KINDS[plural]} "
        f"{metadata['namespace']}/{metadata['name']} to match its marks"
    )
