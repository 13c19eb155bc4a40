"""The Secrets Store CSI Driver's view: what its ``SecretProviderClassPodStatus`` objects
report, per SecretProviderClass, kept from a list and watch of them.

Nothing is listed or watched until the API server serves the kind (asked at start and every
``DISCOVERY_INTERVAL``): a cluster without the driver's CRDs gets one warning in the log,
one ``CSINotServed`` Warning Event on the operator's own Pod (``NotServed``; none outside a
pod) and ``restarter_csi_served`` 0, and the kind is picked up when the CRDs are installed,
without a restart. Each status is kept as its pod, class, whether mounted, and its object ids and
versions (the driver writes no values there).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from restarter.cluster.list_watching import PAGE_SIZE, WATCH_TIMEOUT, ListWatch, describe
from restarter.model import csi
from restarter.model.csi import PodStatus
from restarter.model.reasons import CSI_NOT_SERVED
from restarter.services import metrics
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.kube.watching import WatchStream

log = logging.getLogger(__name__)

#: Seconds between two discoveries of the driver's kinds while they are not served.
DISCOVERY_INTERVAL = 10.0

#: A SecretProviderClass: (namespace, name).
ClassKey = tuple[str, str]


class NotServed:
    """Tells, once per run however many streams find the kind not served, with a Warning
    Event on the operator's own Pod (``pod``: None outside a pod, where the log line and
    the metric say it alone)."""

    MESSAGE = (
        "the Secrets Store CSI Driver's CRDs are not installed "
        f"({csi.POD_STATUSES}.{csi.GROUP}/{csi.VERSION} is not served): restarter carries on "
        "with Secrets and ConfigMaps, and starts watching SecretProviderClasses as soon as the "
        "CRDs are installed, without a restart"
    )

    def __init__(self, events: Events, pod: dict[str, Any] | None) -> None:
        self.events, self.pod = events, pod
        self._told = False
        self._lock = threading.Lock()

    def tell(self) -> None:
        with self._lock:
            if self._told:
                return
            self._told = True
        if self.pod is None:
            log.info("not in a pod (no POD_NAME): no CSINotServed Event, only this log")
            return
        self.events.post(self.pod, reason=CSI_NOT_SERVED, message=self.MESSAGE)


class PodStatuses:
    """(namespace, class) → the status objects reporting it; thread-safe."""

    def __init__(self) -> None:
        self._by_class: dict[ClassKey, dict[str, PodStatus]] = {}
        self._lock = threading.Lock()

    def of(self, namespace: str, provider_class: str) -> list[PodStatus]:
        with self._lock:
            return list(self._by_class.get((namespace, provider_class), {}).values())

    def put(self, status: PodStatus) -> bool:
        """Keep one status; True when what it reports is new (not the same as kept)."""
        key = (status.namespace, status.provider_class)
        with self._lock:
            kept = self._by_class.setdefault(key, {})
            before = kept.get(status.name)
            kept[status.name] = status
        return before is None or (before.mounted, before.objects) != (
            status.mounted,
            status.objects,
        )

    def drop(self, namespace: str, name: str) -> None:
        with self._lock:
            for key, kept in list(self._by_class.items()):
                if key[0] == namespace and kept.pop(name, None) is not None and not kept:
                    del self._by_class[key]

    def replace(self, namespace: str | None, listed: list[PodStatus]) -> list[ClassKey]:
        """A complete listing (of ``namespace``; None: all): the classes it reports."""
        with self._lock:
            for key in [key for key in self._by_class if namespace in (None, key[0])]:
                del self._by_class[key]
            for status in listed:
                key = (status.namespace, status.provider_class)
                self._by_class.setdefault(key, {})[status.name] = status
            return sorted({(status.namespace, status.provider_class) for status in listed})


class PodStatusStream(ListWatch):
    """The driver's status objects in one namespace (None: all), once the kind is served;
    ``changed(namespace, class)`` is told of every class whose reports may have changed."""

    def __init__(
        self,
        api: Api,
        statuses: PodStatuses,
        namespace: str | None,
        stopping: threading.Event,
        changed: Callable[[str, str], None],
        not_served: NotServed | None = None,
    ) -> None:
        super().__init__(csi.POD_STATUSES, namespace, stopping, lambda: None)
        self.api, self.statuses, self.changed = api, statuses, changed
        self.not_served = not_served

    def run(self) -> None:
        if not self._wait_until_served():
            return
        metrics.CSI_SERVED.set(1)
        log.info(f"{csi.POD_STATUSES}.{csi.GROUP} are served: watching them in {self.scope}")
        super().run()

    def _wait_until_served(self) -> bool:
        """Ask discovery until the kind is served (True), or until stopped (False)."""
        said = False
        while not self.stopping.is_set():
            try:
                if self.api.served_resource(csi.GROUP, csi.VERSION, csi.POD_STATUSES):
                    return True
            except Exception as error:  # asked again later
                log.warning(
                    f"could not ask whether {csi.POD_STATUSES} are served: {describe(error)}"
                )
            if not said:
                said = True
                metrics.CSI_SERVED.set(0)
                log.warning(
                    f"the Secrets Store CSI Driver's CRDs are not installed "
                    f"({csi.POD_STATUSES}.{csi.GROUP}/{csi.VERSION} is not served): "
                    "SecretProviderClasses are not watched; Secrets and ConfigMaps are; asking "
                    f"again every {DISCOVERY_INTERVAL:g}s"
                )
                if self.not_served is not None:
                    self.not_served.tell()
            if self.stopping.wait(DISCOVERY_INTERVAL):
                return False
        return False

    def list_page(self, token: str | None) -> dict[str, Any]:
        return self.api.list_pod_statuses(self.namespace, token, PAGE_SIZE)

    def open_watch(self, resource_version: str) -> WatchStream:
        return self.api.watch_pod_statuses(self.namespace, resource_version, WATCH_TIMEOUT)

    def decode_event(self, line: str) -> dict[str, Any]:
        return dict(json.loads(line))

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        status = csi.read_pod_status(item)
        if status is not None:
            listing[status.namespace, status.name] = status

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        classes = self.statuses.replace(self.namespace, list(listing.values()))
        for namespace, provider_class in classes:
            self.changed(namespace, provider_class)
        return f" reporting {len(classes)} SecretProviderClass(es)"

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        if kind == "DELETED":
            self.statuses.drop(str(metadata.get("namespace") or ""), str(metadata.get("name")))
            return
        status = csi.read_pod_status(body)
        if status is not None and self.statuses.put(status):
            self.changed(status.namespace, status.provider_class)
