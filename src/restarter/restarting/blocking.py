"""Blockers: what keeps a due restart back, asked in order before it takes a pacing slot.

Every blocker answers one question, ``blocks(workload, now)``: the ``Hold`` that keeps this
workload's restart back now, or None. A blocker that cannot read what it needs raises, and
``Blockers`` applies its failure policy (``fails_open``): closed, the restart waits with a
hold that says why (``gates.unreadable``); open, it goes ahead, and the caller is told so
(a ``GateFailedOpen`` Warning and ``restarter_gate_failed_open_total``). A new gate (a
maintenance calendar) is one more class with these two members, added to the list in
``operator.components``.

The list, in order: holds (the workload's, its Namespace's, the operator's), the alert gate,
the pod gate, the circuit breaker (``restarting.breaker``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from restarter.cluster.namespace_watching import NamespaceHolds
from restarter.model import gates, holds, keys
from restarter.model.gates import GateSettings
from restarter.model.holds import Hold
from restarter.services import metrics
from restarter.services.alertmanager import read_alerts
from restarter.services.kube.errors import ApiError
from restarter.services.kube.reading import Reader

log = logging.getLogger(__name__)

T = TypeVar("T")


class Blocker(Protocol):
    """One reason a due restart may have to wait."""

    @property
    def name(self) -> str:
        """How ``plan``, logs and metrics name it: ``holds``, ``alerts``, ``pods``, ``breaker``."""
        ...

    @property
    def fails_open(self) -> bool:
        """True: when it cannot read what it needs, restarts go ahead (told as a Warning)."""
        ...

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        """What holds this workload's restart now; raises when it cannot tell."""
        ...


@dataclass(frozen=True)
class Answer:
    """What the blockers say of one due restart."""

    hold: Hold | None
    failed_open: tuple[str, ...] = ()
    """Blockers that could not be read and let it through: ``'<name>: <why>'`` each."""


class Blockers:
    """The blockers, asked in order; the first hold found is the answer."""

    def __init__(self, blockers: Sequence[Blocker]) -> None:
        self.blockers = tuple(blockers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(blocker.name for blocker in self.blockers)

    def ask(self, workload: Mapping[str, Any], now: dt.datetime) -> Answer:
        failed_open: list[str] = []
        for blocker in self.blockers:
            try:
                hold = blocker.blocks(workload, now)
            except Exception as error:  # any failure is the blocker's failure policy's
                problem = _brief(error)
                metrics.GATE_ERRORS.labels(blocker.name).inc()
                log.warning(f"the {blocker.name} gate could not be read ({problem})")
                if not blocker.fails_open:
                    hold = gates.unreadable(_what(blocker.name), problem)
                    return Answer(hold, tuple(failed_open))
                metrics.GATE_FAILED_OPEN.labels(blocker.name).inc()
                failed_open.append(f"{_what(blocker.name)} could not be read ({problem})")
                continue
            if hold is not None:
                return Answer(hold, tuple(failed_open))
        return Answer(None, tuple(failed_open))

    def states(self, workload: Mapping[str, Any], now: dt.datetime) -> list[tuple[str, str]]:
        """Each blocker's answer for ``plan``: (name, ``clear`` / the hold / why unreadable)."""
        rows = []
        for blocker in self.blockers:
            try:
                hold = blocker.blocks(workload, now)
            except Exception as error:
                policy = "fails open" if blocker.fails_open else "holds"
                rows.append((blocker.name, f"unreadable ({_brief(error)}): {policy}"))
                continue
            rows.append((blocker.name, "clear" if hold is None else hold.describe()))
        return rows


def _brief(error: Exception) -> str:
    """A blocker's failure as its hold and Warning tell it: ``HTTP <status>`` or what
    failed, never a message (Alertmanager's errors may carry its URL)."""
    if isinstance(error, ApiError):
        return error.brief
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code}"
    return type(error).__name__


def _what(name: str) -> str:
    return {"alerts": "Alertmanager", "pods": "the blocking pods"}.get(name, f"the {name}")


