"""The source flow: a labelled source's data changed → stamp every dependent pending."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, MutableMapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from restarter.cluster.reference_map import ReferenceMap
from restarter.model import (
    certificates,
    checksums,
    keys,
    reasons,
    restart_decisions,
    source_changes,
    stamps,
    waves,
    windows,
)
from restarter.model.fan_out import FanOut, plan_fan_out
from restarter.model.kinds import WORKLOAD_KINDS, api_version
from restarter.model.references import SOURCE_KINDS
from restarter.model.schedule import ScheduleError, next_restart, parse_zone
from restarter.model.source_changes import Change
from restarter.restarting.rollout_groups import RolloutGroups
from restarter.services import metrics
from restarter.services.events import QUEUED, Direct, EventPath
from restarter.services.kube import Api
from restarter.services.settings import Settings

#: Stamps in flight at once for one change (below kube.POOL_SIZE connections).
STAMP_CONCURRENCY = 16
#: Seconds between checks of whether the reference map is in sync, while a change waits.
SYNC_POLL = 0.1
#: Seconds before a change whose stamp was refused is stamped again, doubling up to the max.
STAMP_RETRY_DELAY, MAX_STAMP_RETRY_DELAY = 2.0, 60.0


class SourceTurns:
    """One check of a source at a time, whichever path brought it (kopf's event, or the
    source checks' queue): the second then finds the change recorded, and stamps nothing.
    Used in kopf's event loop only."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, key: tuple[str, str, str]) -> AsyncIterator[None]:
        lock, waiting = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, waiting + 1)
        try:
            async with lock:
                yield
        finally:
            lock, waiting = self._locks[key]
            if waiting == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, waiting - 1)


@dataclass(frozen=True, kw_only=True)
class SourceContext:
    """What every step of one source event needs; the source's handler makes one per event.

    The flow reads ``kind``, ``settings``, ``api``, ``reference_map`` and ``in_sync``, and
    changes ``checksums`` (and, through ``api``, the source and its dependents).
    """

    kind: str
    """``secret`` or ``configmap``."""

    settings: Settings
    api: Api

    reference_map: ReferenceMap
    """Who uses which source, kept by restarter's own workload streams."""

    in_sync: threading.Event
    """Set while every workload stream has listed: the map then lacks no user."""

    checksums: MutableMapping[tuple[str, str, str], str]
    """(kind, namespace, name) → the checksum recorded on the source in this run; shared
    by every source handler."""

    logger: logging.Logger | logging.LoggerAdapter[Any]
    """kopf's logger of this source (restarter's own for a source kopf does not watch)."""

    events: EventPath = QUEUED
    """How Events are posted: kopf's queue in its handlers, the API outside them."""

    turns: SourceTurns | None = None
    """Shared by every path that checks sources, so that one source is checked at a time."""

    groups: RolloutGroups | None = None
    """The rollout groups' members and their wave records, shared with the breaker."""

    def watched(self, source: Mapping[str, Any]) -> bool:
        """True while a change of the source can restart something: it is labelled, or a
        workload that opted in may ask for it."""
        metadata = source["metadata"]
        if keys.RESTART_AT_LABEL in (metadata.get("labels") or {}):
            return True
        return self.reference_map.wants(metadata["namespace"], self.kind, metadata["name"])


#: How a workload's Event names where its window came from.
ORIGIN_NOTES = {
    windows.FROM_SOURCE: "",
    windows.FROM_WORKLOAD: f" (the workload's {keys.WORKLOAD_RESTART_AT})",
    windows.FROM_RELOADER: " (the default for Reloader's annotations)",
}


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


def _when(instant: dt.datetime, zone_name: str) -> str:
    local = instant.astimezone(parse_zone(zone_name))
    return f"{local:%Y-%m-%d %H:%M} {zone_name}"


#: The most key names an Event or log line lists; the others are counted.
NAMED_KEYS = 20


def _key_names(names: frozenset[str]) -> str:
    listed = sorted(names)
    shown = ", ".join(listed[:NAMED_KEYS])
    more = len(listed) - NAMED_KEYS
    return f"key{'s' if len(listed) != 1 else ''} {shown}" + (
        f" and {more} more" if more > 0 else ""
    )


