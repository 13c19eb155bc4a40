"""What holds each pending workload now, for ``restarter plan``: its own annotation, its
namespace's (read once per namespace), the operator's ``--hold``, and the circuit breaker
of its changes' waves (judged as the operator would, read-only)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from restarter.model import holds, stamps
from restarter.model.holds import Hold
from restarter.restarting.breaker import Breaker
from restarter.services.kube import Api, short_failure


class HoldsAsOfNow:
    """``hold_of(workload)`` for ``planning.plan``; a namespace that cannot be read is told
    once through ``unreadable`` (the user's kubeconfig may not read Namespaces) and its
    hold left out."""

    def __init__(
        self, api: Api, operator_hold: str, unreadable: Callable[[str, str], None]
    ) -> None:
        self.api, self.operator_hold, self.unreadable = api, operator_hold, unreadable
        self._namespaces: dict[str, Mapping[str, str] | None] = {}
        # Its rollout timeout and halt expiry are the operator's defaults: plan shows a
        # verdict the operator may reach later with other settings, never earlier.
        self.breaker = Breaker(api, 600.0, None, read_only=True)

    def _annotations(self, namespace: str) -> Mapping[str, str] | None:
        if namespace not in self._namespaces:
            try:
                found = self.api.read_namespace(namespace)
                metadata = (found or {}).get("metadata") or {}
                self._namespaces[namespace] = metadata.get("annotations") or {}
            except Exception as error:
                self.unreadable(namespace, short_failure(error))
                self._namespaces[namespace] = None
        return self._namespaces[namespace]

    def hold_of(self, workload: Mapping[str, Any]) -> Hold | None:
        metadata = workload.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        if not stamps.has_pending(annotations):
            return None
        namespace = metadata.get("namespace", "")
        hold = holds.find_hold(
            annotations,
            metadata.get("name", ""),
            self._annotations(namespace),
            namespace,
            self.operator_hold,
        )
        if hold is not None:
            return hold
        try:
            return self.breaker.blocks(workload, dt.datetime.now(dt.UTC))
        except Exception as error:
            self.unreadable(namespace, f"its sources' waves: {short_failure(error)}")
            return None
