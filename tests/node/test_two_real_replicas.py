"""``replicaCount: 2`` as two real pods: one Lease holder, a PodDisruptionBudget, and a
restart pending when the holder dies still happens once in its window, by the survivor."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Callable

import kubernetes
import pytest

from restarter.model import keys
from restarter_cluster.node import RealNode
from tests.conftest import wait_for
from tests.integration.factories import deployment, env_from_secret, secret
from tests.integration.test_cert_manager import next_window
from tests.integration.test_operator_restarts import (
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
)
from tests.node.conftest import Release

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


def _holder(coordination: kubernetes.client.CoordinationV1Api, release: Release) -> str | None:
    try:
        lease = coordination.read_namespaced_lease(f"{release.name}-restarter", release.namespace)
    except kubernetes.client.exceptions.ApiException:
        return None
    return lease.spec.holder_identity


@pytest.mark.parametrize("death", ["pod deleted", "container killed"])
def test_when_the_lease_holder_dies_with_a_restart_pending_it_happens_once_in_the_window(
    death: str,
    install: Callable[..., Release],
    api_client: kubernetes.client.ApiClient,
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
) -> None:
    coordination = kubernetes.client.CoordinationV1Api(api_client)
    policy = kubernetes.client.PolicyV1Api(api_client)
    # The Deployment exists before the operator starts, so it is in the first listing: one
    # created just before the change could reach the operator after the Secret's event.
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    release = install([namespace], replicas=2)
    pods = {pod.metadata.name: pod for pod in release.pods()}
    assert {pod.spec.node_name for pod in pods.values()} == {"real-node"}
    leader = wait_for(lambda: _holder(coordination, release), 60, message="a Lease holder")
    assert leader in pods
    # The holder starts kopf only once it holds the Lease; on a loaded machine that start
    # (imports, listings) took longer than the checksum wait below.
    wait_for(
        lambda: "Initial authentication has finished" in release.log(leader),
        120,
        message="the Lease holder's kopf started",
    )
    budget = policy.read_namespaced_pod_disruption_budget(
        f"{release.name}-restarter", release.namespace
    )
    wait_for(
        lambda: (
            policy.read_namespaced_pod_disruption_budget(
                budget.metadata.name, release.namespace
            ).status.current_healthy
            == 2
        ),
        60,
        message="the budget counting two healthy pods",
    )

    # At least a minute ahead: a loaded run once took over 30 s to stamp, with nothing in
    # the holder's log (a request waiting out its read timeout now logs a warning).
    window, opens = next_window("UTC", dt.timedelta(seconds=60))
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window))
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(
        lambda: pending(apps, namespace, "web"),
        (opens - dt.datetime.now(dt.UTC)).total_seconds() - 2,
        message="pending marks before the window opens",
        describe=lambda: f"the Lease holder's log ends:\n{release.log(leader)[-6000:]}",
    )
    assert dt.datetime.now(dt.UTC) < opens, "stamped after the window opened: too slow here"

    if death == "pod deleted":
        core.delete_namespaced_pod(leader, release.namespace)
    else:
        os.kill(real_node.container_pid(_container_id(pods[leader])), signal.SIGKILL)

    if death == "pod deleted":
        survivor = wait_for(
            lambda: (h := _holder(coordination, release)) != leader and h,
            90,
            message="the other pod holding the Lease",
        )
        assert survivor in {p.metadata.name for p in release.pods()}
    else:
        # The killed container starts again in the same pod, under the same identity: it may
        # take the Lease back at once, or the other pod takes it once it expires.
        wait_for(
            lambda: (
                core.read_namespaced_pod(leader, release.namespace)
                .status.container_statuses[0]
                .restart_count
                == 1
            ),
            60,
            message="the killed container started again",
        )
    wait_for(
        lambda: events(core, namespace, "web", "Restarted"),
        (opens - dt.datetime.now(dt.UTC)).total_seconds() + 90,
        message="the restart in the window",
    )
    time.sleep(10)  # five more timer ticks of every replica: none restarts again
    assert len(events(core, namespace, "web", "Restarted")) == 1
    assert len(replica_sets(apps, namespace, "web")) == 2
    restarted = apps.read_namespaced_deployment("web", namespace)
    stamp = dt.datetime.fromisoformat(
        restarted.spec.template.metadata.annotations[keys.KUBECTL_RESTARTED_AT]
    )
    assert stamp >= opens
    assert pending(apps, namespace, "web") == {}
    assert _holder(coordination, release) in {p.metadata.name for p in release.pods()}


def _container_id(pod: kubernetes.client.V1Pod) -> str:
    return str(pod.status.container_statuses[0].container_id)
