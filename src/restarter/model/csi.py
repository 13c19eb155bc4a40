"""Secrets mounted by the Secrets Store CSI Driver: which SecretProviderClasses a pod
template mounts, what the driver reports of a pod's mount (``SecretProviderClassPodStatus``),
which workload a reporting pod belongs to, and whether a workload's pods report object
versions it has not seen yet.

Only the provider's object ids and version identifiers are read, never a file's contents:
the driver's status objects carry no values. A certificate the class also syncs into a
Secret (``spec.secretObjects``) is the exception: its expiry is read from that Secret, as
for any Secret, so that a pending restart respects its deadline (``SyncedExpiry``). A
certificate only mounted cannot be read. Pure: bodies in, plain values out.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import certificates, keys

#: The CSI driver name a pod's volume names (``spec.volumes[].csi.driver``).
DRIVER = "secrets-store.csi.k8s.io"
#: The volume attribute that names the SecretProviderClass.
CLASS_ATTRIBUTE = "secretProviderClass"
#: The driver's API group, its version, and the plurals restarter reads (get, list, watch).
GROUP, VERSION = "secrets-store.csi.x-k8s.io", "v1"
CLASSES, POD_STATUSES = "secretproviderclasses", "secretproviderclasspodstatuses"

#: An object a provider serves: (id, version), as the driver reports it.
ObjectVersion = tuple[str, str]


def provider_classes(pod_spec: Mapping[str, Any] | None) -> frozenset[str]:
    """The SecretProviderClasses the pod spec mounts through the driver's CSI volumes."""
    found: set[str] = set()
    for volume in (pod_spec or {}).get("volumes") or []:
        csi = volume.get("csi") or {}
        if csi.get("driver") != DRIVER:
            continue
        if name := (csi.get("volumeAttributes") or {}).get(CLASS_ATTRIBUTE):
            found.add(str(name))
    return frozenset(found)


@dataclass(frozen=True)
class PodStatus:
    """What the driver reports of one pod's mount of one SecretProviderClass."""

    namespace: str
    name: str
    """The status object's own name."""

    pod: str
    provider_class: str
    mounted: bool
    objects: frozenset[ObjectVersion]


def read_pod_status(body: Mapping[str, Any]) -> PodStatus | None:
    """A ``SecretProviderClassPodStatus`` as restarter reads it (None without a pod or a
    class); the pod is ``status.podName``, else the owner reference to a Pod."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    pod = status.get("podName") or next(
        (
            ref.get("name")
            for ref in metadata.get("ownerReferences") or []
            if ref.get("kind") == "Pod" and ref.get("name")
        ),
        None,
    )
    provider_class = status.get("secretProviderClassName")
    if not pod or not provider_class:
        return None
    objects = frozenset(
        (str(item.get("id") or ""), str(item.get("version") or ""))
        for item in status.get("objects") or []
        if item.get("id")
    )
    return PodStatus(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        pod=str(pod),
        provider_class=str(provider_class),
        mounted=bool(status.get("mounted")),
        objects=objects,
    )


#: How the pods of each workload kind are named after it: a Deployment's (and a Rollout's)
#: ``<name>-<template hash>-<5>``, a StatefulSet's ``<name>-<ordinal>``, a DaemonSet's
#: ``<name>-<5>``.
_POD_SUFFIXES = {
    "deployments": re.compile(r"-[a-z0-9]{1,10}-[a-z0-9]{5}"),
    "rollouts": re.compile(r"-[a-z0-9]{1,10}-[a-z0-9]{5}"),
    "statefulsets": re.compile(r"-[0-9]+"),
    "daemonsets": re.compile(r"-[a-z0-9]{5}"),
}


def owner_of(pod: str, dependents: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """Which of the workloads that mount the class (``dependents``, (plural, name)) the
    pod belongs to, by how each kind names its pods: the longest name that fits.

    restarter reads no pods (its RBAC has none): the status object names the pod, and only
    the class's dependents can have one for it, so the name tells.
    """
    best: tuple[str, str] | None = None
    for plural, name in dependents:
        suffix = _POD_SUFFIXES.get(plural)
        if suffix is None or not pod.startswith(name):
            continue
        if suffix.fullmatch(pod[len(name) :]) and (best is None or len(name) > len(best[1])):
            best = (plural, name)
    return best


def versions_key(provider_class: str) -> str:
    """The workload annotation that records the versions its pods reported of the class."""
    return f"{keys.CSI_VERSIONS}/{keys.source_token(CLASS_KIND, provider_class)}"


#: The short kind of a SecretProviderClass in mark keys and change records.
CLASS_KIND = "secretproviderclass"


def _digest(item: ObjectVersion) -> str:
    """An object version's short digest: its id and version identifier (never a value)."""
    return hashlib.sha256(json.dumps(list(item)).encode()).hexdigest()[:16]


def read_versions(
    annotations: Mapping[str, str] | None, provider_class: str
) -> frozenset[str] | None:
    """The digests of the object versions recorded on the workload; None when none are."""
    value = (annotations or {}).get(versions_key(provider_class))
    if value is None:
        return None
    try:
        listed = json.loads(value)
    except ValueError:
        return None
    if not isinstance(listed, list):
        return None
    return frozenset(str(item) for item in listed)


