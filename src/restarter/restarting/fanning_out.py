"""The stamps of one change: every dependent of the plan stamped, a bounded number at once,
each with its ``RestartScheduled`` Event; and the change's ``ChangeDetected`` Event."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from restarter.model import (
    checksums,
    keys,
    pending,
    reasons,
    timer_admission,
    windows,
)
from restarter.model.fan_out import FanOut
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.model.references import MARKED_KINDS, SOURCE_KINDS
from restarter.model.windows import next_restart, parse_zone
from restarter.restarting.source_context import SourceContext
from restarter.services import metrics
from restarter.services.events import RAISE
from restarter.services.kube.errors import ApiError

#: Stamps in flight at once for one change (below connecting.POOL_SIZE connections).
STAMP_CONCURRENCY = 16


#: How a workload's Event names where its window came from.
ORIGIN_NOTES = {
    windows.FROM_SOURCE: "",
    windows.FROM_WORKLOAD: f" (the workload's {keys.WORKLOAD_RESTART_AT})",
    windows.FROM_RELOADER: " (the default for Reloader's annotations)",
}


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


#: What became of one stamp (``reconcile_source``).
STAMPED, DONE_BEFORE, EVENT_LOST = "stamped", "done before", "event lost"


def _reference(workload: Mapping[str, Any], token: str) -> dict[str, Any]:
    """A stamped workload as an Event's involvedObject needs it, with the two annotations
    the stamp's outcome is read from (``restarted-for`` only as this source's entry)."""
    metadata = workload.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    kept: dict[str, str] = {}
    if (done := pending.restarted_for(annotations).get(token)) is not None:
        kept[keys.RESTARTED_FOR] = json.dumps({token: done})
    if (restarted := annotations.get(keys.RESTART_TS)) is not None:
        kept[keys.RESTART_TS] = restarted
    slim = {key: metadata.get(key) for key in ("name", "namespace", "uid", "resourceVersion")}
    return {
        "apiVersion": workload.get("apiVersion"),
        "kind": workload.get("kind"),
        "metadata": slim | {"annotations": kept},
    }


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


@dataclass
class StampOutcome:
    """What became of one change's stamps, counted and named (``Names``)."""

    stamped: Names = field(default_factory=lambda: Names())
    failed: Names = field(default_factory=lambda: Names())
    done_before: Names = field(default_factory=lambda: Names())


@dataclass(frozen=True)
class _Stamping:
    """What every stamp of one change shares: the change, its plan and where they go."""

    context: SourceContext
    plan: FanOut
    change_id: str
    now: dt.datetime
    namespace: str
    #: How Events name the source (``Secret db``).
    what: str
    #: The source's key in the stamps' annotations (``keys.source_token``).
    token: str

    def stamp(self, dependent: tuple[str, str]) -> str | ApiError | None:
        """Stamp one dependent and post its Event; what became of it (``STAMPED``,
        ``DONE_BEFORE``, ``EVENT_LOST``), None if it is gone, or the stamp's error."""
        plural, workload_name = dependent
        patch, reserved = self._patch(dependent)
        try:
            stamped = self.context.api.patch_workload(plural, self.namespace, workload_name, patch)
        except ApiError as error:  # one refused patch must not stop the others
            self._unreserve(dependent, reserved)
            return error
        if stamped is None:
            self._unreserve(dependent, reserved)
            return None  # deleted since the reference map saw it
        reference = _reference(stamped, self.token)
        annotations = reference["metadata"]["annotations"]
        if pending.restarted_for(annotations).get(self.token) == self.change_id:
            return DONE_BEFORE  # its timer clears the mark; nothing restarts
        metrics.STAMPED.labels(WORKLOAD_KINDS[plural]).inc()
        # Posted from this stamping thread, one request beside the stamp: nothing queues
        # up behind a fan-out to thousands.
        try:
            self.context.events.post(
                reference,
                reason=reasons.RESTART_SCHEDULED,
                message=self._scheduled(dependent, annotations),
                on_failure=RAISE,
            )
        except Exception:  # the stamp landed: a lost Event loses no restart
            return EVENT_LOST
        return STAMPED

    def _patch(self, dependent: tuple[str, str]) -> tuple[dict[str, Any], bool]:
        """The dependent's stamp, and whether a place at kopf's timers was taken for it:
        when its window is open now, the stamp hands it over itself (the label in the same
        request), where the admitter would send a second one."""
        stamp = self.plan.patch_for(dependent)
        admissions, plural = self.context.admissions, dependent[0]
        if admissions is None or not timer_admission.due_at_stamp(
            plural, stamp, self.context.settings, self.now
        ):
            return stamp, False
        taken = admissions.reserve((plural, self.namespace, dependent[1]))
        if taken is None:
            return stamp, False  # no place free: it waits for the admitter as any other
        return timer_admission.admitted_stamp(stamp, KINDS[plural]), taken

    def _unreserve(self, dependent: tuple[str, str], reserved: bool) -> None:
        if reserved and self.context.admissions is not None:
            self.context.admissions.unreserve((dependent[0], self.namespace, dependent[1]))

    def _scheduled(self, dependent: tuple[str, str], annotations: Mapping[str, str]) -> str:
        """The RestartScheduled Event's message: what changed, the window, the next restart
        (sooner when a certificate's deadline comes first)."""
        asked_for, now = self.plan.requests[dependent], self.now
        last = pending.read(annotations).last_restart(now)
        when = next_restart(asked_for.window(), now, last)
        marks = self.plan.patch_for(dependent)["metadata"]["annotations"]
        early = pending.read(marks).deadline
        before = "" if early is None or early.at >= when else f"; {early.describe(now)}"
        when = when if early is None else min(when, max(early.at, now))
        return (
            f"{self.what} changed ({describe_keys(self.plan.reads[dependent])}); restart "
            f"scheduled in window {asked_for.describe()}{ORIGIN_NOTES[asked_for.origin]} "
            f"(next restart {_when(when, asked_for.timezone)}{before})"
        )


def send_stamps(
    context: SourceContext,
    source: Mapping[str, Any],
    plan: FanOut,
    change_id: str,
    now: dt.datetime,
) -> StampOutcome:
    """Stamp every dependent of the plan, each posting its RestartScheduled Event."""
    kind, logger = context.kind, context.logger
    metadata = source["metadata"]
    stamping = _Stamping(
        context=context,
        plan=plan,
        change_id=change_id,
        now=now,
        namespace=metadata["namespace"],
        what=f"{MARKED_KINDS[kind]} {metadata['name']}",
        token=keys.source_token(kind, metadata["name"]),
    )
    # At most STAMP_CONCURRENCY stamps in flight, and no more queued: a fan-out holds
    # what its requests in flight hold, whatever the number of dependents. All of them
    # are answered before the checksum is recorded.
    outcome = StampOutcome()
    for (plural, dependent), result in _bounded(stamping.stamp, plan.targets, STAMP_CONCURRENCY):
        label = f"{WORKLOAD_KINDS[plural]} {dependent}"
        if isinstance(result, ApiError):
            # Logs stay in this thread: kopf's logger posts through the handler's context.
            logger.error(f"could not stamp {label}: {result.describe()}")
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
