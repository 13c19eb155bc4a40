"""The fields of a workload body that restarter reads, decoded from the API's JSON alone.

A Helm-shaped Deployment is 10 to 50 KB of JSON: managedFields, the last-applied
configuration, probes, resources, ports. Parsed whole (``json.loads``) it becomes
thousands of Python objects, for the few dozen fields restarter looks at. During a
fan-out to thousands of dependents every stamp's answer and every watch event is such a
body: the burst of short-lived objects was most of the operator's peak memory and CPU.

``decode_object`` decodes only the fields below (msgspec skips every other one without
building it) and returns them as the same plain dicts and lists a full parse would give,
with absent fields absent, so every reader (``body.get("spec") or {}`` …) works unchanged.
A field missing here is a field restarter cannot see: a new reader of a body adds its
field here, and ``tests/unit/test_bodies_decoding.py`` compares the two parses.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

#: Struct options: unknown fields are skipped, absent fields stay absent (UNSET).
_SLIM = {"omit_defaults": True, "forbid_unknown_fields": False}


class KeyRef(Struct, **_SLIM):
    name: str | UnsetType | None = UNSET
    key: str | UnsetType | None = UNSET
    optional: bool | UnsetType | None = UNSET


class ValueFrom(Struct, **_SLIM):
    secretKeyRef: KeyRef | UnsetType | None = UNSET
    configMapKeyRef: KeyRef | UnsetType | None = UNSET


class Env(Struct, **_SLIM):
    name: str | UnsetType = UNSET
    valueFrom: ValueFrom | UnsetType | None = UNSET


class NamedRef(Struct, **_SLIM):
    name: str | UnsetType | None = UNSET
    optional: bool | UnsetType | None = UNSET


class EnvFrom(Struct, **_SLIM):
    secretRef: NamedRef | UnsetType | None = UNSET
    configMapRef: NamedRef | UnsetType | None = UNSET


class Container(Struct, **_SLIM):
    name: str | UnsetType = UNSET
    env: list[Env] | UnsetType | None = UNSET
    envFrom: list[EnvFrom] | UnsetType | None = UNSET


class KeyItem(Struct, **_SLIM):
    key: str | UnsetType | None = UNSET
    path: str | UnsetType | None = UNSET


class SecretVolume(Struct, **_SLIM):
    secretName: str | UnsetType | None = UNSET
    name: str | UnsetType | None = UNSET  # a projected source's
    items: list[KeyItem] | UnsetType | None = UNSET
    optional: bool | UnsetType | None = UNSET


class ConfigMapVolume(Struct, **_SLIM):
    name: str | UnsetType | None = UNSET
    items: list[KeyItem] | UnsetType | None = UNSET
    optional: bool | UnsetType | None = UNSET


class ProjectedSource(Struct, **_SLIM):
    secret: SecretVolume | UnsetType | None = UNSET
    configMap: ConfigMapVolume | UnsetType | None = UNSET


class Projected(Struct, **_SLIM):
    sources: list[ProjectedSource] | UnsetType | None = UNSET


class CsiVolume(Struct, **_SLIM):
    driver: str | UnsetType | None = UNSET
    volumeAttributes: dict[str, str] | UnsetType | None = UNSET


class Volume(Struct, **_SLIM):
    name: str | UnsetType = UNSET
    csi: CsiVolume | UnsetType | None = UNSET
    secret: SecretVolume | UnsetType | None = UNSET
    configMap: ConfigMapVolume | UnsetType | None = UNSET
    projected: Projected | UnsetType | None = UNSET


class PodSpec(Struct, **_SLIM):
    containers: list[Container] | UnsetType | None = UNSET
    initContainers: list[Container] | UnsetType | None = UNSET
    volumes: list[Volume] | UnsetType | None = UNSET


class TemplateMeta(Struct, **_SLIM):
    annotations: dict[str, str] | UnsetType | None = UNSET
    labels: dict[str, str] | UnsetType | None = UNSET


class Template(Struct, **_SLIM):
    metadata: TemplateMeta | UnsetType | None = UNSET
    spec: PodSpec | UnsetType | None = UNSET


class RollingUpdate(Struct, **_SLIM):
    partition: int | UnsetType | None = UNSET


class UpdateStrategy(Struct, **_SLIM):
    type: str | UnsetType | None = UNSET
    rollingUpdate: RollingUpdate | UnsetType | None = UNSET


class WorkloadRef(Struct, **_SLIM):
    apiVersion: str | UnsetType | None = UNSET
    kind: str | UnsetType | None = UNSET
    name: str | UnsetType | None = UNSET


class Spec(Struct, **_SLIM):
    replicas: int | UnsetType | None = UNSET
    paused: bool | UnsetType | None = UNSET
    template: Template | UnsetType | None = UNSET
    updateStrategy: UpdateStrategy | UnsetType | None = UNSET
    # Argo Rollouts
    restartAt: str | UnsetType | None = UNSET
    workloadRef: WorkloadRef | UnsetType | None = UNSET


class Condition(Struct, **_SLIM):
    type: str | UnsetType | None = UNSET
    status: str | UnsetType | None = UNSET
    reason: str | UnsetType | None = UNSET


class Status(Struct, **_SLIM):
    observedGeneration: int | UnsetType | None = UNSET
    conditions: list[Condition] | UnsetType | None = UNSET
    replicas: int | UnsetType | None = UNSET
    updatedReplicas: int | UnsetType | None = UNSET
    readyReplicas: int | UnsetType | None = UNSET
    availableReplicas: int | UnsetType | None = UNSET
    updateRevision: str | UnsetType | None = UNSET
    currentRevision: str | UnsetType | None = UNSET
    desiredNumberScheduled: int | UnsetType | None = UNSET
    updatedNumberScheduled: int | UnsetType | None = UNSET
    numberAvailable: int | UnsetType | None = UNSET
    # Argo Rollouts
    phase: str | UnsetType | None = UNSET
    restartedAt: str | UnsetType | None = UNSET


class Metadata(Struct, **_SLIM):
    name: str | UnsetType = UNSET
    namespace: str | UnsetType = UNSET
    uid: str | UnsetType = UNSET
    resourceVersion: str | UnsetType = UNSET
    generation: int | UnsetType | None = UNSET
    labels: dict[str, str] | UnsetType | None = UNSET
    annotations: dict[str, str] | UnsetType | None = UNSET
    finalizers: list[str] | UnsetType | None = UNSET
    deletionTimestamp: str | UnsetType | None = UNSET


class Workload(Struct, **_SLIM):
    """A Deployment, StatefulSet, DaemonSet or Rollout; also any object read for its
    metadata alone (a source's PartialObjectMetadata, a Namespace), a watch's Status
    object (``code``, ``reason``) and a bookmark."""

    apiVersion: str | UnsetType = UNSET
    kind: str | UnsetType = UNSET
    metadata: Metadata | UnsetType | None = UNSET
    spec: Spec | UnsetType | None = UNSET
    status: Status | str | UnsetType | None = UNSET
    code: int | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    message: str | UnsetType = UNSET


class ListMeta(Struct, **_SLIM):
    resourceVersion: str | UnsetType = UNSET
    # Named _continue in Python, "continue" on the wire.
    continue_: str | UnsetType | None = msgspec.field(default=UNSET, name="continue")


class WorkloadList(Struct, **_SLIM):
    metadata: ListMeta | UnsetType = UNSET
    items: list[Workload] | UnsetType | None = UNSET


class WatchEvent(Struct, **_SLIM):
    type: str | UnsetType = UNSET
    object: Workload | UnsetType = UNSET


class _VersionMeta(Struct, **_SLIM):
    resourceVersion: str | UnsetType = UNSET


class _Versioned(Struct, **_SLIM):
    """An object read for its resourceVersion alone (a patched source: never its data)."""

    metadata: _VersionMeta | UnsetType = UNSET


_workload = msgspec.json.Decoder(Workload)
_versioned = msgspec.json.Decoder(_Versioned)
_workload_list = msgspec.json.Decoder(WorkloadList)
_watch_event = msgspec.json.Decoder(WatchEvent)


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _or_full(decode: Any, data: bytes | str) -> dict[str, Any]:
    """The slim decoding; a body the slim types do not fit (an odd custom resource)
    is parsed whole rather than lost."""
    try:
        return dict(_builtins(decode(data)))
    except msgspec.ValidationError:
        return dict(json.loads(data))


def decode_object(data: bytes | str) -> dict[str, Any]:
    """A workload body's fields that restarter reads, as plain dicts."""
    return _or_full(_workload.decode, data)


def decode_list(data: bytes | str) -> dict[str, Any]:
    """A list (``metadata`` with ``continue`` and ``resourceVersion``, ``items`` slim)."""
    return _or_full(_workload_list.decode, data)


def decode_watch_event(data: bytes | str) -> dict[str, Any]:
    """One line of a watch: ``type`` and the slim ``object``."""
    return _or_full(_watch_event.decode, data)


def decode_version(data: bytes | str) -> dict[str, Any]:
    """An object's resourceVersion alone, as ``{"metadata": {"resourceVersion": …}}`` (empty
    metadata when it has none): every other field, a Secret's data included, is skipped
    unparsed."""
    metadata = _versioned.decode(data).metadata
    version = UNSET if isinstance(metadata, UnsetType) else metadata.resourceVersion
    return {"metadata": {} if isinstance(version, UnsetType) else {"resourceVersion": version}}
