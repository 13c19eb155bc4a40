"""restarter installed as a user installs it: the chart from an OCI registry that asks for a
login (`helm install oci://...`), its image pulled by the real node's kubelet with the
chart's imagePullSecrets. Both pushed there by hack/release.sh, the chart pinning the image
by digest; the registry is CNCF distribution's, built from its pinned module."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from restarter_cluster import images
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


def sleeping_pod(name: str, image: str, policy: str, secrets: list[str]) -> dict[str, Any]:
    """A pod on the real node that only sleeps, in ``image`` pulled by ``policy``."""
    return {
        "metadata": {"name": name},
        "spec": {
            **POD_PLACEMENT,
            "restartPolicy": "Never",
            "imagePullSecrets": [{"name": s} for s in secrets],
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": policy,
                    "command": ["sleep", "inf"],
                }
            ],
        },
    }


def test_without_the_pull_secret_the_registry_refuses_the_kubelet(
    core: Core, published: Published, namespace: str
) -> None:
    pinned = f"{published.repository}@{published.digest}"
    core.create_namespaced_pod(namespace, sleeping_pod("no-secret", pinned, "Always", []))

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


def pull_records(real_node: RealNode) -> list[dict[str, Any]]:
    """The kubelet's records of the images it pulled and with which credentials (one JSON
    file per image ID)."""
    directory = real_node.directory / "kubelet" / "image_manager" / "pulled"
    return [json.loads(path.read_text()) for path in directory.iterdir()]


def test_a_pod_of_the_imported_image_still_starts_after_the_kubelet_pulled_it_with_a_secret(
    core: Core, real_node: RealNode, registry: Registry, published: Published, namespace: str
) -> None:
    """The registry's image is the node's imported one (same image ID). Once the kubelet has
    pulled it with a pull secret, it would ask any later pod for the right to it, by pulling
    again (KubeletEnsureSecretPulledImages): a pod naming the imported ``localhost/`` tag,
    which no registry serves, would wait in ImagePullBackOff. The node's kubelet exempts the
    imported images, as the chart installs of the other real-node tests need."""
    core.create_namespaced_secret(namespace, registry.pull_secret("regcred"))
    pinned = f"{published.repository}@{published.digest}"

    def running(name: str) -> Callable[[], bool]:
        return lambda: core.read_namespaced_pod(name, namespace).status.phase == "Running"

    core.create_namespaced_pod(namespace, sleeping_pod("pulled", pinned, "Always", ["regcred"]))
    wait_for(running("pulled"), 120, message="the pod pulled with the secret running")

    def recorded() -> bool:
        """The kubelet recorded the pod's secret as a right to the image (beside the other
        registry tests' secrets): written once the pull ended, maybe after the container ran."""
        mappings = [record["credentialMapping"] for record in pull_records(real_node)]
        return (namespace, "regcred") in [
            (secret["namespace"], secret["name"])
            for mapping in mappings
            for secret in mapping.get(published.repository, {}).get("kubernetesSecrets", [])
        ]

    wait_for(recorded, 30, message="the kubelet's record of the pull with the secret")
    imported = images.restarter_image()
    core.create_namespaced_pod(namespace, sleeping_pod("imported", imported, "IfNotPresent", []))

    def started_or_refused() -> str | None:
        status = core.read_namespaced_pod("imported", namespace).status
        [container] = status.container_statuses or [None]
        if container is None:
            return None
        if container.state.running:
            return "running"
        waiting = container.state.waiting
        if waiting and waiting.reason in ("ErrImagePull", "ImagePullBackOff"):
            return f"{waiting.reason}: {waiting.message}"
        return None

    outcome = wait_for(started_or_refused, 120, message="the imported image's pod started")
    assert outcome == "running"
    events = pod_events(core, namespace, "imported")
    assert "Pulling" not in [e.reason for e in events]
