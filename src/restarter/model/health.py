"""How a restarted workload fares with new data: the circuit breaker's reading of a first
wave (``model.waves``). A workload is unhealthy when its rollout fails (a Deployment's
``ProgressDeadlineExceeded``, a Rollout's ``Degraded``), does not complete within the rollout
timeout, or a pod created after its restart has a container that restarted or waits in a
reason that means it cannot run. Healthy once rolled out and Ready for the soak time.

Pure: the caller reads the workload and its pods; ``now`` is an argument. What it says of a
pod names the pod, the container, the reason and the counts: never a value.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from restarter.model import keys, kinds, pending
from restarter.model.progress import Progress

#: Container waiting reasons that mean the new value (or the pod) cannot run.
BAD_WAITING = frozenset(
    {
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "ImagePullBackOff",
        "ErrImagePull",
        "RunContainerError",
    }
)


class Health(enum.Enum):
    HEALTHY = "healthy"  # rolled out and soaked
    SOAKING = "soaking"  # rolled out, not yet healthy for the soak time
    ROLLING = "rolling"  # restarted, rollout not complete yet
    WAITING = "waiting"  # not restarted for the change yet
    GONE = "gone"  # deleted, opted out or cleared without restarting: not judged
    UNHEALTHY = "unhealthy"


@dataclass(frozen=True)
class Verdict:
    health: Health
    why: str = ""
    until: float | None = None
    """For SOAKING: epoch seconds when the soak ends."""


def _seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_trouble(pod: Mapping[str, Any]) -> str | None:
    """Why a pod of the new value is unhealthy: a container that restarted, or waits in
    ``BAD_WAITING``; None when none does. Names the container, reason and count only."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name", "?")
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    for container in containers:
        restarts = int(container.get("restartCount") or 0)
        waiting = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        terminated = (container.get("lastState") or {}).get("terminated") or {}
        if waiting in BAD_WAITING or restarts > 0:
            how = waiting or f"exited ({terminated.get('reason') or 'Error'})"
            exit_code = terminated.get("exitCode")
            code = f", exit code {exit_code}" if exit_code is not None else ""
            return (
                f"pod {name} container {container.get('name', '?')}: {how}, "
                f"restarted {restarts} time(s){code}"
            )
    return None


def new_pods(pods: Iterable[Mapping[str, Any]], restarted: float) -> list[Mapping[str, Any]]:
    """The pods created at or after the restart (whole seconds): every pod that started
    after the change reads the new value, whichever ReplicaSet or revision it belongs to."""
    found = []
    for pod in pods:
        created = _seconds((pod.get("metadata") or {}).get("creationTimestamp"))
        if created is not None and created >= restarted:
            found.append(pod)
    return found


def _ready_since(pods: Sequence[Mapping[str, Any]], restarted: float) -> float:
    """When the last of the new pods became Ready (the restart, when there are none)."""
    latest = restarted
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                latest = max(latest, _seconds(condition.get("lastTransitionTime")) or latest)
    return latest


def assess(
    plural: str,
    workload: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    token: str,
    change: str,
    now: dt.datetime,
    soak: float,
    rollout_timeout: float,
) -> Verdict:
    """How a first-wave workload fares with a change (``token``: the source's mark token).
    ``pods``: the pods its pod template's labels select, read only once it restarted."""
    if workload is None:
        return Verdict(Health.GONE, "deleted")
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    recorded = pending.restarted_for(annotations)
    if recorded.get(token) != change:
        marked = f"{keys.PENDING_MARK}/{token}" in annotations
        return Verdict(Health.WAITING, "not restarted yet") if marked else Verdict(Health.GONE)
    restarted = float(keys.epoch_seconds(annotations.get(keys.RESTART_TS)) or 0)
    status = workload.get("status") or {}
    if plural == "rollouts" and status.get("phase") == "Degraded":
        return Verdict(Health.UNHEALTHY, "its Rollout is Degraded")
    progress = kinds.progress(plural, workload)
    if progress is Progress.FAILED:
        return Verdict(Health.UNHEALTHY, "its rollout failed (ProgressDeadlineExceeded)")
    fresh = new_pods(pods, restarted)
    for pod in fresh:
        trouble = pod_trouble(pod)
        if trouble is not None:
            return Verdict(Health.UNHEALTHY, trouble)
    waited = now.timestamp() - restarted
    if progress is not Progress.COMPLETE:
        if waited >= rollout_timeout:
            return Verdict(Health.UNHEALTHY, f"its rollout did not complete in {int(waited)}s")
        return Verdict(Health.ROLLING, "rolling out")
    until = _ready_since(fresh, restarted) + soak
    if now.timestamp() < until:
        return Verdict(Health.SOAKING, "soaking", until)
    return Verdict(Health.HEALTHY)


def template_selector(workload: Mapping[str, Any]) -> str:
    """A label selector of the pods of the workload's pod template (its labels, which
    every pod it creates carries); empty when it has none."""
    template = ((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels = template.get("labels") or {}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
