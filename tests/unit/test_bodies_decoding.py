"""The slim decoding of workload bodies gives every reader the answer a full parse gives."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from restarter.cluster.reference_map import uses_of
from restarter.model import bodies, keys, kinds, restart_decisions, timer_admission
from restarter.model.kinds import progress
from restarter.model.references import rollout_workload_ref

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True)
class Defaults:
    timezone: str = "UTC"
    window_length: dt.timedelta = dt.timedelta(hours=1)


def _containers() -> list[dict[str, Any]]:
    return [
        {
            "name": "app",
            "image": "registry.example/app:1.2.3",
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {
                    "name": "MODE",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "cfg", "key": "mode", "optional": True}
                    },
                },
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "envFrom": [{"secretRef": {"name": "all-of-it"}}, {"configMapRef": {"name": "env"}}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        }
    ]


def _pod_spec() -> dict[str, Any]:
    return {
        "initContainers": [
            {"name": "init", "image": "busybox", "envFrom": [{"secretRef": {"name": "init"}}]}
        ],
        "containers": _containers(),
        "volumes": [
            {
                "name": "tls",
                "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "c"}]},
            },
            {"name": "cfg", "configMap": {"name": "files"}},
            {
                "name": "bundle",
                "projected": {
                    "sources": [
                        {"secret": {"name": "ca", "items": [{"key": "ca.crt", "path": "ca"}]}},
                        {"configMap": {"name": "trust"}},
                        {"downwardAPI": {"items": [{"path": "labels"}]}},
                    ]
                },
            },
            {"name": "scratch", "emptyDir": {}},
        ],
        "imagePullSecrets": [{"name": "pull"}],
    }


def _metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "team",
        "uid": "1234",
        "resourceVersion": "987",
        "generation": 4,
        "creationTimestamp": "2026-12-01T00:00:00Z",
        "labels": {"app": name, keys.PENDING_LABEL: "true"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": "x" * 2000}),
            f"{keys.PENDING_MARK}/secret.db": "1765000000",
            f"{keys.WINDOW_MARK}/secret.db": "03.00",
            keys.RESTART_TS: "1764000000",
            "reloader.stakater.com/auto": "true",
        },
        "finalizers": [keys.FINALIZER, "other.example/keep"],
        "managedFields": [
            {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {"f:x": {}}}}
        ],
    }


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata("web"),
        "spec": {
            "replicas": 3,
            "paused": False,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {keys.KUBECTL_RESTARTED_AT: "2026-12-01T03:00:00Z"},
                },
                "spec": _pod_spec(),
            },
        },
        "status": {
            "observedGeneration": 4,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": 3,
            "availableReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }


def statefulset() -> dict[str, Any]:
    body = deployment()
    body["kind"] = "StatefulSet"
    body["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
    body["status"] |= {"currentRevision": "a", "updateRevision": "b"}
    return body


def daemonset() -> dict[str, Any]:
    body = deployment()
    body["kind"] = "DaemonSet"
    body["status"] = {
        "observedGeneration": 4,
        "desiredNumberScheduled": 5,
        "updatedNumberScheduled": 5,
        "numberAvailable": 4,
    }
    return body


def rollout() -> dict[str, Any]:
    body = deployment()
    body["apiVersion"], body["kind"] = "argoproj.io/v1alpha1", "Rollout"
    del body["spec"]["template"]
    body["spec"] |= {
        "restartAt": "2026-12-05T03:00:01Z",
        "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "strategy": {"canary": {"steps": [{"setWeight": 20}]}},
    }
    body["status"] = {"phase": "Healthy", "restartedAt": "2026-12-05T03:00:01Z"}
    return body


BODIES = {
    "deployments": deployment,
    "statefulsets": statefulset,
    "daemonsets": daemonset,
    "rollouts": rollout,
}


def _both(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    raw = json.dumps(body).encode()
    return bodies.decode_object(raw), json.loads(raw)


def _within(slim: Any, full: Any, path: str = "") -> None:
    """Every value of the slim body is the full body's value at the same place."""
    if isinstance(slim, dict):
        assert isinstance(full, dict), path
        for key, value in slim.items():
            assert key in full, f"{path}.{key} is not in the full body"
            _within(value, full[key], f"{path}.{key}")
    elif isinstance(slim, list):
        assert isinstance(full, list) and len(slim) == len(full), path
        for index, (left, right) in enumerate(zip(slim, full, strict=True)):
            _within(left, right, f"{path}[{index}]")
    else:
        assert slim == full, path


def _objects(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_objects(key) + _objects(item) for key, item in value.items())
    if isinstance(value, list):
        return 1 + sum(_objects(item) for item in value)
    return 1


@pytest.mark.parametrize("plural", sorted(BODIES))
def test_the_slim_body_is_part_of_the_full_one(plural: str) -> None:
    slim, full = _both(BODIES[plural]())
    _within(slim, full)
    assert "managedFields" not in slim["metadata"]
    assert _objects(slim) < _objects(full)


@pytest.mark.parametrize("plural", sorted(BODIES))
@pytest.mark.parametrize("reloader", [False, True])
def test_references_and_opt_in_read_alike(plural: str, reloader: bool) -> None:
    slim, full = _both(BODIES[plural]())
    assert uses_of(slim, reloader) == uses_of(full, reloader)
    if plural != "rollouts":  # the Rollout runs its workloadRef's template, not its own
        assert uses_of(slim, reloader)[0]  # the fixture reads sources: the check can fail


@pytest.mark.parametrize("plural", sorted(BODIES))
def test_rollout_progress_reads_alike(plural: str) -> None:
    slim, full = _both(BODIES[plural]())
    assert progress(plural, slim) == progress(plural, full)


@pytest.mark.parametrize("plural", sorted(BODIES))
def test_restart_decisions_read_alike(plural: str) -> None:
    slim, full = _both(BODIES[plural]())
    defaults = Defaults()
    assert timer_admission.admission_due(slim, defaults, NOW) == timer_admission.admission_due(
        full, defaults, NOW
    )
    assert kinds.of_body(slim) == kinds.of_body(full)
    assert rollout_workload_ref(slim) == rollout_workload_ref(full)
    kind = kinds.of_body(full)
    for patch in (timer_admission.admit_patch, timer_admission.hand_back_patch):
        assert patch(slim["metadata"], kind) == patch(full["metadata"], kind)
    annotations = full["metadata"]["annotations"]
    assert restart_decisions.restart_patch(
        slim["metadata"]["annotations"], slim["metadata"], NOW, None, kind
    ) == restart_decisions.restart_patch(annotations, full["metadata"], NOW, None, kind)


def test_a_watch_error_keeps_its_code() -> None:
    line = json.dumps(
        {
            "type": "ERROR",
            "object": {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"},
        }
    )
    event = bodies.decode_watch_event(line)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


def test_a_list_keeps_its_continue_token() -> None:
    listing = {
        "metadata": {"resourceVersion": "55", "continue": "token"},
        "items": [deployment()],
    }
    decoded = bodies.decode_list(json.dumps(listing))
    assert decoded["metadata"] == {"resourceVersion": "55", "continue": "token"}
    assert decoded["items"][0]["metadata"]["name"] == "web"


def test_a_body_the_types_do_not_fit_is_parsed_whole() -> None:
    odd = deployment()
    odd["spec"]["replicas"] = "three"  # a custom resource could carry anything
    assert bodies.decode_object(json.dumps(odd)) == odd
