"""The local control plane behaves like a cluster: controllers, scheduler, nodes, RBAC."""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest

from restarter_cluster.cluster import Cluster, process_alive
from tests.conftest import wait_for
from tests.integration.factories import deployment


def _ready_pods(core: kubernetes.client.CoreV1Api, namespace: str, app: str) -> list[object]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [
        pod
        for pod in pods
        if pod.status.phase == "Running"
        and pod.spec.node_name
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    ]


def test_deployment_creates_replicaset_and_ready_pods_on_kwok_nodes(
    apps: kubernetes.client.AppsV1Api, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=2))
    sets = wait_for(
        lambda: apps.list_namespaced_replica_set(namespace).items, 30, message="a ReplicaSet"
    )
    assert len(sets) == 1
    pods = wait_for(
        lambda: (
            len(_ready_pods(core, namespace, "web")) == 2 and _ready_pods(core, namespace, "web")
        ),
        60,
        message="2 Ready pods",
    )
    nodes = {pod.spec.node_name for pod in pods}  # type: ignore[attr-defined]
    assert nodes <= {"kwok-node-0", "kwok-node-1"}


def test_kwok_renews_each_nodes_lease_so_the_nodes_stay_ready(
    api_client: kubernetes.client.ApiClient,
) -> None:
    """kube-controller-manager marks a node NotReady (and takes Ready from its pods) when
    neither its Lease nor its status is renewed within the grace period; kwok renews the
    Leases every 10 s."""
    leases = kubernetes.client.CoordinationV1Api(api_client)

    def renewed() -> dict[str, object]:
        items = leases.list_namespaced_lease("kube-node-lease").items
        return {lease.metadata.name: lease.spec.renew_time for lease in items}

    nodes = {"kwok-node-0", "kwok-node-1"}
    first = wait_for(lambda: nodes <= renewed().keys() and renewed(), 30, message="node Leases")
    wait_for(
        lambda: all(renewed()[node] != first[node] for node in nodes),
        30,
        message="both node Leases renewed",
    )


def test_rollout_restart_creates_a_second_replicaset_and_completes(
    cluster: Cluster, apps: kubernetes.client.AppsV1Api, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=2))
    cluster.kubectl("-n", namespace, "rollout", "status", "deployment/web", "--timeout=60s")
    cluster.kubectl("-n", namespace, "rollout", "restart", "deployment/web")
    status = cluster.kubectl(
        "-n", namespace, "rollout", "status", "deployment/web", "--timeout=90s", check=False
    )
    assert status.returncode == 0, status.stderr
    assert len(apps.list_namespaced_replica_set(namespace).items) == 2


def test_serviceaccount_token_without_role_is_forbidden_to_list_secrets(
    cluster: Cluster, namespace: str
) -> None:
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "nobody")
    token = cluster.kubectl("-n", namespace, "create", "token", "nobody").stdout.strip()
    assert token.count(".") == 2  # a JWT from the TokenRequest API

    configuration = kubernetes.client.Configuration()
    configuration.host = cluster.server
    configuration.ssl_ca_cert = str(cluster.pki_dir / "ca.crt")
    configuration.api_key = {"authorization": f"Bearer {token}"}
    client = kubernetes.client.ApiClient(configuration)
    as_nobody = kubernetes.client.CoreV1Api(client)
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        as_nobody.list_namespaced_secret(namespace)
    assert refused.value.status == 403
    review = cluster.kubectl(
        "auth",
        "can-i",
        "list",
        "secrets",
        "-n",
        namespace,
        f"--as=system:serviceaccount:{namespace}:nobody",
        check=False,
    )
    assert review.stdout.strip() == "no"
    whoami = kubernetes.client.AuthenticationV1Api(client).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    assert whoami.status.user_info.username == f"system:serviceaccount:{namespace}:nobody"


def test_down_stops_every_process_it_started(tmp_path: Path) -> None:
    second = Cluster(directory=tmp_path / "second", nodes=1).up()
    pids = dict(second.pids)
    assert set(pids) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    }
    assert all(process_alive(pid) for pid in pids.values())
    second.down()
    assert [name for name, pid in pids.items() if process_alive(pid)] == []
