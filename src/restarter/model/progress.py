"""Whether a workload's rollout is complete, by the rules ``kubectl rollout status`` uses.

Pure: a workload body (plain dict) in, a ``Progress`` out; ``kinds`` says which reader
each workload kind uses (``kinds.progress``). An Argo Rollout is complete by its own
controller's word: ``status.phase`` Healthy and ``status.restartedAt`` caught up with
``spec.restartAt``.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any


class Progress(enum.Enum):
    COMPLETE = "complete"
    PROGRESSING = "progressing"
    #: The Deployment controller gave up (``ProgressDeadlineExceeded``): it never completes.
    FAILED = "failed"


def _parts(
    body: Mapping[str, Any],
) -> tuple[int, int, Mapping[str, Any], Mapping[str, Any]]:
    """A body's generation, observed generation, spec and status."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    generation = metadata.get("generation") or 0
    observed = status.get("observedGeneration") or 0
    return generation, observed, body.get("spec") or {}, status


def of_deployment(body: Mapping[str, Any]) -> Progress:
    return _deployment(*_parts(body))


def of_statefulset(body: Mapping[str, Any]) -> Progress:
    return _statefulset(*_parts(body))


def of_daemonset(body: Mapping[str, Any]) -> Progress:
    return _daemonset(*_parts(body))


def of_rollout(body: Mapping[str, Any]) -> Progress:
    _, _, spec, status = _parts(body)
    return _rollout(spec, status)


def _rollout(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress:
    """Argo Rollouts sets ``status.restartedAt`` to ``spec.restartAt`` once every pod is
    newer than it, and ``status.phase`` Healthy once the rollout is done (its phase also
    covers an unobserved generation)."""
    if status.get("phase") != "Healthy":
        return Progress.PROGRESSING
    asked = _instant(spec.get("restartAt"))
    if asked is None:
        return Progress.COMPLETE
    done = _instant(status.get("restartedAt"))
    return Progress.COMPLETE if done is not None and done >= asked else Progress.PROGRESSING


def _instant(value: Any) -> dt.datetime | None:
    """An RFC 3339 time as Kubernetes writes it, or None if absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _deployment(
    generation: int, observed: int, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Progress:
    if generation > observed:
        return Progress.PROGRESSING  # the controller has not seen the new template yet
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing" and (
            condition.get("reason") == "ProgressDeadlineExceeded"
        ):
            return Progress.FAILED
    updated = status.get("updatedReplicas") or 0
    wanted = spec.get("replicas")
    if wanted is not None and updated < wanted:
        return Progress.PROGRESSING
    if (status.get("replicas") or 0) > updated:
        return Progress.PROGRESSING  # old replicas are still terminating
    if (status.get("availableReplicas") or 0) < updated:
        return Progress.PROGRESSING
    return Progress.COMPLETE


def _statefulset(
    generation: int, observed: int, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Progress:
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return Progress.COMPLETE  # OnDelete: nothing rolls until pods are deleted by hand
    if observed == 0 or generation > observed:
        return Progress.PROGRESSING
    wanted = spec.get("replicas")
    if wanted is not None and (status.get("readyReplicas") or 0) < wanted:
        return Progress.PROGRESSING
    partition = (strategy.get("rollingUpdate") or {}).get("partition") or 0
    if wanted is not None and partition > 0:
        if (status.get("updatedReplicas") or 0) < wanted - partition:
            return Progress.PROGRESSING
        return Progress.COMPLETE
    if status.get("updateRevision") != status.get("currentRevision"):
        return Progress.PROGRESSING
    return Progress.COMPLETE


def _daemonset(
    generation: int, observed: int, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Progress:
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return Progress.COMPLETE
    if generation > observed:
        return Progress.PROGRESSING
    desired = status.get("desiredNumberScheduled") or 0
    if (status.get("updatedNumberScheduled") or 0) < desired:
        return Progress.PROGRESSING
    if (status.get("numberAvailable") or 0) < desired:
        return Progress.PROGRESSING
    return Progress.COMPLETE
