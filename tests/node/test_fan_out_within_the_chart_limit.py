"""With the chart's default resources, the operator's real pod (its memory limit enforced by
a real cgroup) restarts 2 000 dependents of one Secret without an OOMKill. The dependents
are shaped like a Helm chart's Deployments applied by kubectl (three containers, probes,
25 environment entries, the last-applied configuration, managedFields): the bodies a
fan-out parses are as big as a real cluster's. The peak memory the kernel recorded for
the container goes into the test summary."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes
import urllib3
from bench.workload import realistic_deployment

from restarter.model import keys
from restarter_cluster.node import RealNode
from tests.conftest import wait_for
from tests.integration.factories import secret
from tests.integration.test_operator_restarts import baseline, change_data
from tests.node.conftest import FIGURES, Release, cgroup_file

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
DEPENDENTS = 2000
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: Answers of a loaded apiserver that a later listing gets past.
TRANSIENT = {410, 429, 500, 503, 504}
TRIES = 5


def helm_shaped(name: str, secret_name: str) -> dict[str, Any]:
    """A Helm chart's Deployment as ``kubectl apply`` leaves it, reading ``secret_name``
    through envFrom; no replicas: each restart makes a ReplicaSet, not pods (the
    operator's work is the same)."""
    body = realistic_deployment(name, [secret_name])
    body["metadata"]["annotations"][LAST_APPLIED] = json.dumps(body, separators=(",", ":"))
    return body


def _deployments(apps: Apps, namespace: str) -> list[dict[str, Any]]:
    """Every Deployment of the namespace, in pages of 500 read as plain JSON: 2 000
    Helm-shaped bodies as the client's models cost the test seconds of CPU on every poll,
    and one list of them all outlasted a loaded apiserver's 60 s request timeout. A page
    the apiserver could not serve yet (a 504 when its watch cache lags the continue
    token's resourceVersion, a 410 when the token expired) or cut short starts the listing again."""
    for _ in range(TRIES - 1):
        try:
            return _listed(apps, namespace)
        except kubernetes.client.ApiException as error:
            if error.status not in TRANSIENT:
                raise
            time.sleep(1)
        except urllib3.exceptions.ProtocolError:  # a loaded apiserver cut the answer short
            time.sleep(1)
    return _listed(apps, namespace)


def _listed(apps: Apps, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        options: dict[str, Any] = {"limit": 500, "_preload_content": False}
        if token:
            options["_continue"] = token
        page = json.loads(apps.list_namespaced_deployment(namespace, **options).data)
        found += page.get("items") or []
        token = page["metadata"].get("continue")
        if not token:
            return found


def _observed(apps: Apps, namespace: str) -> int:
    return sum(
        1
        for d in _deployments(apps, namespace)
        if (d.get("status") or {}).get("observedGeneration", 0) >= d["metadata"]["generation"]
    )


def _restarted(apps: Apps, namespace: str) -> int:
    return sum(
        1
        for d in _deployments(apps, namespace)
        if keys.KUBECTL_RESTARTED_AT in (d["spec"]["template"]["metadata"].get("annotations") or {})
    )


def test_the_operator_pod_restarts_2000_dependents_within_the_chart_memory_limit(
    install: Callable[..., Release], core: Core, apps: Apps, real_node: RealNode, namespace: str
) -> None:
    core.create_namespaced_secret(namespace, secret("bundle", {"password": "a"}, "now"))
    bodies = [helm_shaped(f"web-{i:04d}", "bundle") for i in range(DEPENDENTS)]
    with ThreadPoolExecutor(10) as pool:  # the client's connection pool
        list(pool.map(lambda body: apps.create_namespaced_deployment(namespace, body), bodies))
    # The deployment controller works through all of them first (its own request rate): the
    # operator's Deployment would otherwise wait behind them for its ReplicaSet.
    wait_for(
        lambda: _observed(apps, namespace) == DEPENDENTS,
        300,
        interval=2,
        message="the deployment controller to see every dependent",
        describe=lambda: f"{_observed(apps, namespace)} observed",
    )
    # Pacing off: all are due at once, the most the operator ever holds.
    release = install(
        [namespace], "--set", "pacing.maxInFlight=0", "--set", "pacing.maxPerMinute=0"
    )
    pod = release.pods()[0]
    container_id = pod.status.container_statuses[0].container_id
    baseline(core, namespace, "bundle")
    start = int(cgroup_file(real_node, container_id, "memory", "memory.usage_in_bytes").read_text())

    change_data(core, namespace, "bundle", "b")
    wait_for(
        lambda: _restarted(apps, namespace) == DEPENDENTS,
        600,
        interval=3,
        message=f"{DEPENDENTS} restarts",
        describe=lambda: f"{_restarted(apps, namespace)} restarted",
    )

    status = core.read_namespaced_pod(pod.metadata.name, release.namespace).status
    container = status.container_statuses[0]
    assert container.restart_count == 0
    assert container.last_state.terminated is None
    memory = cgroup_file(real_node, container_id, "memory", "memory.max_usage_in_bytes")
    peak = int(memory.read_text())
    limit = int(memory.with_name("memory.limit_in_bytes").read_text())
    oom = memory.with_name("memory.oom_control").read_text()
    assert "oom_kill 0" in oom
    assert peak < limit
    FIGURES.append(
        f"operator pod, {DEPENDENTS}-dependent fan-out (restart-at=now, pacing off): peak "
        f"{peak / 2**20:.0f} MiB of its {limit / 2**20:.0f} MiB limit (cgroup "
        f"memory.max_usage_in_bytes; {start / 2**20:.0f} MiB before the change)"
    )
