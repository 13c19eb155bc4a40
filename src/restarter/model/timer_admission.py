"""Admission to kopf's timer: when a workload with pending marks is handed to it (its
window opens), the patches that hand it over (the pending label and our finalizer) and
back, and the repair of a label whose marks are gone."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from restarter.model import keys
from restarter.model.kinds import DEPLOYMENTS, KINDS, WorkloadKind
from restarter.model.restart_decisions import Action, decide_restart, leave_timer
from restarter.model.stamps import has_pending
from restarter.model.windows import WindowDefaults


def admission_due(workload: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime) -> float:
    """Epoch seconds from which a workload with pending marks is for kopf's timer: now when
    the timer has something to do (restart, clear, or report marks it cannot read or a
    pause), else when a window it waits for can next restart it (at least a second ahead:
    a timer that finds it not due hands it back, and must not get it again at once)."""
    decision = decide_restart(workload, defaults, now)
    if decision.action is not Action.WAIT:
        return now.timestamp()
    assert decision.next_due is not None  # a WAIT always knows it
    return max(now.timestamp() + 1.0, decision.next_due.timestamp())


def admit_patch(metadata: Mapping[str, Any], kind: WorkloadKind = DEPLOYMENTS) -> dict[str, Any]:
    """The pending label and our finalizer, at the version the marks were read at.

    kopf's timer selects the label. The finalizer goes in the same request (``finalizers``
    merges as a set under a strategic merge patch), so kopf finds it present and sends no
    patch of its own. A Rollout takes only a JSON merge patch, which would replace its
    whole finalizer list: there kopf's timer adds it before its first tick.
    """
    patched: dict[str, Any] = {
        "resourceVersion": metadata.get("resourceVersion"),
        "labels": {keys.PENDING_LABEL: "true"},
    }
    if kind.merges_finalizers:
        patched["finalizers"] = [keys.FINALIZER]
    return {"metadata": patched}


def due_at_stamp(
    plural: str, stamp: Mapping[str, Any], defaults: WindowDefaults, now: dt.datetime
) -> bool:
    """True when a stamp's own marks ask for a restart now (its window is open, or its
    certificate deadline has come, and no quiet period holds it): the workload can go to
    kopf's timer in the stamp's request. Judged from the stamp alone: a workload that turns
    out not to be due (restarted in this window already) is handed back by its timer."""
    kind = KINDS[plural]
    body = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"annotations": dict((stamp.get("metadata") or {}).get("annotations") or {})},
    }
    return decide_restart(body, defaults, now).action is Action.RESTART


def admitted_stamp(stamp: Mapping[str, Any], kind: WorkloadKind = DEPLOYMENTS) -> dict[str, Any]:
    """A stamp that also hands the workload to kopf's timer: the stamp's marks with the
    pending label and (where a patch can add it alone) our finalizer, one request where a
    stamp and an admission would be two."""
    metadata = dict(stamp.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), keys.PENDING_LABEL: "true"}
    if kind.merges_finalizers:
        metadata["finalizers"] = [keys.FINALIZER]
    return {**stamp, "metadata": metadata}


def hand_back_patch(
    metadata: Mapping[str, Any], kind: WorkloadKind = DEPLOYMENTS
) -> dict[str, Any]:
    """The pending label and our finalizer removed, the marks kept: a workload whose window
    is not open leaves kopf's timer until it is."""
    return {"metadata": leave_timer(metadata, kind)}


def label_repair(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The patch that removes a pending label without marks (marks removed by hand: kopf
    would keep watching for nothing), or None. A label is added only by admission."""
    labelled = keys.PENDING_LABEL in (metadata.get("labels") or {})
    if not labelled or has_pending(metadata.get("annotations")):
        return None
    # Conditional on the resourceVersion: a listed or watched body may be old, and the
    # workload stamped and admitted since.
    return {
        "metadata": {
            "resourceVersion": metadata.get("resourceVersion"),
            "labels": {keys.PENDING_LABEL: None},
        }
    }
