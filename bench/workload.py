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


def reloader_hash(data: dict[str, str], kind: str = "secret") -> str:
    """The hash Reloader computes of a Secret's ``data`` (``util.GetSHAfromSecret``: SHA-1
    of the sorted ``key=value`` pairs, values decoded, joined by ``;``), or of a
    ConfigMap's text ``data`` (``util.GetSHAfromConfigmap``: the same, values as they are)."""
    if kind == "configmap":
        pairs = sorted(f"{k}={v}" for k, v in data.items())
    else:
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


#: Environment entries of a realistic Deployment's main container.
REALISTIC_ENV = 25


def _probe(path: str, delay: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "initialDelaySeconds": delay,
        "periodSeconds": 10,
        "timeoutSeconds": 2,
        "failureThreshold": 3,
    }


def _resources(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}


def realistic_deployment(name: str, secrets: list[str]) -> dict[str, Any]:
    """The same references as ``deployment`` in the shape a Helm chart gives: three
    containers (the app, a proxy sidecar, an exporter), probes, resources, 25 environment
    entries, the chart's labels and annotations, a security context and affinity. Created
    with ``kubectl apply`` (``Objects.create_all(apply=True)``) it also carries managedFields
    and ``last-applied-configuration``."""
    body = deployment(name, secrets)
    release = name.rsplit("-", 1)[0]
    chart_labels = {
        "app.kubernetes.io/name": "app",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/version": "1.24.3",
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/part-of": release,
        "helm.sh/chart": "app-4.12.0",
    }
    body["metadata"]["labels"] |= chart_labels
    body["metadata"]["annotations"] |= {
        "meta.helm.sh/release-name": name,
        "meta.helm.sh/release-namespace": NAMESPACE,
        "deployment.kubernetes.io/description": "the application's API, served behind a proxy",
    }
    spec = body["spec"]
    spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}
    template = spec["template"]
    template["metadata"]["labels"] |= chart_labels
    template["metadata"]["annotations"] = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9102",
        "checksum/config": hashlib.sha256(name.encode()).hexdigest(),
    }
    app = template["spec"]["containers"][0]
    app |= {
        "image": "registry.example/team/app:1.24.3@sha256:" + hashlib.sha256(b"app").hexdigest(),
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/app/config.yaml", "--log-format=json"],
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "grpc", "containerPort": 9090, "protocol": "TCP"},
        ],
        "env": [
            {"name": f"APP_SETTING_{i:02d}", "value": f"value-{i:02d}-for-{name}"}
            for i in range(REALISTIC_ENV - 2)
        ]
        + [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "livenessProbe": _probe("/healthz", 15),
        "readinessProbe": _probe("/ready", 5),
        "startupProbe": _probe("/healthz", 0),
        "resources": _resources("250m", "512Mi"),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    proxy = {
        "name": "proxy",
        "image": "registry.example/proxy:2.8.1",
        "args": ["--upstream=http://127.0.0.1:8080", "--listen=:8443", "--tls-dir=/etc/tls"],
        "ports": [{"name": "https", "containerPort": 8443, "protocol": "TCP"}],
        "readinessProbe": _probe("/ping", 2),
        "resources": _resources("50m", "64Mi"),
    }
    exporter = {
        "name": "exporter",
        "image": "registry.example/exporter:0.15.0",
        "args": ["--scrape-uri=http://127.0.0.1:8080/metrics", "--web.listen-address=:9102"],
        "ports": [{"name": "metrics", "containerPort": 9102, "protocol": "TCP"}],
        "resources": _resources("10m", "32Mi"),
    }
    template["spec"]["containers"] += [proxy, exporter]
    template["spec"] |= {
        "serviceAccountName": "app",
        "terminationGracePeriodSeconds": 45,
        "securityContext": {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": name}},
                        },
                    }
                ]
            }
        },
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "apps"}],
    }
    return body


#: ``--body``: how the workload Deployments are shaped.
BODIES = {"small": deployment, "realistic": realistic_deployment}


def workload_deployment(index: int, labelled: int, body: str = "small") -> dict[str, Any]:
    """Deployment ``index`` reads labelled Secret ``index mod labelled`` and the shared one."""
    return BODIES[body](deployment_name(index), [labelled_name(index % labelled), SHARED_SECRET])


def dependents_of(labelled_index: int, deployments: int, labelled: int) -> list[str]:
    """Names of the workload Deployments that read labelled Secret ``labelled_index``."""
    return [deployment_name(i) for i in range(labelled_index, deployments, labelled)]
