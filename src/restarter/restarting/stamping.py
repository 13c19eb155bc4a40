"""The source flow: a labelled source's data changed → stamp every dependent pending, then
record the change on the source (``recording``), the stamps sent by ``fanning_out``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import (
    certificates,
    checksums,
    keys,
    reasons,
    source_changes,
    waves,
    windows,
)
from restarter.model.fan_out import FanOut, Target, plan_fan_out
from restarter.model.kinds import WORKLOAD_KINDS, api_version
from restarter.model.references import SOURCE_KINDS
from restarter.model.source_changes import Change
from restarter.model.windows import ScheduleError
from restarter.restarting.fanning_out import report_change, send_stamps
from restarter.restarting.recording import begin_change, record, stamped_deadline
from restarter.restarting.source_context import SourceContext
from restarter.services import metrics

#: Seconds between checks of whether the reference map is in sync, while a change waits.
SYNC_POLL = 0.1


#: Seconds before a change whose stamp was refused is stamped again, doubling up to the max.
STAMP_RETRY_DELAY, MAX_STAMP_RETRY_DELAY = 2.0, 60.0


def _invalid_workload_window(
    context: SourceContext, plural: str, namespace: str, name: str, error: ScheduleError
) -> None:
    """A workload that opted in with a window restarter cannot read: a Warning on it."""
    message = f"{error}; no restart is scheduled for this workload"
    context.logger.warning(f"{WORKLOAD_KINDS[plural]} {name}: {message}")
    metrics.INVALID_WINDOWS.labels(WORKLOAD_KINDS[plural]).inc()
    workload = context.api.read_workload(plural, namespace, name)
    if workload is not None:
        context.events.post(
            {**workload, "apiVersion": api_version(plural), "kind": WORKLOAD_KINDS[plural]},
            reason=reasons.INVALID_WINDOW,
            message=message,
        )


async def check_source(context: SourceContext, source: Mapping[str, Any]) -> None:
    """A labelled source was listed, added or modified: on a data change, stamp every
    dependent, trying again until every stamp landed."""
    if context.groups is not None:
        context.groups.observe(context.kind, source["metadata"])
    # Until every workload stream has listed (and while one is reconnecting), the map
    # may lack a user of this source: wait rather than record a change unstamped.
    while not context.in_sync.is_set():
        await asyncio.sleep(SYNC_POLL)
    if context.turns is None:
        await _check_source(context, source)
        return
    metadata = source["metadata"]
    async with context.turns.turn((context.kind, metadata["namespace"], metadata["name"])):
        await _check_source(context, source)


async def _check_source(context: SourceContext, source: Mapping[str, Any]) -> None:
    classified = unseen_change(context, source)
    if classified is None:
        return  # the common case at start-up: no thread hop, no body held for long
    metadata = source["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    delay = STAMP_RETRY_DELAY
    while True:
        now = dt.datetime.now(dt.UTC)
        # The flow blocks on API calls: a thread, with this handler's context (kopf's
        # Event posting needs it).
        if await asyncio.to_thread(reconcile_source, context, source, now, classified):
            return
        # A refused stamp: try again, from the source as it is then, until it lands.
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_STAMP_RETRY_DELAY)
        fresh = await asyncio.to_thread(context.api.read_source, context.kind, namespace, name)
        if fresh is None or not context.watched(fresh):
            return  # deleted, or unlabelled and unwanted meanwhile: nothing to restart for
        classified = unseen_change(context, fresh)
        if classified is None:
            return
        source = fresh


def unseen_change(context: SourceContext, source: Mapping[str, Any]) -> tuple[Change, str] | None:
    """The source's classification and checksum (``source_changes.classify``), for the
    flow to act on; None (and remembered) when its data matches its recorded checksum and
    per-key digests. The body is classified once: the flow takes this one."""
    seen = context.checksums
    metadata = source["metadata"]
    key = (context.kind, metadata["namespace"], metadata["name"])
    change, current = source_changes.classify(source, seen.get(key))
    # seen holds a checksum only once it is recorded on the source: a body older than
    # that record (an event of our own change annotation) is not a new change.
    recorded = (
        change is Change.UNCHANGED
        and source_changes.key_digests_current(source, current)
        and certificates.expiry_current(context.kind, source)
    )
    if recorded or seen.get(key) == current:
        seen[key] = current
        return None
    return change, current


@dataclass(frozen=True)
class _Check:
    """One check of a source: its data classified against what is recorded on it."""

    context: SourceContext
    source: Mapping[str, Any]
    now: dt.datetime
    change: Change
    current: str
    """The checksum of its data now."""

    key_change: source_changes.KeyChange
    """The digests of its data now, and the keys changed since those recorded: the same
    for a fan-out repeated after a crash (the recorded ones change only at its end)."""

    @property
    def key(self) -> tuple[str, str, str]:
        metadata = self.source["metadata"]
        return self.context.kind, metadata["namespace"], metadata["name"]

    def record_checksum(self, also: Mapping[str, str] | None = None) -> str | None:
        recorded = record(
            self.context, self.source, self.change, self.current, self.key_change, also
        )
        # Remembered even when refused: this run does not act on the same data again.
        self.context.checksums[self.key] = self.current
        return recorded


def reconcile_source(
    context: SourceContext,
    source: Mapping[str, Any],
    now: dt.datetime,
    classified: tuple[Change, str] | None = None,
) -> bool:
    """Stamp every dependent that reads a changed key first, record the checksum (and the
    per-key digests) second: a crash repeats, never loses. ``classified``: the source's
    change and checksum, when the caller has classified the body already.

    False when a stamp failed: the checksum is not recorded and the caller tries again.
    """
    metadata = source["metadata"]
    remembered = context.checksums.get((context.kind, metadata["namespace"], metadata["name"]))
    change, current = classified or source_changes.classify(source, remembered)
    salt = checksums.new_salt(secrets.token_bytes(checksums.SALT_BYTES))
    key_change = source_changes.key_change(source, current, salt)
    check = _Check(context, source, now, change, current, key_change)
    if change is Change.UNCHANGED:
        return _unchanged(check)
    labelled = keys.RESTART_AT_LABEL in (metadata.get("labels") or {})
    request = _label_window(context, source) if labelled else None
    if change is Change.BASELINE:
        asked = f"in window {request.describe()}" if request else "for the workloads that opted in"
        if recorded := check.record_checksum():
            context.logger.info(
                f"first sight: recorded {recorded}; restarts follow data changes {asked}"
            )
        return True
    return _changed(check, request, labelled)


def _unchanged(check: _Check) -> bool:
    """The checksum was recorded alone (its digests had no room, or were refused), or
    without the certificates' expiry: the data is as it was then, so nothing restarts;
    digests recorded now let the next change name its keys."""
    source, current = check.source, check.current
    recorded = None
    current_digests = source_changes.key_digests_current(source, current)
    if not (current_digests and certificates.expiry_current(check.context.kind, source)):
        recorded = check.record_checksum()
    if recorded:
        check.context.logger.info(f"unchanged data: recorded {recorded}; nothing restarts")
    check.context.checksums[check.key] = current
    return True


def _changed(check: _Check, request: windows.WindowRequest | None, labelled: bool) -> bool:
    """A data change: stamp its dependents, then record it (with its wave record)."""
    context, source = check.context, check.source
    kind, namespace, name = check.key
    changed = check.key_change.changed
    readers = context.reference_map.targets(namespace, kind, name, changed, source["metadata"])
    # The change gets an id before the first stamp, kept on the source until the checksum
    # is recorded: a fan-out repeated after a crash stamps under the same id, and a
    # dependent that already restarted for it clears that mark instead of restarting.
    change_id, begin = source_changes.change_id(source["metadata"], check.current)
    plan, wave_record = _plan(check, readers, request, change_id)
    for unreadable in plan.unreadable:
        _invalid_workload_window(
            context, unreadable.plural, namespace, unreadable.name, unreadable.error
        )
    if begin and plan.targets:
        begin_change(context, source, change_id, check.current)
    outcome = send_stamps(context, source, plan, change_id, check.now)
    if outcome.failed:
        # The checksum stays unrecorded and the caller stamps again; the stamps that
        # succeeded are idempotent, and a dependent restarted meanwhile drops the mark.
        message = f"could not schedule the restart of {outcome.failed}; will retry"
        context.events.post(source, reason=reasons.STAMP_FAILED, message=message)
        return False
    if labelled and request is None:
        # The label's own dependents wait for a window restarter can read: the change stays
        # unrecorded, so the corrected label schedules them.
        return True
    if wave_record is not None:
        wave_record = dataclasses.replace(wave_record, since=round(time.time(), 3))
    check.record_checksum({keys.WAVE: wave_record.to_annotation()} if wave_record else None)
    if context.groups is not None and wave_record is not None:
        context.groups.record((namespace, kind, name), wave_record)
    unaffected = max(0, len(context.reference_map.dependents(namespace, kind, name)) - len(readers))
    report_change(context, source, changed, request, plan, outcome, unaffected, check.now)
    return True


def _plan(
    check: _Check,
    readers: list[Target],
    request: windows.WindowRequest | None,
    change_id: str,
) -> tuple[FanOut, waves.WaveRecord | None]:
    """The change's fan-out, and the wave record that goes on the source with it (None
    when the change has no waves)."""
    context, metadata = check.context, check.source["metadata"]
    kind, _, name = check.key
    first_wave, soak, quiet = _wave_settings(context, check.source)
    previous = waves.read_record(metadata.get("annotations"))
    group = waves.group_of(metadata)
    plan = plan_fan_out(
        kind=kind,
        name=name,
        readers=readers,
        source_window=request,
        settings=context.settings,
        change_id=change_id,
        now=check.now,
        deadline=stamped_deadline(context, check.source),
        first_wave=first_wave,
        # The workload whose failure halted the last change tries the fix first.
        prefer=(previous.failed,) if previous and previous.state == waves.HALTED else (),
        quiet=quiet,
        grouped=bool(group) and first_wave.enabled,
    )
    if not plan.first:
        return plan, None
    first = tuple(map(waves.named, plan.first))
    return plan, waves.WaveRecord(change_id, first, soak, group=group)


def _wave_settings(
    context: SourceContext, source: Mapping[str, Any]
) -> tuple[waves.FirstWave, float, float]:
    """The first wave, soak and quiet time of this source's change: its annotations over
    the operator's settings; one that cannot be read is a Warning, and the settings are used."""
    settings = context.settings
    defaults = settings.first_wave, settings.soak, settings.quiet
    try:
        return waves.source_overrides(source["metadata"].get("annotations"), *defaults)
    except waves.WaveError as error:
        context.logger.warning(str(error))
        context.events.post(source, reason=reasons.INVALID_WAVE_SETTING, message=str(error))
        return defaults


def _label_window(
    context: SourceContext, source: Mapping[str, Any]
) -> windows.WindowRequest | None:
    """The window of a labelled source; None (with a Warning) when it cannot be read."""
    settings = context.settings
    try:
        return windows.from_source(
            source["metadata"],
            settings.timezone,
            settings.window_length,
            settings.min_window_length,
        )
    except ScheduleError as error:
        # Workloads that opted in still restart in their own windows.
        message = f"{error}; no restart is scheduled by this label"
        context.logger.warning(message)
        metrics.INVALID_WINDOWS.labels(SOURCE_KINDS[context.kind]).inc()
        context.events.post(source, reason=reasons.INVALID_WINDOW, message=message)
        return None