class Cached(Generic[T]):
    """What a read answers (or the error it raised), read again once ``ttl`` has passed:
    one read serves every restart that asks meanwhile, and restarts that ask while it is
    under way wait for it rather than read too (a window opening on a thousand restarts
    makes one read, not a thousand). An answer derived from another answer is asked with
    that answer's ``version``: it serves only the same version."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._answers: dict[Any, tuple[float, Any, T | None, BaseException | None]] = {}
        self._reading: dict[Any, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, read: Callable[[], T], version: Any = None) -> T:
        while True:
            now = time.monotonic()
            with self._lock:
                cached = self._answers.get(key)
                fresh = cached is not None and now - cached[0] < self.ttl and cached[1] == version
                under_way = None if fresh else self._reading.get(key)
                if not fresh and under_way is None:
                    self._reading[key] = threading.Event()
            if fresh:
                break
            if under_way is not None:
                under_way.wait()  # then take what it read, or read if it was not this version
                continue
            cached = self._read(key, read, version, now)
            break
        assert cached is not None
        if cached[3] is not None:
            raise cached[3]
        return cached[2]  # type: ignore[return-value]

    def _read(
        self, key: Any, read: Callable[[], T], version: Any, now: float
    ) -> tuple[float, Any, T | None, BaseException | None]:
        value: T | None = None
        error: BaseException | None = None
        answered = False
        try:
            value = read()
            answered = True
        except Exception as failure:
            error, answered = failure, True
        finally:  # whatever happens, those waiting for this read go on
            with self._lock:
                if answered:
                    self._answers[key] = (now, version, value, error)
                self._reading.pop(key).set()
        return (now, version, value, error)

    def forget(self, key: Any) -> None:
        with self._lock:
            self._answers.pop(key, None)


#: Seconds a gate's or a Namespace's answer serves every restart that asks.
TTL = 2.0


class HoldBlocker:
    """``restarter.io/hold`` on the workload, on its Namespace, or the operator's
    ``--hold``. A Namespace's hold comes from the namespace stream (``watched``) while it is
    in sync; otherwise the Namespace is read (once per ``TTL``). A Namespace that cannot be
    read holds its restarts: a hold set there must not be ignored (fail closed, with a
    Warning)."""

    name = "holds"
    fails_open = False

    def __init__(
        self, api: Reader, operator_hold: str = "", watched: NamespaceHolds | None = None
    ) -> None:
        self.api, self.operator_hold, self.watched = api, operator_hold, watched
        self._namespaces: Cached[str | None] = Cached(TTL)

    def _read_hold(self, namespace: str) -> str | None:
        found = self.api.read_namespace(namespace)
        annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(keys.HOLD)

    def _namespace_hold(self, namespace: str) -> str | None:
        watched = self.watched
        if watched is not None and watched.known():
            return watched.hold(namespace)
        return self._namespaces.get(namespace, lambda: self._read_hold(namespace))

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        metadata = workload.get("metadata") or {}
        namespace = metadata.get("namespace", "")
        own = holds.find_hold(metadata.get("annotations"), metadata.get("name", ""), {}, "")
        if own is not None:
            return own
        try:
            reason = self._namespace_hold(namespace)
        except Exception as error:  # held, and said so: the namespace's own unreadable hold
            return holds.unreadable_namespace(namespace, _brief(error))
        if reason is not None:
            return Hold(holds.NAMESPACE, namespace, reason)
        return holds.find_hold(None, "", None, namespace, self.operator_hold)


class AlertGate:
    """Alerts firing in Alertmanager that match the filter (v2 API: active, not silenced,
    not inhibited), read once per ``TTL`` for every restart."""

    name = "alerts"

    def __init__(
        self,
        settings: GateSettings,
        alerts: Callable[[str], list[dict[str, Any]]] = read_alerts,
    ) -> None:
        self.settings, self._read_alerts = settings, alerts
        self._cache: Cached[list[dict[str, Any]]] = Cached(TTL)

    @property
    def fails_open(self) -> bool:
        return self.settings.fail_open

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        url = self.settings.alertmanager_url
        alerts = self._cache.get(None, lambda: self._read_alerts(url))
        namespace = (workload.get("metadata") or {}).get("namespace", "")
        scope = namespace if self.settings.namespace_only else None
        return gates.alert_hold(gates.firing(alerts, self.settings.alert_filter, scope))


class PodGate:
    """Pods matching a label selector (a backup, a migration): listed as metadata only,
    once per ``TTL`` (per namespace with ``namespace_only``)."""

    name = "pods"

    def __init__(self, api: Reader, settings: GateSettings) -> None:
        self.api, self.settings = api, settings
        self._cache: Cached[list[str]] = Cached(TTL)

    @property
    def fails_open(self) -> bool:
        return self.settings.fail_open

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        selector = self.settings.blocking_pods
        namespace = (workload.get("metadata") or {}).get("namespace", "")
        scope = namespace if self.settings.namespace_only else None
        pods = self._cache.get(scope, lambda: self.api.selected_pods(scope, selector))
        return gates.pod_hold(pods, selector)


def gate_blockers(api: Reader, settings: GateSettings) -> list[Blocker]:
    """The gates the settings turn on, alerts first."""
    found: list[Blocker] = []
    if settings.alertmanager_url:
        found.append(AlertGate(settings))
    if settings.blocking_pods:
        found.append(PodGate(api, settings))
    return found
