"""The two linear flows: a Secret changed → stamp dependents; a pending workload → restart."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, cast

import kopf

from restarter import decisions, keys
from restarter.decisions import Action, Change
from restarter.kube import Api, Conflict
from restarter.references import SECRET
from restarter.schedule import DailyWindow, ScheduleError, next_restart
from restarter.settings import Settings


def _event(obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """An Event on the object, posted by kopf's queue as component ``restarter``."""
    kopf.event(cast(Any, obj), type=type, reason=reason, message=message)


def _warn(obj: Mapping[str, Any], *, reason: str, message: str) -> None:
    kopf.warn(cast(Any, obj), reason=reason, message=message)


def _when(instant: dt.datetime, settings: Settings) -> str:
    local = instant.astimezone(settings.zone)
    return f"{local:%Y-%m-%d %H:%M} {settings.timezone}"


def reconcile_secret(
    secret: Mapping[str, Any],
    dependents: Iterable[str],
    settings: Settings,
    api: Api,
    now: dt.datetime,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    seen: MutableMapping[tuple[str, str], str],
) -> None:
    """Stamp every dependent first, record the checksum second: a crash repeats, never loses.

    ``seen`` maps (namespace, name) to the checksum recorded in this run.
    """
    metadata = secret["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    label = (metadata.get("labels") or {}).get(keys.RESTART_AT_LABEL, "")
    change, current = decisions.classify(secret, seen.get((namespace, name)))

    def record_checksum() -> None:
        api.patch_secret(namespace, name, decisions.checksum_patch(current))
        seen[namespace, name] = current

    if change is Change.UNCHANGED:
        seen[namespace, name] = current
        return
    try:
        window = DailyWindow.parse(label, settings.window_length, settings.zone)
    except ScheduleError as error:
        message = f"label {keys.RESTART_AT_LABEL}: {error}; no restart is scheduled"
        logger.warning(message)
        _warn(secret, reason="InvalidWindow", message=message)
        if change is Change.BASELINE:
            record_checksum()
        return
    if change is Change.BASELINE:
        record_checksum()
        logger.info(
            f"first sight: recorded the checksum; restarts follow data changes "
            f"in window {window.label} {settings.timezone}"
        )
        return

    stamped, failed = [], []
    for dependent in sorted(set(dependents)):
        patch = decisions.stamp_patch(SECRET, name, now, window)
        try:
            workload = api.patch_deployment(namespace, dependent, patch)
        except Exception as error:  # one refused patch must not stop the others
            logger.error(f"could not stamp Deployment {dependent}: {type(error).__name__}")
            failed.append(dependent)
            continue
        if workload is None:
            continue  # deleted since it was indexed
        stamped.append(dependent)
        annotations = workload.get("metadata", {}).get("annotations") or {}
        when = next_restart(window, now, decisions.last_restart(annotations))
        _event(
            workload,
            type="Normal",
            reason="RestartScheduled",
            message=f"Secret {name} changed; restart scheduled in window "
            f"{window.label} (next restart {_when(when, settings)})",
        )
    if failed:
        # The checksum stays unrecorded, so the next event or re-list of this Secret
        # stamps again; the stamps that succeeded are idempotent.
        message = f"could not schedule the restart of {', '.join(failed)}; will retry"
        _warn(secret, reason="StampFailed", message=message)
        return
    record_checksum()
    message = (
        f"data changed; {len(stamped)} dependent Deployment(s) scheduled for restart "
        f"in window {window.label} {settings.timezone} "
        f"(next start {_when(window.next_start(now), settings)})"
        + (f": {', '.join(stamped)}" if stamped else "")
    )
    logger.info(message)
    _event(secret, type="Normal", reason="ChangeDetected", message=message)


def restart_if_due(
    workload: Mapping[str, Any],
    settings: Settings,
    api: Api,
    now: dt.datetime,
    memo: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """One timer tick on a pending workload: restart in one patch, or say why not."""
    metadata = workload["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    decision = decisions.decide_restart(workload, settings, now)
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
        restarted = api.patch_deployment(namespace, name, decision.patch)
    except Conflict:
        logger.info("changed while deciding; deciding again on the next tick")
        return
    if restarted is None:
        return
    message = (
        f"restarted in window (pending for {', '.join(decision.sources)}); "
        f"restartedAt {now.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
    )
    logger.info(message)
    _event(restarted, type="Normal", reason="Restarted", message=message)
