"""Secrets mounted by the Secrets Store CSI Driver, on the real node: the driver (built from
its module) is the node's CSI plugin, registered with the kubelet, with rotation on and a
5 s poll; its own fake provider serves the secret over gRPC. The provider's version
changes, the driver rotates the mounted file and reports the new version; restarter
restarts the Deployment once, in the class's window, and the new pod prints the new value.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from restarter.model import csi, keys
from restarter_cluster import images, node, secrets_store_csi
from restarter_cluster.cluster import Cluster
from restarter_cluster.node import RealNode
from tests.conftest import Operator, wait_for
from tests.integration.test_cert_manager import next_window
from tests.integration.test_operator_restarts import events, pending, replica_sets
from tests.node.conftest import printed, running_pods

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
PRINT_FILE = "echo file=$(cat /secrets/password)"


def mounting_app(name: str, provider_class: str) -> dict[str, Any]:
    """A Deployment on the real node that prints the mounted file once when it starts."""
    container = {
        "name": "app",
        "image": images.APP,
        "imagePullPolicy": "Never",
        "command": [
            "/bin/sh",
            "-c",
            f"{PRINT_FILE}; trap 'exit 0' TERM; while :; do sleep 1; done",
        ],
        "volumeMounts": [{"name": "secrets", "mountPath": "/secrets", "readOnly": True}],
    }
    volume = {
        "name": "secrets",
        "csi": {
            "driver": csi.DRIVER,
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": provider_class},
        },
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    **node.POD_PLACEMENT,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                    "volumes": [volume],
                },
            },
        },
    }


def reported_version(custom: Custom, namespace: str) -> list[str]:
    listed = custom.list_namespaced_custom_object(
        csi.GROUP, csi.VERSION, namespace, csi.POD_STATUSES
    )
    return [
        item["version"]
        for status in listed["items"]
        for item in (status.get("status") or {}).get("objects") or []
    ]


def one_pod_printing(core: Core, real_node: RealNode, namespace: str, text: str) -> str:
    def one() -> str | None:
        pods = running_pods(core, namespace, "app")
        if len(pods) == 1 and printed(real_node, namespace, pods[0].metadata.name, text):
            return str(pods[0].metadata.name)
        return None

    return str(wait_for(one, 150, message=f"one app pod printing {text!r}"))


def test_a_rotated_csi_secret_restarts_once_in_the_window_and_the_new_pod_prints_it(
    cluster: Cluster,
    real_node: RealNode,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: Callable[..., Operator],
) -> None:
    plugin = secrets_store_csi.start_node_plugin(
        cluster,
        real_node.directory / "kubelet",
        objects={"db-password": "v1"},
        files={"password": "first"},
    )
    window, start = next_window("UTC", dt.timedelta(seconds=75))
    provider_class = {
        "apiVersion": f"{csi.GROUP}/{csi.VERSION}",
        "kind": "SecretProviderClass",
        "metadata": {"name": "vault-db", "labels": {"restart-at": window}},
        "spec": {"provider": secrets_store_csi.PROVIDER, "parameters": {"objects": "db-password"}},
    }
    custom.create_namespaced_custom_object(
        csi.GROUP, csi.VERSION, namespace, csi.CLASSES, provider_class
    )
    operator("--csi")
    apps.create_namespaced_deployment(namespace, mounting_app("app", "vault-db"))
    first_pod = one_pod_printing(core, real_node, namespace, "file=first")
    wait_for(
        lambda: (apps.read_namespaced_deployment("app", namespace).metadata.annotations or {}).get(
            csi.versions_key("vault-db")
        ),
        30,
        message="the first versions recorded",
    )
    plugin.rotate({"db-password": "v2"}, {"password": "second"})
    wait_for(lambda: reported_version(custom, namespace) == ["v2"], 30, message="rotation")
    wait_for(lambda: pending(apps, namespace, "app"), 30, message="the mark")
    scheduled = events(core, namespace, "app", "RestartScheduled")
    assert scheduled and "SecretProviderClass vault-db" in scheduled[0].message
    detected = events(core, namespace, "vault-db", "ChangeDetected")
    assert detected and "db-password" in detected[0].message
    assert "second" not in detected[0].message + scheduled[0].message
    # Nothing restarts before the window.
    while dt.datetime.now(dt.UTC) < start - dt.timedelta(seconds=3):
        assert len(replica_sets(apps, namespace, "app")) == 1
        time.sleep(1)
    new_pod = one_pod_printing(core, real_node, namespace, "file=second")
    assert new_pod != first_pod
    restarted = apps.read_namespaced_deployment("app", namespace).metadata.annotations or {}
    assert int(restarted[keys.RESTART_TS]) >= int(start.timestamp())
    time.sleep(10)  # two rotation polls more: the new pod reports v2, already seen
    assert len(replica_sets(apps, namespace, "app")) == 2
    assert not pending(apps, namespace, "app")
