"""Gates in the timer flow: before a due restart starts, do firing alerts or blocking pods
hold it? (``model.gates`` decides; this reads.)

Alertmanager's v2 API (``services.alertmanager``: active, not silenced, not inhibited) and the
blocking pods (a metadata-only list by label selector) are read at most once per
``TTL`` seconds for every restart. A source that cannot be read holds every restart, with a
Warning and ``restarter_gate_errors_total``, unless ``fail_open``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from restarter.model import gates
from restarter.model.gates import GateSettings
from restarter.model.holds import Hold
from restarter.services import metrics
from restarter.services.alertmanager import read_alerts
from restarter.services.kube import Api, short_failure

log = logging.getLogger(__name__)

#: Seconds a gate's answer serves every restart that asks.
TTL = 2.0
T = TypeVar("T")


class Gates:
    """The gate hold on a workload, if any (``hold_of``)."""

    def __init__(
        self,
        api: Api,
        settings: GateSettings,
        alerts: Callable[[str], list[dict[str, Any]]] = read_alerts,
    ) -> None:
        self.api, self.settings, self._read_alerts = api, settings, alerts
        self._cache: dict[tuple[str, str | None], tuple[float, Any, str | None]] = {}
        self._lock = threading.Lock()

    def _cached(
        self, key: tuple[str, str | None], read: Callable[[], T]
    ) -> tuple[T | None, str | None]:
        """What ``read`` answers (or why it failed), read again once ``TTL`` has passed."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < TTL:
            return cached[1], cached[2]
        value: T | None = None
        problem: str | None = None
        try:
            value = read()
        except Exception as error:
            problem = short_failure(error)
            metrics.GATE_ERRORS.labels(key[0]).inc()
            log.warning(f"the {key[0]} gate could not be read ({problem})")
        with self._lock:
            self._cache[key] = (now, value, problem)
        return value, problem

    def hold_of(self, workload: Mapping[str, Any]) -> Hold | None:
        namespace = (workload.get("metadata") or {}).get("namespace", "")
        scope = namespace if self.settings.namespace_only else None
        for check in (self._alert_hold, self._pod_hold):
            hold = check(scope)
            if hold is not None:
                return hold
        return None

    def _failed(self, what: str, problem: str) -> Hold | None:
        hold = gates.unreadable(what, problem)
        if self.settings.fail_open:
            return None
        return hold

    def _alert_hold(self, namespace: str | None) -> Hold | None:
        url = self.settings.alertmanager_url
        if not url:
            return None
        alerts, problem = self._cached(("alerts", None), lambda: self._read_alerts(url))
        if problem is not None or alerts is None:
            return self._failed("Alertmanager", problem or "no answer")
        return gates.alert_hold(gates.firing(alerts, self.settings.alert_filter, namespace))

    def _pod_hold(self, namespace: str | None) -> Hold | None:
        selector = self.settings.blocking_pods
        if not selector:
            return None
        pods, problem = self._cached(
            ("pods", namespace), lambda: self.api.selected_pods(namespace, selector)
        )
        if problem is not None or pods is None:
            return self._failed("the blocking pods", problem or "no answer")
        return gates.pod_hold(pods, selector)
