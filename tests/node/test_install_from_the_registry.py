"""restarter installed as a user installs it: the chart from an OCI registry that asks for a
login (`helm install oci://...`), its image pulled by the real node's kubelet with the
chart's imagePullSecrets. Both pushed there by hack/release.sh, the chart pinning the image
by digest; the registry is CNCF distribution's, built from its pinned module."""

from __future__ import annotations

import uuid
from typing import Any

import kubernetes
import pytest

from restarter_cluster.cluster import Cluster
from restarter_cluster.node import POD_PLACEMENT, RealNode
from restarter_cluster.registry import Published, Registry
from tests.conftest import wait_for
from tests.integration.test_chart import helm
from tests.node.conftest import FIGURES, Release, on_the_real_node
from tests.node.test_operator_pod_runs_the_image import _get_inside

Core = kubernetes.client.CoreV1Api


@pytest.fixture(scope="module")
def registry(cluster: Cluster, real_node: RealNode) -> Registry:
    return Registry(cluster).up()


@pytest.fixture(scope="module")
def published(registry: Registry) -> Published:
    return registry.publish()


def pod_events(core: Core, namespace: str, pod: str) -> list[Any]:
    selector = f"involvedObject.name={pod}"
    return list(core.list_namespaced_event(namespace, field_selector=selector).items)


def test_the_chart_from_the_registry_runs_the_image_the_kubelet_pulled_with_its_secret(
    cluster: Cluster,
    real_node: RealNode,
    core: Core,
    registry: Registry,
    published: Published,
    namespace: str,
) -> None:
    """The release lives in the namespace it watches, beside its pull secret."""
    core.create_namespaced_secret(namespace, registry.pull_secret("regcred"))
    seen = len(registry.log())
    name = f"oci-{uuid.uuid4().hex[:5]}"
    helm(
        cluster,
        "install",
        name,
        published.chart,
        "--version",
        published.version,
        "--plain-http",
        "--registry-config",
        str(registry.auth_file),
        "-n",
        namespace,
        "--set",
        "imagePullSecrets[0].name=regcred",
        "--set",
        "image.pullPolicy=Always",
        "--set",
        "logFormat=plain",
        "--set-json",
        f'namespaces=["{namespace}"]',
        *on_the_real_node(),
        timeout=300,
    )
    release = Release(cluster, real_node, core, name, namespace, [namespace])
    try:
        [pod] = release.running(1)
        pinned = f"{published.repository}@{published.digest}"
        assert pod.spec.containers[0].image == pinned  # the published chart's image.digest
        assert [s.name for s in pod.spec.image_pull_secrets] == ["regcred"]
        status = pod.status.container_statuses[0]
        assert status.image_id == pinned  # pulled from the registry, not the imported one
        events = pod_events(core, namespace, pod.metadata.name)
        assert f'Pulling image "{pinned}"' in [e.message for e in events if e.reason == "Pulling"]
        [pulled] = [e.message for e in events if e.reason == "Pulled"]
        assert pulled.startswith(f'Successfully pulled image "{pinned}"')
        FIGURES.append(f"kubelet: {pulled}")

        served = registry.log()[seen:].splitlines()
        chart_pull = f'"GET /v2/charts/restarter/manifests/{published.version} HTTP/1.1" 200'
        assert any(chart_pull in line and "Helm/" in line for line in served), served[-20:]
        # containerd asks for the manifest by digest: a GET, or only a HEAD when the node
        # already holds that content (the node imports the same image at its start).
        image_pulls = [
            f'"{verb} /v2/restarter/manifests/{published.digest} HTTP/1.1" 200'
            for verb in ("GET", "HEAD")
        ]
        assert any(
            pull in line and "containerd/" in line for line in served for pull in image_pulls
        ), served[-20:]
        authorized = [line for line in served if "authorized request" in line]
        assert authorized and all("auth.user.name=restarter" in line for line in authorized)

        wait_for(
            lambda: "Initial authentication has finished" in release.log(pod.metadata.name),
            60,
            message="kopf started in the pod's log",
        )
        assert _get_inside(real_node, f"http://{pod.status.pod_ip}:8080/healthz") == 200
    finally:
        release.uninstall("--no-hooks", "--wait")


def test_without_the_pull_secret_the_registry_refuses_the_kubelet(
    core: Core, published: Published, namespace: str
) -> None:
    pinned = f"{published.repository}@{published.digest}"
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "no-secret"},
            "spec": {
                **POD_PLACEMENT,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "app",
                        "image": pinned,
                        "imagePullPolicy": "Always",
                        "command": ["sleep", "inf"],
                    }
                ],
            },
        },
    )

    def refused() -> list[str]:
        events = pod_events(core, namespace, "no-secret")
        return [e.message for e in events if e.reason == "Failed" and "401" in e.message]

    def waiting() -> str | None:
        statuses = core.read_namespaced_pod("no-secret", namespace).status.container_statuses
        reason = (
            statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None
        )
        return reason if reason in ("ErrImagePull", "ImagePullBackOff") else None

    [message, *_] = wait_for(refused, 120, message="the kubelet's pull refused")
    assert pinned in message
    wait_for(waiting, 60, message="the container waiting on its image")
