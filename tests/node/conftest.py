"""The real-node tier: the chart installed with the built image, its pods and the apps it
restarts running as real containers on the cluster's real node.

Container output and state are read from the node itself (its pod log directory, the
container's /proc and cgroup), never through the apiserver: the apiserver cannot reach a
kubelet inside the node's network namespace.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from restarter_cluster import binaries, images, node
from restarter_cluster.cluster import Cluster
from restarter_cluster.node import RealNode
from tests.conftest import wait_for
from tests.integration.test_chart import CHART, helm

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
#: Seconds between the test operator's timer ticks (the chart's default is 60).
TIMER_INTERVAL = 2
#: Figures measured on the real node in this process, not yet handed to a test's report.
FIGURES: list[str] = []


@pytest.fixture(autouse=True)
def _report_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hand this process's figures to the test's report: the summary (tests/conftest.py)
    reads them from there, also when the tests ran in xdist workers."""
    yield
    while FIGURES:
        request.node.user_properties.append(("figure", FIGURES.pop(0)))


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> RealNode:
    """The session cluster's real node, started on first use (it stays until the end)."""
    started = time.monotonic()
    try:
        running = cluster.add_real_node()
    except binaries.MissingBinaries as error:
        pytest.fail(f"the real node's binaries or images are not built: {error}")
    FIGURES.append(f"real node Ready in {time.monotonic() - started:.1f} s")
    return running


def on_the_real_node() -> list[str]:
    """Chart values that put every pod of the release on the real node."""
    return [
        "--set-json",
        f"nodeSelector={json.dumps(node.POD_PLACEMENT['nodeSelector'])}",
        "--set-json",
        f"tolerations={json.dumps(node.POD_PLACEMENT['tolerations'])}",
    ]


@dataclass
class Release:
    """A Helm release of the chart whose operator pods run the built image on the real node."""

    cluster: Cluster
    node: RealNode
    core: Core
    name: str
    namespace: str
    watched: list[str]

    @property
    def selector(self) -> str:
        return f"app.kubernetes.io/name=restarter,app.kubernetes.io/instance={self.name}"

    def pods(self) -> list[Any]:
        """The operator's pods that are not being deleted, oldest first."""
        found = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector).items
        live = [pod for pod in found if pod.metadata.deletion_timestamp is None]
        return sorted(live, key=lambda pod: pod.metadata.creation_timestamp)

    def running(self, count: int) -> list[Any]:
        """Wait until ``count`` operator pods run with their container started."""

        def started() -> list[Any] | None:
            pods = self.pods()
            ready = [p for p in pods if p.status.phase == "Running" and _started(p)]
            return ready if len(ready) == count == len(pods) else None

        def state() -> list[tuple[str, str, list[str]]]:
            """Each pod's phase and why its containers wait (an image pull, a backoff)."""
            return [
                (
                    p.metadata.name,
                    p.status.phase,
                    [
                        f"{c.state.waiting.reason}: {c.state.waiting.message}"
                        for c in p.status.container_statuses or []
                        if c.state and c.state.waiting
                    ],
                )
                for p in self.pods()
            ]

        # Generous: the wait is for the pod to run, not a measure of speed. A pod that waits
        # on its image says so in the failure (``state``), which is how a kubelet asking to
        # pull the imported image again was found.
        return list(
            wait_for(started, 300, message=f"{count} operator pods running", describe=state)
        )

    def log(self, pod: str) -> str:
        return self.node.log(self.namespace, pod, "restarter")

    def uninstall(self, *options: str) -> subprocess.CompletedProcess[str]:
        return helm(
            self.cluster,
            "uninstall",
            self.name,
            "-n",
            self.namespace,
            *options,
            check=False,
            timeout=300,  # the hook may take --timeout=4m
        )


def _started(pod: Any) -> bool:
    statuses = pod.status.container_statuses or []
    return bool(statuses) and all(s.started and s.state.running for s in statuses)


@pytest.fixture
def install(cluster: Cluster, real_node: RealNode, core: Core) -> Iterator[Callable[..., Release]]:
    """Factory: ``install(*watched namespaces, *helm options)`` installs the chart (namespaced
    mode: a Role in each watched namespace) and waits for its pods; uninstalled afterwards."""
    made: list[Release] = []

    def make(watched: list[str], *options: str, replicas: int = 1) -> Release:
        name = f"node-{uuid.uuid4().hex[:5]}"
        namespace = f"{name}-system"
        values = [
            "--set",
            f"image.repository={images.RESTARTER_REPOSITORY}",
            "--set",
            f"timerInterval={TIMER_INTERVAL}",
            "--set",
            "logFormat=plain",
            "--set",
            f"replicaCount={replicas}",
            "--set-json",
            f"namespaces={json.dumps(watched)}",
            *on_the_real_node(),
        ]
        helm(
            cluster,
            "install",
            name,
            str(CHART),
            "-n",
            namespace,
            "--create-namespace",
            *values,
            *options,
            timeout=300,
        )
        release = Release(cluster, real_node, core, name, namespace, watched)
        made.append(release)
        release.running(replicas)
        return release

    yield make
    for release in made:
        release.uninstall("--no-hooks", "--wait")
        core.delete_namespace(release.namespace)


PRINT_PASSWORD = 'echo "env=$PASSWORD file=$(cat /secret/password)"'


def app_deployment(
    name: str, secret_name: str, *, script: str = PRINT_PASSWORD, env: bool = True
) -> dict[str, Any]:
    """A Deployment on the real node whose container runs ``script`` once when it starts (by
    default: print the Secret's ``password`` as read from env and from the volume at
    /secret), then waits to be stopped."""
    container: dict[str, Any] = {
        "name": "app",
        "image": images.APP,
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", f"{script}; trap 'exit 0' TERM; while :; do sleep 1; done"],
        "volumeMounts": [{"name": "secret", "mountPath": "/secret", "readOnly": True}],
        "securityContext": {
            "runAsUser": 10001,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if env:
        container["env"] = [
            {
                "name": "PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": secret_name, "key": "password"}},
            }
        ]
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
                    "volumes": [{"name": "secret", "secret": {"secretName": secret_name}}],
                },
            },
        },
    }


def running_pods(core: Core, namespace: str, app: str) -> list[Any]:
    """The app's pods whose container has started and that are not being deleted."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None and _started(p)]


def printed(real_node: RealNode, namespace: str, pod: str, text: str) -> bool:
    return text in real_node.log(namespace, pod, "app")


def cgroup_file(real_node: RealNode, container_id: str, controller: str, name: str) -> Path:
    """A file of the running container's cgroup (v1), found from its host PID."""
    pid = real_node.container_pid(container_id)
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/") / name
    raise AssertionError(f"no {controller} cgroup for pid {pid}")
