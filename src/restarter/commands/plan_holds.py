"""What keeps each pending workload back now, for ``restarter plan``: the operator's list of
blockers (``restarting.blocking``), asked as the operator asks it, read-only.

The holds differ in one way: a Namespace the user's kubeconfig cannot read is told once
through ``unreadable`` and its hold left out (the operator would hold its restarts). The
gates are those plan's flags name (the operator's ``--gate-*``), and the circuit breaker
judges first waves as the operator would, writing nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from restarter.model import holds, stamps
from restarter.model.gates import GateSettings
from restarter.model.holds import Hold
from restarter.restarting.blocking import Blocker, Blockers, gate_blockers
from restarter.restarting.breaker import Breaker
from restarter.services.kube.api import Api
from restarter.services.kube.errors import ApiError
from restarter.services.kube.reading import Reader


class PlanHolds:
    """The holds of ``blocking.HoldBlocker``, with a Namespace that cannot be read told and
    skipped instead of holding."""

    name = "holds"
    fails_open = False

    def __init__(
        self, api: Reader, operator_hold: str, unreadable: Callable[[str, str], None]
    ) -> None:
        self.api, self.operator_hold, self.unreadable = api, operator_hold, unreadable
        self._namespaces: dict[str, Mapping[str, str] | None] = {}

    def _annotations(self, namespace: str) -> Mapping[str, str] | None:
        if namespace not in self._namespaces:
            try:
                found = self.api.read_namespace(namespace)
                metadata = (found or {}).get("metadata") or {}
                self._namespaces[namespace] = metadata.get("annotations") or {}
            except ApiError as error:
                self.unreadable(namespace, error.brief)
                self._namespaces[namespace] = None
        return self._namespaces[namespace]

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        metadata = workload.get("metadata") or {}
        namespace = metadata.get("namespace", "")
        return holds.find_hold(
            metadata.get("annotations"),
            metadata.get("name", ""),
            self._annotations(namespace),
            namespace,
            self.operator_hold,
        )


class HoldsAsOfNow:
    """``hold_of(workload)`` for ``planning.plan``, and each blocker's state for its footer."""

    def __init__(
        self,
        api: Api,
        operator_hold: str,
        unreadable: Callable[[str, str], None],
        gates: GateSettings | None = None,
    ) -> None:
        blockers: list[Blocker] = [PlanHolds(api, operator_hold, unreadable)]
        blockers += gate_blockers(api, gates or GateSettings())
        # Its rollout timeout and halt expiry are the operator's defaults: plan shows a
        # verdict the operator may reach later with other settings, never earlier.
        blockers.append(Breaker(api, 600.0, None, read_only=True))
        self.blockers = Blockers(blockers)

    def hold_of(self, workload: Mapping[str, Any]) -> Hold | None:
        annotations = (workload.get("metadata") or {}).get("annotations") or {}
        if not stamps.has_pending(annotations):
            return None
        return self.blockers.ask(workload, dt.datetime.now(dt.UTC)).hold

    def states(self, namespace: str) -> list[tuple[str, str]]:
        """Each blocker as of now for a workload of ``namespace`` with nothing of its own."""
        probe = {"metadata": {"namespace": namespace, "name": "", "annotations": {}}}
        return self.blockers.states(probe, dt.datetime.now(dt.UTC))
