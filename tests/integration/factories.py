"""Small builders for the objects the integration tests create."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any


def encoded(values: dict[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}


def secret(
    name: str,
    values: dict[str, str],
    window: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"restart-at": window} if window is not None else {}
    metadata = {"name": name, "labels": labels, "annotations": annotations or {}}
    return {"metadata": metadata, "data": encoded(values)}


def configmap(
    name: str,
    window: str,
    *,
    data: dict[str, str] | None = None,
    binary: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata = {"name": name, "labels": {"restart-at": window}, "annotations": annotations or {}}
    return {"metadata": metadata, "data": data or {}, "binaryData": encoded(binary or {})}


def env_from_secret(secret_name: str) -> dict[str, Any]:
    return {
        "name": "FROM_SECRET",
        "valueFrom": {"secretKeyRef": {"name": secret_name, "key": "password"}},
    }


def deployment(
    name: str,
    *,
    env: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    replicas: int = 2,
    paused: bool = False,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "registry.invalid/app:1"}
    if env:
        container["env"] = env
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = volumes
        container["volumeMounts"] = [
            {"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes
        ]
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "replicas": replicas,
            "paused": paused,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def statefulset(name: str, **options: Any) -> dict[str, Any]:
    """A StatefulSet with the pod template ``deployment`` would have."""
    body = deployment(name, **options)
    del body["spec"]["paused"]
    body["spec"]["serviceName"] = name
    return body


def daemonset(name: str, **options: Any) -> dict[str, Any]:
    """A DaemonSet (one pod per kwok node) with the pod template ``deployment`` would have."""
    body = deployment(name, **options)
    for field in ("paused", "replicas"):
        del body["spec"][field]
    return body


def rollout(name: str, *, workload_ref: str | None = None, **options: Any) -> dict[str, Any]:
    """An Argo Rollout (canary without steps: one straight rollout) with the pod template
    ``deployment`` would have, or with ``spec.workloadRef`` to that Deployment instead."""
    body = deployment(name, **options)
    del body["spec"]["paused"]
    body["spec"]["strategy"] = {"canary": {}}
    if workload_ref is not None:
        del body["spec"]["template"]
        body["spec"]["selector"] = {"matchLabels": {"app": workload_ref}}
        body["spec"]["workloadRef"] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": workload_ref,
        }
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", **body}


def window_open_now() -> str:
    """HH.MM of the current UTC minute: with the default 1 h length it is open now."""
    return dt.datetime.now(dt.UTC).strftime("%H.%M")


def window_hours_away(hours: int = 6) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(hours=hours)).strftime("%H.%M")
