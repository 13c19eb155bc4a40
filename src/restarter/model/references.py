"""Which Secrets and ConfigMaps a pod template uses (imagePullSecrets deliberately not),
and which SecretProviderClasses it mounts through the Secrets Store CSI Driver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from restarter.model import csi, keys

SECRET = "secret"
CONFIGMAP = "configmap"
SECRET_PROVIDER_CLASS = csi.CLASS_KIND


#: The keys of a source a reference reads: the names, or ``None`` for every key (``envFrom``,
#: a volume without ``items``, a declaration), including keys added later.
KeyNames = frozenset[str] | None


class Reference(NamedTuple):
    kind: str
    name: str
    keys: KeyNames = None
    """What the workload reads of the source; ``None`` (the default): every key."""


def _containers(pod_spec: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for field in ("initContainers", "containers"):
        yield from pod_spec.get(field) or []


def _item_keys(source: Mapping[str, Any]) -> KeyNames:
    """The keys a volume (or projected source) lists in ``items``; None without items."""
    items = source.get("items")
    if not items:
        return None
    return frozenset(key for item in items if (key := (item or {}).get("key")))


class _Found:
    """The keys read of each source so far: a source read whole anywhere reads every key."""

    def __init__(self) -> None:
        self.reads: dict[tuple[str, str], KeyNames] = {}

    def add(self, kind: str, name: str, keys: KeyNames) -> None:
        source = (kind, name)
        if source in self.reads:
            before = self.reads[source]
            keys = None if before is None or keys is None else before | keys
        self.reads[source] = keys

    def references(self) -> frozenset[Reference]:
        return frozenset(Reference(kind, name, keys) for (kind, name), keys in self.reads.items())


def references(pod_spec: Mapping[str, Any] | None) -> frozenset[Reference]:
    """Every Secret and ConfigMap the pod spec reads through env, envFrom or volumes, one
    Reference per source with the keys it reads (optional or not: a key that appears
    later changes what the pods see), and every SecretProviderClass it mounts (whole)."""
    if not pod_spec:
        return frozenset()
    found = _Found()
    for container in _containers(pod_spec):
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            for field, kind in (("secretKeyRef", SECRET), ("configMapKeyRef", CONFIGMAP)):
                ref = source.get(field) or {}
                if name := ref.get("name"):
                    key = ref.get("key")  # required by the API; without it, assume every key
                    found.add(kind, name, frozenset({key}) if key else None)
        for env_from in container.get("envFrom") or []:
            if name := (env_from.get("secretRef") or {}).get("name"):
                found.add(SECRET, name, None)
            if name := (env_from.get("configMapRef") or {}).get("name"):
                found.add(CONFIGMAP, name, None)
    for volume in pod_spec.get("volumes") or []:
        projected = (volume.get("projected") or {}).get("sources") or []
        # A volume names its Secret by secretName; a projected source, like a ConfigMap, by name.
        for source, secret_field in [(volume, "secretName"), *((p, "name") for p in projected)]:
            secret = source.get("secret") or {}
            if name := secret.get(secret_field):
                found.add(SECRET, name, _item_keys(secret))
            configmap = source.get("configMap") or {}
            if name := configmap.get("name"):
                found.add(CONFIGMAP, name, _item_keys(configmap))
    for provider_class in csi.provider_classes(pod_spec):
        found.add(SECRET_PROVIDER_CLASS, provider_class, None)
    return found.references()


def affected_keys(reads: KeyNames, changed: KeyNames) -> KeyNames:
    """The changed keys a reader sees: empty when it reads none of them (not affected).

    ``changed`` None means which keys changed is unknown: every reader is affected, and
    what it sees is unknown too (None).
    """
    if changed is None:
        return None
    return changed if reads is None else reads & changed


#: A workload: (resource plural, namespace, name).
WorkloadKey = tuple[str, str, str]


def workload_key(plural: str, body: Mapping[str, Any]) -> WorkloadKey:
    metadata = body.get("metadata") or {}
    return (plural, metadata.get("namespace", ""), metadata.get("name", ""))


#: The API kinds of sources, by the short kind used in annotation keys.
SOURCE_KINDS = {SECRET: "Secret", CONFIGMAP: "ConfigMap"}
#: The API kinds of every source a mark may name: the SecretProviderClass's changes come
#: from the driver's status objects, not from a watch of the class.
MARKED_KINDS = {**SOURCE_KINDS, SECRET_PROVIDER_CLASS: "SecretProviderClass"}


def rollout_workload_ref(body: Mapping[str, Any]) -> str | None:
    """The Deployment whose pod template a Rollout uses (``spec.workloadRef``), or None
    when the Rollout has a template of its own."""
    ref = (body.get("spec") or {}).get("workloadRef") or {}
    if ref.get("kind") == "Deployment" and ref.get("name"):
        return str(ref["name"])
    return None


def with_template(body: Mapping[str, Any], referenced: Mapping[str, Any] | None) -> dict[str, Any]:
    """A Rollout's body with the pod template of the Deployment its workloadRef names
    (an empty template when that Deployment is missing)."""
    template = ((referenced or {}).get("spec") or {}).get("template") or {}
    return {**body, "spec": {**(body.get("spec") or {}), "template": template}}


def _declared(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def workload_references(
    annotations: Mapping[str, str] | None, pod_spec: Mapping[str, Any] | None
) -> frozenset[Reference]:
    """What a workload depends on: its pod template, plus the sources it declares (every
    key of those).

    ``restarter.io/secrets`` and ``restarter.io/configmaps`` name sources the pod
    template does not show (an app reading them through the API); a workload with
    ``restarter.io/ignore: "true"`` depends on nothing, as far as restarter is concerned.
    """
    annotations = annotations or {}
    if annotations.get(keys.IGNORE) == "true":
        return frozenset()
    found = {(ref.kind, ref.name): ref for ref in references(pod_spec)}
    declared = [(SECRET, name) for name in _declared(annotations.get(keys.DEPENDS_ON_SECRETS))]
    declared += [
        (CONFIGMAP, name) for name in _declared(annotations.get(keys.DEPENDS_ON_CONFIGMAPS))
    ]
    # A declared source is read through the API, whole: every key, whatever the template.
    for kind, name in declared:
        found[kind, name] = Reference(kind, name)
    return frozenset(found.values())
