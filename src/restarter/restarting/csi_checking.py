"""The source flow of a SecretProviderClass: its workloads' pods report object versions
through the Secrets Store CSI Driver; a version a workload has not recorded is a change,
stamped like a Secret's (its window, the workload's opt-in, marks, Events), and recorded on
the workload in the same patch as the marks, so a repeated check stamps nothing twice.

A workload's first sight records the versions and restarts nothing. A version recorded once
is not new again, so the pods of one workload rotating one after the other, within the
driver's poll interval, make one change and one restart.

A class that syncs into Secrets (``spec.secretObjects``) whose synced keys hold a
certificate: its earliest expiry is recorded on the workload with the versions (and again
whenever it moves), and a change's stamp carries the certificate deadline of the earlier of
that record and the Secret now, as a Secret's change does (``model.csi.change_deadline``).
Only the expiry is read into it; the Secret is held for the one check.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from restarter.cluster.csi_watching import PodStatuses
from restarter.model import certificates, csi, keys, reasons, windows
from restarter.model.fan_out import FanOut, Target, plan_fan_out
from restarter.model.kinds import WORKLOAD_KINDS
from restarter.model.references import SECRET_PROVIDER_CLASS
from restarter.restarting.fanning_out import describe_keys, send_stamps
from restarter.restarting.source_context import SourceContext
from restarter.services import metrics
from restarter.services.kube.errors import ApiError

log = logging.getLogger("restarter.sources")

#: Seconds before a class whose stamp failed is checked again.
RETRY_DELAY = 5.0


def _provider_class(context: SourceContext, namespace: str, name: str) -> dict[str, Any]:
    """The class as Events, windows and deadlines need it (its metadata and the Secrets it
    syncs into); a bare reference when gone."""
    found = context.api.read_provider_class(namespace, name) or {}
    metadata = found.get("metadata") or {"namespace": namespace, "name": name}
    return {
        "apiVersion": f"{csi.GROUP}/{csi.VERSION}",
        "kind": "SecretProviderClass",
        "metadata": metadata,
        "spec": found.get("spec") or {},
    }


#: A synced Secret that could not be read: the recorded expiry stays as it is.
UNREAD = "unread"


def _synced_expiry(
    context: SourceContext, body: Mapping[str, Any]
) -> csi.SyncedExpiry | str | None:
    """The earliest certificate expiry among the keys the class syncs into Secrets now;
    None when it syncs none, or none holds a certificate; ``UNREAD`` when a Secret could
    not be read (the versions are still checked; the next check reads it again)."""
    synced = csi.synced_keys(body)
    if not synced:
        return None
    namespace = body["metadata"]["namespace"]
    try:
        secrets = {name: context.api.read_source("secret", namespace, name) for name in synced}
    except ApiError as error:
        context.logger.warning(
            f"could not read the Secrets it syncs into ({error.describe()}): a change now "
            "carries only the certificate deadline recorded before"
        )
        return UNREAD
    return csi.synced_expiry(synced, secrets)


def _deadline(
    context: SourceContext,
    body: Mapping[str, Any],
    recorded: csi.SyncedExpiry | None,
    current: csi.SyncedExpiry | None,
) -> dict[str, str]:
    """A change's certificate deadline (none without a synced certificate); the class's
    ``restarter.io/certificate-margin`` over the operator's, a Warning when unreadable."""
    if recorded is None and current is None:
        return {}
    metadata, default = body["metadata"], context.settings.certificate_margin
    try:
        margin = certificates.margin(metadata.get("annotations") or {}, default)
    except windows.ScheduleError as error:
        message = f"{error}; the operator's margin is used"
        context.logger.warning(message)
        context.events.post(body, reason=reasons.INVALID_CERTIFICATE_MARGIN, message=message)
        margin = default
    return csi.change_deadline(recorded, current, metadata["name"], margin)


