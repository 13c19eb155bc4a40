"""The workload kinds restarter restarts: one registry of what differs between them.

Each kind says its resource plural, its ``kind``, its API group and version, how it is
restarted, how its progress is read, and whether it is always served. Code asks the
registry (``KINDS[plural]``, ``of_body(body)``), never "is it a Rollout?".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model.progress import (
    Progress,
    of_daemonset,
    of_deployment,
    of_rollout,
    of_statefulset,
)


class Restart(enum.Enum):
    """How a kind is restarted, in the one patch that also clears its marks."""

    POD_TEMPLATE = "pod template"
    """``kubectl.kubernetes.io/restartedAt`` on the pod template, as ``kubectl rollout
    restart`` does, by strategic merge patch (``finalizers`` merges as a set)."""

    RESTART_AT = "spec.restartAt"
    """Argo Rollouts' ``spec.restartAt``: its controller replaces every pod created before
    it. A custom resource takes only a JSON merge patch, which replaces whole lists: its
    finalizer list is sent whole, conditional on the resourceVersion read."""


@dataclass(frozen=True)
class WorkloadKind:
    plural: str
    kind: str
    group: str
    version: str
    restart: Restart
    progress: Callable[[Mapping[str, Any]], Progress]
    """Whether its rollout is complete, by the rules ``kubectl rollout status`` uses (or
    the kind's own controller's word)."""

    built_in: bool = True
    """Always served (apps/v1); a custom resource only once its CRD is installed."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def merges_finalizers(self) -> bool:
        """A patch can add or remove our finalizer alone (strategic merge); otherwise the
        list is sent whole (JSON merge patch)."""
        return self.restart is Restart.POD_TEMPLATE


DEPLOYMENTS = WorkloadKind(
    "deployments", "Deployment", "apps", "v1", Restart.POD_TEMPLATE, of_deployment
)
STATEFULSETS = WorkloadKind(
    "statefulsets", "StatefulSet", "apps", "v1", Restart.POD_TEMPLATE, of_statefulset
)
DAEMONSETS = WorkloadKind(
    "daemonsets", "DaemonSet", "apps", "v1", Restart.POD_TEMPLATE, of_daemonset
)
#: Argo Rollouts' Rollout: restarted only while its CRD is served.
ROLLOUT_KIND = WorkloadKind(
    "rollouts",
    "Rollout",
    "argoproj.io",
    "v1alpha1",
    Restart.RESTART_AT,
    of_rollout,
    built_in=False,
)

#: Every kind restarter restarts, by resource plural.
KINDS: dict[str, WorkloadKind] = {
    kind.plural: kind for kind in (DEPLOYMENTS, STATEFULSETS, DAEMONSETS, ROLLOUT_KIND)
}
_BY_KIND = {kind.kind: kind for kind in KINDS.values()}

#: Argo Rollouts' resource plural.
ROLLOUTS = ROLLOUT_KIND.plural
#: Each kind's ``kind``, by plural.
WORKLOAD_KINDS = {plural: kind.kind for plural, kind in KINDS.items()}
#: The built-in (``apps/v1``) kinds: always served.
APPS_KINDS = tuple(plural for plural, kind in KINDS.items() if kind.built_in)
#: Each kind's (API group, version), by plural.
WORKLOAD_APIS = {plural: (kind.group, kind.version) for plural, kind in KINDS.items()}


def api_version(plural: str) -> str:
    return KINDS[plural].api_version


def of_body(body: Mapping[str, Any]) -> WorkloadKind:
    """A body's kind, by its ``kind`` field; a body without one (an item of a list) is
    restarted as the built-in kinds are."""
    return _BY_KIND.get(str(body.get("kind") or ""), DEPLOYMENTS)


def progress(plural: str, body: Mapping[str, Any]) -> Progress:
    """Whether the rollout of a workload of this kind is complete."""
    return KINDS[plural].progress(body)