def describe_keys(changed: checksums.ChangedKeys) -> str:
    """How Events and logs name changed keys (names only, never values): exactly where the
    source's digests are per key; where they are per bucket, the keys of the changed
    buckets, as possibly changed."""
    if changed is None:
        return "changed keys unknown"
    if isinstance(changed, checksums.BucketChange):
        buckets = f"{len(changed.buckets)} of {changed.count} digest buckets changed"
        if not changed.present:
            return f"{buckets}, holding no key now: a key was removed, its name is not known"
        # The buckets first: an Event's message is cut at 1 024 characters, and key names
        # may be 253 long.
        return (
            f"{buckets}, and which of their keys changed cannot be told: "
            f"possibly {_key_names(changed.present)}"
        )
    if isinstance(changed, checksums.PossiblyChanged):
        return f"possibly {_key_names(changed)}, in a changed digest bucket"
    return _key_names(changed)


def _refusal(error: Exception, current: str) -> tuple[int, str]:
    """The HTTP status of a refused request (0: no answer) and how an Event names it: the
    status and the apiserver's message (which names the field and the limit), without the
    checksum should the message echo it."""
    status = getattr(error, "status", None)
    if not isinstance(status, int):
        return 0, f"no answer: {type(error).__name__}"
    try:
        message = json.loads(getattr(error, "body", None) or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    message = str(message).replace(current.removeprefix("sha256:"), "…")[:300]
    reason = getattr(error, "reason", None) or ""
    return status, f"HTTP {status} {reason}".rstrip() + (f": {message}" if message else "")


def _refused(context: SourceContext, error: Exception, current: str, what: str) -> str:
    """A refused patch of the source counted and logged; what the Warning says of it."""
    status, refusal = _refusal(error, current)
    metrics.SOURCE_PATCH_ERRORS.labels(SOURCE_KINDS[context.kind], str(status)).inc()
    context.logger.warning(f"the API refused {what}: {refusal}")
    return refusal


def _raise_if_transient(context: SourceContext, error: Exception, current: str) -> None:
    """No answer, a 429 or a server error: the same patch may pass when tried again, so the
    check fails (counted and logged) and is tried again, the change not taken as recorded.
    Only an answer that refuses the patch itself is a refusal."""
    status, refusal = _refusal(error, current)
    if status and status != 429 and status < 500:
        return
    metrics.SOURCE_PATCH_ERRORS.labels(SOURCE_KINDS[context.kind], str(status)).inc()
    context.logger.warning(f"could not record the checksum ({refusal}); trying again")
    raise error


def begin_change(
    context: SourceContext, source: Mapping[str, Any], change_id: str, current: str
) -> None:
    """The change's id recorded on the source before its first stamp. Refused, it is a
    Warning, and stamping goes on: the restarts matter more than the id that keeps a
    fan-out resumed after a crash from restarting a dependent twice."""
    metadata = source["metadata"]
    patch = source_changes.begin_change_patch(change_id, current)
    try:
        context.api.patch_source(context.kind, metadata["namespace"], metadata["name"], patch)
    except Exception as error:
        refusal = _refused(context, error, current, "the change annotation")
        context.events.post(
            source,
            reason=reasons.CHANGE_NOT_RECORDED,
            message=f"could not record the change being scheduled ({refusal}); its "
            "dependents are scheduled anyway, but should restarter stop before the change is "
            "recorded, one that already restarted for it may restart again",
        )


def record(
    context: SourceContext,
    source: Mapping[str, Any],
    change: Change,
    current: str,
    key_change: source_changes.KeyChange,
    also: Mapping[str, str] | None = None,
) -> str | None:
    """Record the checksum, with the most precise key digests that fit, on the source; what
    was recorded, or None when the API refused even the checksum alone.

    A refused patch is a Warning Event on the source and a metric, never only a log line.
    Refused digests are dropped and the checksum sent alone. A refused checksum is not sent
    again (the same patch would be refused again): the caller goes on as if it were
    recorded for this run, so nothing spins on it. A patch with no answer, a 429 or a
    server error is no refusal: the error is raised, and the check is tried again.
    """
    kind, api = context.kind, context.api
    metadata = source["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    what, digests = SOURCE_KINDS[kind], key_change.record
    every = f"every workload that uses this {what} restarts on its next data change"
    # The earliest certificate expiry of the same data goes with the checksum (deadlines).
    # ``also``: the change's wave record (model.waves), written in the same request.
    expiry = certificates.expiry_annotation(kind, source) | dict(also or {})
    try:
        patch = source_changes.checksum_patch(current, digests, drop_digests=True)
        patch["metadata"]["annotations"] |= expiry
        api.patch_source(kind, namespace, name, patch)
    except Exception as error:
        _raise_if_transient(context, error, current)
        sent = "the checksum" if digests is None else "the checksum and key digests"
        refusal = _refused(context, error, current, sent)
        if digests is None:
            context.events.post(
                source,
                reason=reasons.CHECKSUM_NOT_RECORDED,
                message=_not_recorded(change, what, refusal),
            )
            return None
        # The digests may be what was refused: the checksum alone still records the change.
        alone = source_changes.checksum_patch(current, None, drop_digests=True)
        alone["metadata"]["annotations"] |= expiry
        try:
            api.patch_source(kind, namespace, name, alone)
        except Exception as again:
            _raise_if_transient(context, again, current)
            refusal = _refused(context, again, current, "the checksum")
            context.events.post(
                source,
                reason=reasons.CHECKSUM_NOT_RECORDED,
                message=_not_recorded(change, what, refusal),
            )
            return None
        context.events.post(
            source,
            reason=reasons.KEY_DIGESTS_NOT_RECORDED,
            message=f"the API refused restarter's key digests ({refusal}); recorded the "
            f"checksum only: {every}, whichever keys it reads",
        )
        return "the checksum only"
    if digests is None:
        needs = source_changes.bucket_annotation_bytes(current)
        context.events.post(
            source,
            reason=reasons.KEY_DIGESTS_NOT_RECORDED,
            message=f"this {what}'s other annotations leave {max(0, key_change.room)} bytes "
            f"of the {source_changes.ANNOTATIONS_LIMIT} the API allows for all annotations of an "
            f"object, less than restarter's key digests need ({needs}); recorded the "
            f"checksum only: {every}, whichever keys it reads",
        )
        return "the checksum only"
    form = "per key" if isinstance(digests, checksums.KeyDigests) else "per bucket of keys"
    return f"the checksum and its key digests ({form})"


def stamped_deadline(context: SourceContext, source: Mapping[str, Any]) -> dict[str, str]:
    """The deadline annotation a change's stamps carry: the expiry recorded on the source
    for the data its dependents run, less the margin; none without one. A margin that
    cannot be read is a Warning, and the operator's margin is used."""
    metadata = source["metadata"]
    named = f"{SOURCE_KINDS[context.kind]}/{metadata['name']}"
    default = context.settings.certificate_margin
    try:
        return certificates.stamp_deadline(metadata, named, default) or {}
    except ScheduleError as error:
        message = f"{error}; the operator's margin is used"
        context.logger.warning(message)
        context.events.post(source, reason=reasons.INVALID_CERTIFICATE_MARGIN, message=message)
        without = {k: v for k, v in (metadata.get("annotations") or {}).items()}
        without.pop(keys.CERTIFICATE_MARGIN, None)
        return certificates.stamp_deadline({"annotations": without}, named, default) or {}


def _not_recorded(change: Change, what: str, refusal: str) -> str:
    """The Warning of a checksum the API refused: what that costs, by the kind of change."""
    if change is Change.UNCHANGED:
        return (
            f"could not record the key digests of this {what} ({refusal}): every workload "
            "that uses it restarts on its next data change, whichever keys it reads"
        )
    if change is Change.BASELINE:
        return (
            f"could not record the checksum of this {what} ({refusal}): a data change is "
            "noticed while this restarter runs, but one made while it is not running is missed"
        )
    return (
        f"could not record the checksum of this {what} ({refusal}): the dependents are "
        "scheduled for this change, but restarter sees it again when it next starts and "
        "schedules them again"
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


def _reference(workload: Mapping[str, Any], token: str) -> dict[str, Any]:
    """A stamped workload as an Event's involvedObject needs it, with the two annotations
    the stamp's outcome is read from (``restarted-for`` only as this source's entry)."""
    metadata = workload.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    kept: dict[str, str] = {}
    if (done := stamps.restarted_for(annotations).get(token)) is not None:
        kept[keys.RESTARTED_FOR] = json.dumps({token: done})
    if (restarted := annotations.get(keys.RESTART_TS)) is not None:
        kept[keys.RESTART_TS] = restarted
    slim = {key: metadata.get(key) for key in ("name", "namespace", "uid", "resourceVersion")}
    return {
        "apiVersion": workload.get("apiVersion"),
        "kind": workload.get("kind"),
        "metadata": slim | {"annotations": kept},
    }


#: What became of one stamp (``reconcile_source``).
STAMPED, DONE_BEFORE, EVENT_LOST = "stamped", "done before", "event lost"
#: Workloads named in a message at most; the rest are counted.
NAMED = 50


class Names:
    """The workloads one outcome befell: counted all, named up to ``NAMED`` (a line or an
    Event about 10 000 stamps names the first ones and counts the rest)."""

    def __init__(self) -> None:
        self.count = 0
        self._names: list[str] = []

    def add(self, name: str) -> None:
        self.count += 1
        if len(self._names) < NAMED:
            self._names.append(name)

    def __len__(self) -> int:
        return self.count

    def __str__(self) -> str:
        more = self.count - len(self._names)
        return ", ".join(sorted(self._names)) + (f" and {more} more" if more else "")


T = TypeVar("T")
R = TypeVar("R")


def _bounded(call: Callable[[T], R], items: list[T], limit: int) -> Iterator[tuple[T, R]]:
    """``call`` on each item in ``limit`` threads, never more than ``limit`` submitted and
    unanswered: (item, result) pairs as they are answered."""
    with ThreadPoolExecutor(max_workers=limit) as pool:
        running: dict[Future[R], T] = {}
        for item in items:
            if len(running) >= limit:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield running.pop(future), future.result()
            running[pool.submit(call, item)] = item
        for future in as_completed(list(running)):
            yield running.pop(future), future.result()


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
    kind, logger, seen = context.kind, context.logger, context.checksums
    metadata = source["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    change, current = classified or source_changes.classify(
        source, seen.get((kind, namespace, name))
    )
    # The digests of the data now, and the keys changed since those recorded: the same
    # for a fan-out repeated after a crash (the recorded ones change only at its end).
    key_change = source_changes.key_change(
        source, current, checksums.new_salt(secrets.token_bytes(checksums.SALT_BYTES))
    )

    wave_record: dict[str, str] = {}

    def record_checksum() -> str | None:
        recorded = record(context, source, change, current, key_change, wave_record)
        # Remembered even when refused: this run does not act on the same data again.
        seen[kind, namespace, name] = current
        return recorded

    if change is Change.UNCHANGED:
        # The checksum was recorded alone (its digests had no room, or were refused), or
        # without the certificates' expiry: the data is as it was then, so nothing
        # restarts; digests recorded now let the next change name its keys.
        current_digests = source_changes.key_digests_current(source, current)
        if current_digests and certificates.expiry_current(kind, source):
            recorded = None
        else:
            recorded = record_checksum()
        if recorded:
            logger.info(f"unchanged data: recorded {recorded}; nothing restarts")
        seen[kind, namespace, name] = current
        return True
    labelled = keys.RESTART_AT_LABEL in (metadata.get("labels") or {})
    request = _label_window(context, source) if labelled else None
    if change is Change.BASELINE:
        asked = f"in window {request.describe()}" if request else "for the workloads that opted in"
        if recorded := record_checksum():
            logger.info(f"first sight: recorded {recorded}; restarts follow data changes {asked}")
        return True

    changed = key_change.changed
    readers = context.reference_map.targets(namespace, kind, name, changed, metadata)
    # The change gets an id before the first stamp, kept on the source until the checksum
    # is recorded: a fan-out repeated after a crash stamps under the same id, and a
    # dependent that already restarted for it clears that mark instead of restarting.
    change_id, begin = source_changes.change_id(metadata, current)
    first_wave, soak, quiet = _wave_settings(context, source)
    previous = waves.read_record(metadata.get("annotations"))
    plan = plan_fan_out(
        kind=kind,
        name=name,
        readers=readers,
        source_window=request,
        settings=context.settings,
        change_id=change_id,
        now=now,
        deadline=stamped_deadline(context, source),
        first_wave=first_wave,
        # The workload whose failure halted the last change tries the fix first.
        prefer=(previous.failed,) if previous and previous.state == waves.HALTED else (),
        quiet=quiet,
        grouped=bool(group := waves.group_of(metadata)) and first_wave.enabled,
    )
    record_of_waves = None
    if plan.first:
        first = tuple(map(waves.named, plan.first))
        since = int(now.timestamp())
        record_of_waves = waves.WaveRecord(change_id, first, soak, group=group, since=since)
        wave_record[keys.WAVE] = record_of_waves.to_annotation()
    for unreadable in plan.unreadable:
        _invalid_workload_window(
            context, unreadable.plural, namespace, unreadable.name, unreadable.error
        )
    if begin and plan.targets:
        begin_change(context, source, change_id, current)
    outcome = send_stamps(context, source, plan, change_id, now)
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
    record_checksum()
    if context.groups is not None and record_of_waves is not None:
        context.groups.record((namespace, kind, name), record_of_waves)
    unaffected = max(0, len(context.reference_map.dependents(namespace, kind, name)) - len(readers))
    report_change(context, source, changed, request, plan, outcome, unaffected, now)
    return True


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


@dataclass
class StampOutcome:
    """What became of one change's stamps, counted and named (``Names``)."""

    stamped: Names = field(default_factory=lambda: Names())
    failed: Names = field(default_factory=lambda: Names())
    done_before: Names = field(default_factory=lambda: Names())


def send_stamps(
    context: SourceContext,
    source: Mapping[str, Any],
    plan: FanOut,
    change_id: str,
    now: dt.datetime,
) -> StampOutcome:
    """Stamp every dependent of the plan, each posting its RestartScheduled Event."""
    kind, api, logger = context.kind, context.api, context.logger
    metadata = source["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    what = f"{SOURCE_KINDS[kind]} {name}"
    token = keys.source_token(kind, name)
    # The stamping threads post their Events themselves, one request each beside the
    # stamp: nothing queues up behind a fan-out to thousands (kopf's queue is unbounded).
    direct = Direct(api)

    def stamp(dependent: tuple[str, str]) -> str | Exception | None:
        """Stamp one dependent and post its Event; what became of it (``STAMPED``,
        ``DONE_BEFORE``, ``EVENT_LOST``), None if it is gone, or the stamp's error."""
        plural, workload_name = dependent
        try:
            stamped = api.patch_workload(
                plural, namespace, workload_name, plan.patch_for(dependent)
            )
        except Exception as error:  # one refused patch must not stop the others
            return error
        if stamped is None:
            return None  # deleted since the reference map saw it
        reference = _reference(stamped, token)
        annotations = reference["metadata"]["annotations"]
        if stamps.restarted_for(annotations).get(token) == change_id:
            return DONE_BEFORE  # its timer clears the mark; nothing restarts
        metrics.STAMPED.labels(WORKLOAD_KINDS[plural]).inc()
        asked_for = plan.requests[dependent]
        last = restart_decisions.last_restart(annotations, now)
        when = next_restart(asked_for.window(), now, last)
        early = certificates.earliest_deadline(plan.patch_for(dependent)["metadata"]["annotations"])
        before = "" if early is None or early.at >= when else f"; {early.describe(now)}"
        when = when if early is None else min(when, max(early.at, now))
        try:
            direct.post(
                reference,
                reason=reasons.RESTART_SCHEDULED,
                message=f"{what} changed ({describe_keys(plan.reads[dependent])}); restart "
                f"scheduled in window {asked_for.describe()}{ORIGIN_NOTES[asked_for.origin]} "
                f"(next restart {_when(when, asked_for.timezone)}{before})",
            )
        except Exception:  # the stamp landed: a lost Event loses no restart
            return EVENT_LOST
        return STAMPED

    # At most STAMP_CONCURRENCY stamps in flight, and no more queued: a fan-out holds
    # what its requests in flight hold, whatever the number of dependents. All of them
    # are answered before the checksum is recorded.
    outcome = StampOutcome()
    for (plural, dependent), result in _bounded(stamp, plan.targets, STAMP_CONCURRENCY):
        label = f"{WORKLOAD_KINDS[plural]} {dependent}"
        if isinstance(result, Exception):
            # Logs stay in this thread: kopf's logger posts through the handler's context.
            logger.error(f"could not stamp {label}: {type(result).__name__}")
            outcome.failed.add(label)
        elif result == DONE_BEFORE:
            outcome.done_before.add(label)
        elif result is not None:
            if result == EVENT_LOST:
                logger.warning(f"stamped {label}; its RestartScheduled Event was not posted")
            outcome.stamped.add(label)
    return outcome


def report_change(
    context: SourceContext,
    source: Mapping[str, Any],
    changed: checksums.ChangedKeys,
    request: windows.WindowRequest | None,
    plan: FanOut,
    outcome: StampOutcome,
    unaffected: int,
    now: dt.datetime,
) -> None:
    """The change's count, log line and ChangeDetected Event, once every stamp landed."""
    stamped, done_before = outcome.stamped, outcome.done_before
    not_asked, what_changed = plan.not_asked, describe_keys(changed)
    metrics.CHANGES.labels(SOURCE_KINDS[context.kind]).inc()
    message = (
        f"data changed ({what_changed}); {len(stamped)} dependent workload(s) scheduled for "
        + (
            f"restart in window {request.describe()} "
            f"(next start {_when(request.window().next_start(now), request.timezone)})"
            if request is not None
            else "restart in the windows they opted in with"
        )
        + (f": {stamped}" if stamped else "")
        + (f"; {unaffected} read none of the changed keys" if unaffected else "")
        + (f"; {not_asked} did not opt in for it" if not_asked else "")
        + (
            f"; {len(done_before)} already restarted for this change: {done_before}"
            if done_before
            else ""
        )
    )
    context.logger.info(message)
    context.events.post(source, reason=reasons.CHANGE_DETECTED, message=message)
