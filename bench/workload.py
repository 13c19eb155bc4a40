"""The objects a benchmark creates: pure builders, no API calls."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from restarter.model import keys
from restarter.model.checksums import checksum, key_digests, new_salt

NAMESPACE = "bench"
#: Every Deployment mounts this labelled Secret: changing it fans out to all of them.
SHARED_SECRET = "shared"
#: A labelled Secret used by one Deployment only, to tell when an operator is ready.
PROBE_SECRET = "probe"
PROBE_DEPLOYMENT = "probe"
#: Bytes of payload in every noise Secret (Helm release Secrets are far bigger).
NOISE_BYTES = 1024
#: Deployment annotation that makes Reloader restart it when a Secret or ConfigMap it
#: reads changes (restarter and the naive baseline ignore it).
RELOADER_AUTO = "reloader.stakater.com/auto"


def _encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret_data(name: str, version: int) -> dict[str, str]:
    """Secret ``data`` that differs for every version."""
    return {"value": _encode(f"{name}-v{version}")}


def reloader_hash(data: dict[str, str]) -> str:
    """The hash Reloader computes of a Secret's ``data`` (``util.GetSHAfromSecret``: SHA-1
    of the sorted ``key=value`` pairs, values decoded, joined by ``;``)."""
    pairs = sorted(f"{k}={base64.b64decode(v).decode()}" for k, v in data.items())
    return hashlib.sha1(";".join(pairs).encode(), usedforsecurity=False).hexdigest()


def recorded(name: str, data: dict[str, str]) -> dict[str, str]:
    """The annotations restarter records on a Secret it has seen: the checksum and the
    per-key digests (without them, the operator's start would record them on every one,
    as on an upgrade from 0.x). The salt is fixed per name: runs start alike."""
    whole = checksum(data)
    salt = new_salt(hashlib.sha256(name.encode()).digest())
    digests = key_digests(data, None, salt, whole).to_annotation()
    return {keys.CHECKSUM: whole, keys.KEY_DIGESTS: digests}


def labelled_secret(name: str, window: str, version: int = 0) -> dict[str, Any]:
    """A labelled Secret, already carrying restarter's checksum and digests (as if seen
    before)."""
    data = secret_data(name, version)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": {keys.RESTART_AT_LABEL: window},
            "annotations": recorded(name, data),
        },
        "data": data,
    }


def labelled_name(index: int) -> str:
    return f"lab-{index:05d}"


def noise_secret(index: int) -> dict[str, Any]:
    """An unlabelled Secret with about NOISE_BYTES of payload."""
    seed = hashlib.sha256(str(index).encode()).hexdigest()
    payload = (seed * (NOISE_BYTES // len(seed) + 1))[:NOISE_BYTES]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"noise-{index:06d}", "labels": {"bench": "noise"}},
        "data": {"payload": _encode(payload)},
    }


def noise_configmap(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"noise-{index:06d}", "labels": {"bench": "noise"}},
        "data": {"setting": f"value-{index}" * 16},
    }


def deployment_name(index: int) -> str:
    return f"dep-{index:05d}"


def deployment(name: str, secrets: list[str]) -> dict[str, Any]:
    """A Deployment with zero replicas whose container reads ``secrets`` (envFrom first,
    a volume for the rest)."""
    env_from, *mounted = secrets
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": {"bench": "workload"},
            "annotations": {RELOADER_AUTO: "true"},
        },
        "spec": {
            "replicas": 0,
            "revisionHistoryLimit": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example/app:1",
                            "envFrom": [{"secretRef": {"name": env_from}}],
                            "volumeMounts": [
                                {"name": f"s{i}", "mountPath": f"/etc/s{i}"}
                                for i in range(len(mounted))
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": f"s{i}", "secret": {"secretName": secret}}
                        for i, secret in enumerate(mounted)
                    ],
                },
            },
        },
    }


def workload_deployment(index: int, labelled: int) -> dict[str, Any]:
    """Deployment ``index`` reads labelled Secret ``index mod labelled`` and the shared one."""
    return deployment(deployment_name(index), [labelled_name(index % labelled), SHARED_SECRET])


def dependents_of(labelled_index: int, deployments: int, labelled: int) -> list[str]:
    """Names of the workload Deployments that read labelled Secret ``labelled_index``."""
    return [deployment_name(i) for i in range(labelled_index, deployments, labelled)]
