"""The chart's pods under the `restricted` Pod Security Standard, and its NetworkPolicy."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from restarter_cluster.cluster import Cluster
from tests.chart_identity import CHART, render
from tests.conftest import wait_for
from tests.integration.test_chart import helm, objects_of, release_objects

Core = kubernetes.client.CoreV1Api


@pytest.fixture
def restricted(core: Core) -> Iterator[str]:
    """A namespace that enforces (and warns and audits) the restricted standard."""
    name = f"restricted-{uuid.uuid4().hex[:5]}"
    level = "restricted"
    labels = {f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce", "warn", "audit")}
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield name
    core.delete_namespace(name)


def test_the_chart_installs_tests_and_uninstalls_in_a_restricted_namespace(
    cluster: Cluster, core: Core, restricted: str
) -> None:
    # The label is enforced: a pod that may run as root is refused there.
    rootful = {
        "metadata": {"name": "rootful"},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(restricted, rootful)
    assert caught.value.status == 403
    said = json.loads(caught.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in said, said

    release = f"ps-{uuid.uuid4().hex[:5]}"
    try:
        # The operator's pod, created by its ReplicaSet: --wait fails unless it was admitted.
        installed = helm(
            cluster, "install", release, str(CHART), "-n", restricted, "--wait", "--timeout", "90s"
        )
        assert "would violate PodSecurity" not in installed.stderr
        selector = f"app.kubernetes.io/name=restarter,app.kubernetes.io/instance={release}"
        wait_for(
            lambda: core.list_namespaced_pod(restricted, label_selector=selector).items,
            30,
            message="the operator's pod",
        )
        # `helm test`'s pod is admitted there too (kwok would keep it running: it is
        # created here, not through `helm test`, which waits for it to succeed).
        [test_pod] = [doc for doc in render(cluster, release, restricted) if doc["kind"] == "Pod"]
        core.create_namespaced_pod(restricted, test_pod)
        core.delete_namespaced_pod(test_pod["metadata"]["name"], restricted)
        # The pre-delete hook Job's pod: the uninstall waits for the Job to complete (kwok
        # completes a Job's pod without running its container).
        helm(cluster, "uninstall", release, "-n", restricted, "--wait", "--timeout", "90s")
        assert release_objects(cluster, release) == []
    finally:
        helm(cluster, "uninstall", release, "-n", restricted, "--no-hooks", check=False)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a NetworkPolicy's podSelector (matchLabels, In expressions) selects ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        assert expression["operator"] == "In"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_the_network_policy_lets_out_only_to_the_apiserver_and_in_only_the_chosen_peers(
    cluster: Cluster, namespace: str
) -> None:
    apiserver = {"cidr": "127.0.0.1/32", "port": cluster.ports["apiserver"]}
    monitoring = {"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}
    values = (
        "--set",
        "networkPolicy.enabled=true",
        "--set-json",
        f"networkPolicy.apiServer={json.dumps([apiserver])}",
        "--set-json",
        f"networkPolicy.ingressFrom={json.dumps([monitoring])}",
    )
    docs = render(cluster, "np", namespace, *values)
    [policy] = [doc for doc in docs if doc["kind"] == "NetworkPolicy"]
    # The apiserver accepts it as it is.
    applied = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump(policy),
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    spec = policy["spec"]
    pods = {
        doc["kind"]: doc["spec"]["template"]["metadata"]["labels"]
        for doc in docs
        if doc["kind"] in ("Deployment", "Job")
    }
    [test_pod] = [doc for doc in docs if doc["kind"] == "Pod"]
    # The operator's pods and the uninstall hook's; not the `helm test` pod, which must
    # reach the operator's health port.
    assert _selects(spec["podSelector"], pods["Deployment"])
    assert _selects(spec["podSelector"], pods["Job"])
    assert not _selects(spec["podSelector"], test_pod["metadata"]["labels"])
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # Out: the apiserver's address and port, nothing else (no DNS either).
    to_apiserver = {"protocol": "TCP", "port": apiserver["port"]}
    assert spec["egress"] == [
        {"to": [{"ipBlock": {"cidr": "127.0.0.1/32"}}], "ports": [to_apiserver]}
    ]
    # In: the health and metrics ports, from the chosen peers and the chart's test pod.
    [ingress] = spec["ingress"]
    assert ingress["ports"] == [
        {"protocol": "TCP", "port": "health"},
        {"protocol": "TCP", "port": "metrics"},
    ]
    [peer, tester] = ingress["from"]
    assert peer == monitoring
    assert _selects(tester["podSelector"], test_pod["metadata"]["labels"])
    assert not _selects(tester["podSelector"], pods["Deployment"])

    assert not [doc for doc in render(cluster, "off", namespace) if doc["kind"] == "NetworkPolicy"]
    missing = helm(
        cluster, "template", "x", str(CHART), "--set", "networkPolicy.enabled=true", check=False
    )
    assert missing.returncode != 0 and "apiServer" in missing.stderr


def test_the_chart_test_pod_is_not_an_operator_pod(cluster: Cluster) -> None:
    """Selecting the operator's pods (the uninstall hook waits for them to go, the
    NetworkPolicy applies to them) never takes in `helm test`'s pod."""
    docs = objects_of(helm(cluster, "template", "t", str(CHART)).stdout)
    [operator] = [doc for doc in docs if doc["kind"] == "Deployment"]
    [test_pod] = [doc for doc in docs if doc["kind"] == "Pod"]
    selector = operator["spec"]["selector"]["matchLabels"].items()
    assert not selector <= test_pod["metadata"]["labels"].items()