@dataclass(frozen=True)
class VersionChange:
    """A workload's pods against the versions recorded on it."""

    baseline: bool
    """Nothing recorded yet: record, restart nothing (first sight, as for a Secret)."""

    new_ids: frozenset[str]
    """The ids of the objects whose reported version is new: empty when nothing changed."""

    record: str
    """The annotation value to record: the digests of every version reported now."""

    change_id: str
    """The change's id: the same for every pod and every try that reports these versions."""

    stale: bool = False
    """Nothing new, but the record names versions no pod reports any more (every pod
    rotated): recorded again alone, so that a version rolled back to counts as new."""

    @property
    def changed(self) -> bool:
        return bool(self.new_ids) and not self.baseline


def version_change(
    recorded: frozenset[str] | None, reported: frozenset[ObjectVersion]
) -> VersionChange:
    """Whether the pods report a version not recorded. Pods that rotated at different
    moments report the old and the new version together for a while: a version seen once
    is not new again, so several pods reporting the same new versions make one change."""
    digests = {item: _digest(item) for item in reported}
    record = json.dumps(sorted(set(digests.values())), separators=(",", ":"))
    change_id = "csi-" + hashlib.sha256(record.encode()).hexdigest()[:16]
    if recorded is None:
        return VersionChange(True, frozenset(), record, change_id)
    new = frozenset(item[0] for item, digest in digests.items() if digest not in recorded)
    stale = not new and recorded != set(digests.values())
    return VersionChange(False, new, record, change_id, stale)


def reported_by(
    statuses: Iterable[PodStatus], owner: tuple[str, str], dependents: Iterable[tuple[str, str]]
) -> frozenset[ObjectVersion]:
    """The object versions the mounted pods of ``owner`` report."""
    users = list(dependents)
    found: set[ObjectVersion] = set()
    for status in statuses:
        if status.mounted and owner_of(status.pod, users) == owner:
            found |= status.objects
    return frozenset(found)


# -- certificates synced into Secrets ------------------------------------------------------


def synced_keys(provider_class: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """What the class has the driver sync into Secrets of its namespace
    (``spec.secretObjects``): each Secret's name and the keys written in it
    (``data[].key``)."""
    found: dict[str, set[str]] = {}
    for item in (provider_class.get("spec") or {}).get("secretObjects") or []:
        name = item.get("secretName") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            continue
        written = found.setdefault(name, set())
        for entry in item.get("data") or []:
            if isinstance(entry, Mapping) and entry.get("key"):
                written.add(str(entry["key"]))
    return {name: frozenset(written) for name, written in found.items()}


@dataclass(frozen=True)
class SyncedExpiry:
    """The earliest certificate expiry among the keys a class syncs, and the Secret."""

    not_after: dt.datetime
    secret: str

    def source(self, provider_class: str) -> str:
        """Where the certificate came from, as a deadline names it."""
        return f"Secret/{self.secret} synced from SecretProviderClass/{provider_class}"


def synced_expiry(
    synced: Mapping[str, frozenset[str]], secrets: Mapping[str, Mapping[str, Any] | None]
) -> SyncedExpiry | None:
    """The earliest ``notAfter`` among the PEM certificates in the synced keys of the
    synced Secrets (``secrets``: each as read now, None when absent); None without one.
    Other keys of those Secrets are not looked at."""
    earliest: SyncedExpiry | None = None
    for name in sorted(synced):
        data = (secrets.get(name) or {}).get("data") or {}
        only = {"data": {key: data[key] for key in sorted(synced[name]) if key in data}}
        expires = certificates.earliest_not_after("secret", only)
        if expires is not None and (earliest is None or expires < earliest.not_after):
            earliest = SyncedExpiry(expires, name)
    return earliest


def not_after_key(provider_class: str) -> str:
    """The workload annotation that records the synced certificate's expiry for the class."""
    return f"{keys.CSI_NOT_AFTER}/{keys.source_token(CLASS_KIND, provider_class)}"


def not_after_record(expiry: SyncedExpiry | None) -> str | None:
    """The annotation value recording ``expiry`` (None: nothing to record)."""
    if expiry is None:
        return None
    record = {"notAfter": certificates.format_instant(expiry.not_after), "secret": expiry.secret}
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def read_not_after(
    annotations: Mapping[str, str] | None, provider_class: str
) -> SyncedExpiry | None:
    """The expiry recorded on the workload for the class; None when none (or unreadable)."""
    value = (annotations or {}).get(not_after_key(provider_class))
    try:
        fields = json.loads(value) if value else None
    except ValueError:
        return None
    if not isinstance(fields, dict) or not isinstance(fields.get("secret"), str):
        return None
    expires = certificates.parse_instant(fields.get("notAfter"))
    return None if expires is None else SyncedExpiry(expires, fields["secret"])


def change_deadline(
    recorded: SyncedExpiry | None,
    current: SyncedExpiry | None,
    provider_class: str,
    margin: dt.timedelta,
) -> dict[str, str]:
    """The deadline a change's stamp carries when the class syncs a certificate: ``margin``
    before the earlier of the expiry recorded with the versions the pods ran until now and
    the synced Secret's now (the driver may sync the new certificate before or after it
    reports the new versions: the earlier is the one the pods may still run with). Nothing
    when neither holds a certificate."""
    found = [expiry for expiry in (recorded, current) if expiry is not None]
    if not found:
        return {}
    earliest = min(found, key=lambda expiry: expiry.not_after)
    return certificates.deadline_stamp(earliest.not_after, earliest.source(provider_class), margin)