def _class_window(context: SourceContext, body: Mapping[str, Any]) -> windows.WindowRequest | None:
    """The window of a class labelled ``restart-at``; None without the label, or (with a
    Warning on the class) when it cannot be read."""
    metadata = body["metadata"]
    if keys.RESTART_AT_LABEL not in (metadata.get("labels") or {}):
        return None
    settings = context.settings
    try:
        return windows.from_source(
            metadata, settings.timezone, settings.window_length, settings.min_window_length
        )
    except windows.ScheduleError as error:
        message = f"{error}; no restart is scheduled by this label"
        context.logger.warning(message)
        metrics.INVALID_WINDOWS.labels("SecretProviderClass").inc()
        context.events.post(body, reason=reasons.INVALID_WINDOW, message=message)
        return None


def check_class(context: SourceContext, statuses: PodStatuses, namespace: str, name: str) -> bool:
    """Compare what each dependent's pods report of the class with what is recorded on it,
    and stamp those with a new version; False when a stamp failed (check again)."""
    dependents = context.reference_map.dependents(namespace, SECRET_PROVIDER_CLASS, name)
    reports = statuses.of(namespace, name)
    if not dependents or not reports:
        return True
    body = _provider_class(context, namespace, name)
    request = _class_window(context, body)
    targets = context.reference_map.targets(
        namespace, SECRET_PROVIDER_CLASS, name, None, body["metadata"]
    )
    expiry = _synced_expiry(context, body)
    done = True
    for target in targets:
        reported = csi.reported_by(reports, (target.plural, target.name), dependents)
        if reported:
            done = _check_workload(context, body, request, target, reported, expiry) and done
    return done


def _check_workload(
    context: SourceContext,
    body: Mapping[str, Any],
    request: windows.WindowRequest | None,
    target: Target,
    reported: frozenset[csi.ObjectVersion],
    read: csi.SyncedExpiry | str | None,
) -> bool:
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    workload = context.api.read_workload(target.plural, namespace, target.name)
    metadata = (workload or {}).get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    recorded = csi.read_versions(annotations, name)
    change = csi.version_change(recorded, reported)
    expiry = None if isinstance(read, str) else read
    written = annotations.get(csi.not_after_key(name))
    moved = read != UNREAD and written != csi.not_after_record(expiry)
    if workload is None or (
        recorded is not None and not change.new_ids and not change.stale and not moved
    ):
        return True
    label = f"{WORKLOAD_KINDS[target.plural]} {target.name}"
    record = _record(name, change, expiry, metadata, moved)
    now = dt.datetime.now(dt.UTC)
    plan = None
    if change.changed:
        deadline = _deadline(context, body, csi.read_not_after(annotations, name), expiry)
        plan = _plan(context, name, request, target, change, now, deadline)
    if plan is None or not plan.targets:
        # First sight, or a change no window asked for: the versions are recorded alone,
        # so that a later opt-in does not restart for them.
        note = _recorded_note(label, change, expiry, moved)
        return _record_only(context, target, namespace, record, note)
    (patch,) = plan.patches.values()
    patch["metadata"]["annotations"] |= record["metadata"]["annotations"]
    patch["metadata"]["resourceVersion"] = metadata.get("resourceVersion")
    outcome = send_stamps(context, body, plan, change.change_id, now)
    if outcome.failed:
        message = f"could not schedule the restart of {outcome.failed}; will retry"
        context.events.post(body, reason=reasons.STAMP_FAILED, message=message)
        return False
    metrics.CHANGES.labels("SecretProviderClass").inc()
    (asked,) = plan.requests.values()
    message = (
        f"object versions changed ({describe_keys(change.new_ids)}) in the pods of {label}; "
        f"restart scheduled in window {asked.describe()}"
        + (
            f"; already restarted for this change: {outcome.done_before}"
            if outcome.done_before
            else ""
        )
    )
    context.logger.info(message)
    context.events.post(body, reason=reasons.CHANGE_DETECTED, message=message)
    return True


def _plan(
    context: SourceContext,
    name: str,
    request: windows.WindowRequest | None,
    target: Target,
    change: csi.VersionChange,
    now: dt.datetime,
    deadline: dict[str, str],
) -> FanOut:
    """The stamp of one workload for a change of the class: the objects with a new version
    named in its mark (ids, never values), and the synced certificate's deadline, if any."""
    return plan_fan_out(
        kind=SECRET_PROVIDER_CLASS,
        name=name,
        readers=[target._replace(keys=change.new_ids)],
        source_window=request,
        settings=context.settings,
        change_id=change.change_id,
        now=now,
        deadline=deadline,
        # The pods rotate within the driver's poll interval: the quiet period lets the
        # last of them report before the restart.
        quiet=context.settings.quiet,
    )


