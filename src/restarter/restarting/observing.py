"""What the workload streams' bodies feed besides the reference map: admission to kopf's
timers, the pending label's repair, the pacer's view of rollouts, the marks seen (for the
timer), the pending gauge; and the pacer's upkeep thread."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from restarter.cluster.seen_marks import SeenMarks
from restarter.model import keys, reasons, stamps, timer_admission
from restarter.model.kinds import WORKLOAD_KINDS, api_version
from restarter.model.references import WorkloadKey, workload_key
from restarter.model.windows import WindowDefaults
from restarter.restarting.admitting import Admissions
from restarter.restarting.pacing import Pacer
from restarter.services import metrics
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.kube.errors import ApiError, Conflict

log = logging.getLogger(__name__)

#: Seconds between the pacer's sweeps for rollouts past their timeout.
SWEEP_INTERVAL = 5.0


class WorkloadObserver:
    """The streams' ``Inspector``: every workload body seen, every workload gone."""

    def __init__(
        self,
        api: Api,
        pacer: Pacer,
        seen: SeenMarks,
        admissions: Admissions,
        defaults: WindowDefaults,
    ) -> None:
        self.api, self.pacer, self.seen = api, pacer, seen
        self.admissions, self.defaults = admissions, defaults
        self.pending = metrics.PendingWorkloads()
        self._known: dict[tuple[str, str | None], set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        self.pacer.observe(plural, body, time.time())
        self.seen.observe(plural, body)
        marked = stamps.has_pending(metadata.get("annotations"))
        self.pending.observe(WORKLOAD_KINDS[plural], namespace, name, marked)
        key = workload_key(plural, body)
        if not marked:
            self.admissions.forget(key)
            repair_label(plural, body, self.api)
        elif keys.PENDING_LABEL in (metadata.get("labels") or {}):
            self.admissions.labelled(key)
        else:
            now = dt.datetime.now(dt.UTC)
            try:
                due = timer_admission.admission_due(body, self.defaults, now)
            except Exception as error:  # a stream must not stop on one odd body
                log.warning(
                    f"{WORKLOAD_KINDS[plural]} {namespace}/{name}: could not tell when it is "
                    f"due ({type(error).__name__}); its timer decides now"
                )
                due = now.timestamp()
            self.admissions.wait(key, str(metadata.get("resourceVersion")), due)

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        self.admissions.forget((plural, namespace, name))
        self.pacer.forget((plural, namespace, name))
        self.seen.forget((plural, namespace, name))
        self.pending.observe(WORKLOAD_KINDS[plural], namespace, name, False)

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        """Workloads deleted while a stream was not watching are forgotten too."""
        with self._lock:
            before = self._known.get((plural, namespace), set())
            self._known[plural, namespace] = present
        for gone_namespace, gone_name in before - present:
            self.deleted(plural, gone_namespace, gone_name)


class PacerSweeper:
    """A daemon thread: frees the slots of rollouts past their timeout, with a Warning
    Event on each, and keeps the in-flight gauge current."""

    def __init__(self, events: Events, pacer: Pacer) -> None:
        self.events, self.pacer = events, pacer
        self.stopping = threading.Event()

    def start(self) -> PacerSweeper:
        threading.Thread(target=self._run, name="pacer-sweep", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.wait(SWEEP_INTERVAL):
            try:
                self.sweep_once()
            except Exception as error:  # the sweeper must outlive any one failure
                log.warning(f"pacing sweep: {type(error).__name__}: {error}")

    def sweep_once(self) -> None:
        for stalled in self.pacer.sweep(time.time()):
            self._warn(stalled.key, stalled.uid, stalled.restarted_at, stalled.reason)
        metrics.IN_FLIGHT.set(self.pacer.in_flight())

    def _warn(self, key: WorkloadKey, uid: str, restarted_at: float, reason: str) -> None:
        plural, namespace, name = key
        restarted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(restarted_at))
        message = f"restart at {restarted}: {reason}; its pacing slot is freed"
        log.warning(f"{WORKLOAD_KINDS[plural]} {namespace}/{name}: {message}")
        metrics.STALLED.labels(WORKLOAD_KINDS[plural]).inc()
        about = {
            "apiVersion": api_version(plural),
            "kind": WORKLOAD_KINDS[plural],
            "metadata": {"namespace": namespace, "name": name, "uid": uid},
        }
        self.events.post(about, reason=reasons.ROLLOUT_STALLED, message=message)


def repair_label(plural: str, workload: Mapping[str, Any], api: Api) -> None:
    """Remove a pending label whose marks are gone (removed by hand)."""
    metadata = workload.get("metadata") or {}
    patch = timer_admission.label_repair(metadata)
    if patch is None:
        return
    try:
        api.patch_workload(plural, metadata["namespace"], metadata["name"], patch)
    except Conflict:
        return  # changed meanwhile: its next event is looked at again
    except ApiError as error:  # a watch stream must not stop on one refused patch
        log.warning(
            f"could not remove the pending label of {WORKLOAD_KINDS[plural]} "
            f"{metadata['namespace']}/{metadata['name']}: {error.describe()}"
        )
        return
    log.info(
        f"removed the {keys.PENDING_LABEL} label from {WORKLOAD_KINDS[plural]} "
        f"{metadata['namespace']}/{metadata['name']}: it has no pending marks"
    )
