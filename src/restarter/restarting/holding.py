"""Holds in the timer flow: before a due restart asks for a pacing slot, is it held? (The
timer reports it, once per hold.)

The workload's own annotation comes with its body; its namespace's is read (one GET,
shared by the namespace's restarts for ``NAMESPACE_TTL`` seconds). A namespace that cannot
be read holds its restarts, with a Warning: a hold set there must not be ignored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from restarter.model import holds
from restarter.model.holds import Hold
from restarter.restarting.gating import Gates
from restarter.services.kube import Api, short_failure

#: Seconds a namespace's annotations, once read, answer for every restart in it.
NAMESPACE_TTL = 2.0


class HoldReader:
    """The hold on a workload, reading its namespace's annotations through ``api``."""

    def __init__(self, api: Api, operator_hold: str = "", gates: Gates | None = None) -> None:
        self.api, self.operator_hold, self.gates = api, operator_hold, gates
        self._namespaces: dict[str, tuple[float, Mapping[str, str] | None, str | None]] = {}
        self._lock = threading.Lock()

    def _namespace(self, name: str) -> tuple[Mapping[str, str] | None, str | None]:
        """The namespace's annotations, or why they could not be read."""
        now = time.monotonic()
        with self._lock:
            cached = self._namespaces.get(name)
        if cached is not None and now - cached[0] < NAMESPACE_TTL:
            return cached[1], cached[2]
        annotations: Mapping[str, str] | None = None
        problem: str | None = None
        try:
            found = self.api.read_namespace(name)
            annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
        except Exception as error:  # any failure holds, fail closed
            problem = short_failure(error)
        with self._lock:
            self._namespaces[name] = (now, annotations, problem)
        return annotations, problem

    def hold_of(self, workload: Mapping[str, Any]) -> Hold | None:
        metadata = workload.get("metadata") or {}
        namespace = metadata.get("namespace", "")
        workload_hold = holds.find_hold(
            metadata.get("annotations"), metadata.get("name", ""), {}, ""
        )
        if workload_hold is not None:
            return workload_hold
        annotations, problem = self._namespace(namespace)
        if problem is not None:
            return holds.unreadable_namespace(namespace, problem)
        hold = holds.find_hold(None, "", annotations, namespace, self.operator_hold)
        if hold is None and self.gates is not None:
            return self.gates.hold_of(workload)
        return hold