def _record(
    name: str,
    change: csi.VersionChange,
    expiry: csi.SyncedExpiry | None,
    metadata: Mapping[str, Any],
    moved: bool,
) -> dict[str, Any]:
    """The workload patch recording the versions its pods report now and, when it moved,
    the synced certificate's expiry (removed once the Secret holds none)."""
    annotations: dict[str, str | None] = {csi.versions_key(name): change.record}
    if moved:
        annotations[csi.not_after_key(name)] = csi.not_after_record(expiry)
    return {
        "metadata": {
            "annotations": annotations,
            "resourceVersion": metadata.get("resourceVersion"),
        }
    }


def _record_only(
    context: SourceContext,
    target: Target,
    namespace: str,
    record: dict[str, Any],
    note: str,
) -> bool:
    try:
        context.api.patch_workload(target.plural, namespace, target.name, record)
    except ApiError as error:
        what = f"{WORKLOAD_KINDS[target.plural]} {target.name}"
        context.logger.warning(
            f"could not record the object versions of {what}: {error.describe()}"
        )
        return False
    context.logger.info(note)
    return True


def _recorded_note(
    label: str, change: csi.VersionChange, expiry: csi.SyncedExpiry | None, moved: bool
) -> str:
    """The log line of versions recorded without a restart (with the synced certificate's
    expiry when that moved)."""
    if moved and not change.baseline and not change.changed:
        if expiry is None:
            return f"the Secrets synced for the pods of {label} hold no certificate now: recorded"
        return (
            f"the certificate synced into Secret {expiry.secret} for the pods of {label} "
            f"expires at {certificates.format_instant(expiry.not_after)}: recorded"
        )
    if change.baseline:
        return f"first sight of the object versions of {label}: recorded; nothing restarts"
    if change.changed:
        return (
            f"object versions changed in the pods of {label}, which asked for no window: "
            "recorded; nothing restarts"
        )
    return f"every pod of {label} reports the newer versions: recorded"


class ClassChecks:
    """Classes to check, each queued once however often the driver's reports change; one
    thread checks them in turn (a failed check comes back after ``RETRY_DELAY``)."""

    def __init__(
        self,
        statuses: PodStatuses,
        context_for: Callable[[str, str], SourceContext],
        in_sync: threading.Event,
    ) -> None:
        self.statuses, self.context_for, self.in_sync = statuses, context_for, in_sync
        self.stopping = threading.Event()
        self._queued: dict[tuple[str, str], float] = {}
        self._wake = threading.Condition()

    def submit(self, namespace: str, name: str, delay: float = 0.0) -> None:
        with self._wake:
            at = self._clock() + delay
            self._queued[namespace, name] = min(at, self._queued.get((namespace, name), at))
            self._wake.notify()

    @staticmethod
    def _clock() -> float:
        return dt.datetime.now(dt.UTC).timestamp()

    def _next(self) -> tuple[str, str] | None:
        with self._wake:
            while not self.stopping.is_set():
                now = self._clock()
                due = [key for key, at in self._queued.items() if at <= now]
                if due:
                    key = min(due, key=self._queued.__getitem__)
                    del self._queued[key]
                    return key
                wait = min((at - now for at in self._queued.values()), default=1.0)
                self._wake.wait(max(0.05, min(wait, 1.0)))
        return None

    def run(self) -> None:
        while (key := self._next()) is not None:
            while not self.in_sync.wait(1.0):
                if self.stopping.is_set():
                    return
            namespace, name = key
            try:
                done = check_class(
                    self.context_for(namespace, name), self.statuses, namespace, name
                )
            except Exception as error:  # the thread must outlive any one failure
                log.warning(f"[{namespace}/{name}] could not check SecretProviderClass: {error}")
                done = False
            if not done:
                self.submit(namespace, name, RETRY_DELAY)

    def start(self) -> ClassChecks:
        threading.Thread(target=self.run, name="csi-checks", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self._wake:
            self._wake.notify()
