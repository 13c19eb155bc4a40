"""Which Secrets and ConfigMaps a pod template uses (imagePullSecrets deliberately not)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from restarter.model import keys

SECRET = "secret"
CONFIGMAP = "configmap"


class Reference(NamedTuple):
    kind: str
    name: str


def _containers(pod_spec: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for field in ("initContainers", "containers"):
        yield from pod_spec.get(field) or []


def references(pod_spec: Mapping[str, Any] | None) -> frozenset[Reference]:
    """Every Secret and ConfigMap the pod spec reads through env, envFrom or volumes."""
    if not pod_spec:
        return frozenset()
    found: set[Reference] = set()
    for container in _containers(pod_spec):
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if name := (source.get("secretKeyRef") or {}).get("name"):
                found.add(Reference(SECRET, name))
            if name := (source.get("configMapKeyRef") or {}).get("name"):
                found.add(Reference(CONFIGMAP, name))
        for env_from in container.get("envFrom") or []:
            if name := (env_from.get("secretRef") or {}).get("name"):
                found.add(Reference(SECRET, name))
            if name := (env_from.get("configMapRef") or {}).get("name"):
                found.add(Reference(CONFIGMAP, name))
    for volume in pod_spec.get("volumes") or []:
        if name := (volume.get("secret") or {}).get("secretName"):
            found.add(Reference(SECRET, name))
        if name := (volume.get("configMap") or {}).get("name"):
            found.add(Reference(CONFIGMAP, name))
        for projected in (volume.get("projected") or {}).get("sources") or []:
            if name := (projected.get("secret") or {}).get("name"):
                found.add(Reference(SECRET, name))
            if name := (projected.get("configMap") or {}).get("name"):
                found.add(Reference(CONFIGMAP, name))
    return frozenset(found)


#: A workload: (resource plural, namespace, name).
WorkloadKey = tuple[str, str, str]


def workload_key(plural: str, body: Mapping[str, Any]) -> WorkloadKey:
    metadata = body.get("metadata") or {}
    return (plural, metadata.get("namespace", ""), metadata.get("name", ""))


#: The API kinds of sources, by the short kind used in annotation keys.
SOURCE_KINDS = {SECRET: "Secret", CONFIGMAP: "ConfigMap"}

#: The workloads restarter restarts (all apps/v1), by resource plural.
WORKLOAD_KINDS = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
}

#: The stem of each workload's AppsV1Api methods (``patch_namespaced_<stem>``).
CLIENT_STEMS = {
    "deployments": "deployment",
    "statefulsets": "stateful_set",
    "daemonsets": "daemon_set",
}


def _declared(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def workload_references(
    annotations: Mapping[str, str] | None, pod_spec: Mapping[str, Any] | None
) -> frozenset[Reference]:
    """What a workload depends on: its pod template, plus the sources it declares.

    ``restarter.io/secrets`` and ``restarter.io/configmaps`` name sources the pod
    template does not show (an app reading them through the API); a workload with
    ``restarter.io/ignore: "true"`` depends on nothing, as far as restarter is concerned.
    """
    annotations = annotations or {}
    if annotations.get(keys.IGNORE) == "true":
        return frozenset()
    declared = {
        Reference(SECRET, name) for name in _declared(annotations.get(keys.DEPENDS_ON_SECRETS))
    }
    declared |= {
        Reference(CONFIGMAP, name)
        for name in _declared(annotations.get(keys.DEPENDS_ON_CONFIGMAPS))
    }
    return references(pod_spec) | declared
