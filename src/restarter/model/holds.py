"""Holds: a restart that is due, but that a person asked to wait.

``restarter.io/hold: "<reason>"`` on a workload holds its restarts; on a Namespace, every
restart in it; the operator's ``--hold`` (the chart's ``hold``), every restart. A held
workload keeps its marks: it restarts when the hold is removed, in a window still open
then, else in its next one. Pure: the caller reads the annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from restarter.model import keys

#: Where a hold was set, most specific first: the first found is the one named.
WORKLOAD, NAMESPACE, OPERATOR = "workload", "namespace", "operator"
#: Where a gate's hold comes from (``model.gates``): a firing alert, a blocking pod, or a
#: gate whose source could not be read.
ALERT, POD, GATE = "alert", "pod", "gate"
#: The circuit breaker of a change (``model.waves``): its first wave is being judged, or
#: failed and halted the change.
BREAKER = "breaker"


@dataclass(frozen=True)
class Hold:
    """What holds a restart, and why (the reason its author wrote)."""

    where: str
    """``WORKLOAD``, ``NAMESPACE`` or ``OPERATOR``."""

    name: str
    """The namespace's or workload's name; empty for the operator's hold."""

    reason: str

    unreadable: bool = False
    """True for a namespace whose annotations could not be read (held, fail closed)."""

    halted: bool = False
    """True for a change the circuit breaker halted: a Warning on the workload."""

    judging: bool = False
    """True while the breaker waits for a first wave: it lifts by itself, so a due
    restart asks again every few tenths of a second instead of once per tick."""

    def describe(self) -> str:
        """How Events, logs and ``plan`` name it."""
        reason = self.reason.strip() or "no reason given"
        if self.where in (ALERT, POD, GATE):
            return f"held by a gate: {reason}"
        if self.where == BREAKER:
            return f"held by the circuit breaker of {self.name}: {reason}"
        if self.where == OPERATOR:
            return f"held by the operator's --hold: {reason}"
        return f"held by {keys.HOLD} on {self.where} {self.name}: {reason}"


def unreadable_namespace(namespace: str, why: str) -> Hold:
    """The hold of a namespace whose annotations could not be read: restarts wait (a hold
    there would otherwise be ignored, and a restart during a freeze cannot be undone)."""
    return Hold(NAMESPACE, namespace, f"its annotations could not be read ({why})", True)


def find_hold(
    workload_annotations: Mapping[str, str] | None,
    workload_name: str,
    namespace_annotations: Mapping[str, str] | None,
    namespace: str,
    operator_hold: str = "",
) -> Hold | None:
    """The hold on a workload, its namespace or the operator, most specific first; None
    when nothing holds it. The annotation's presence holds, whatever its value."""
    reason = (workload_annotations or {}).get(keys.HOLD)
    if reason is not None:
        return Hold(WORKLOAD, workload_name, reason)
    reason = (namespace_annotations or {}).get(keys.HOLD)
    if reason is not None:
        return Hold(NAMESPACE, namespace, reason)
    if operator_hold.strip():
        return Hold(OPERATOR, "", operator_hold.strip())
    return None
