"""Holds on the real control plane: a due restart held by a workload's, a namespace's or
the operator's hold stays pending, says so, shows in ``plan``, and restarts once lifted."""

from __future__ import annotations

import time
from collections.abc import Callable

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    rollout_finished,
    secret_and_dependent,
)
from tests.integration.test_plan_command import plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


def held_event(core: Core, namespace: str, name: str) -> str:
    """The message of the workload's RestartHeld Event, once posted."""
    found = wait_for(
        lambda: events(core, namespace, name, "RestartHeld"), 30, message="a RestartHeld Event"
    )
    return str(found[0].message)


def lift_namespace_hold(core: Core, apps: Apps, namespace: str) -> None:
    """The namespace's hold removed: ``web`` restarts once, its marks cleared."""
    core.patch_namespace(namespace, {"metadata": {"annotations": {keys.HOLD: None}}})
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2,
        30,
        message="the restart once the hold is removed",
    )
    assert pending(apps, namespace, "web") == {}


def changed_while_held(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, start: Callable[[], Operator]
) -> str:
    """Secret ``db`` (window open now) and Deployment ``web``; the data changes while a
    hold is set: the RestartHeld message, after a few ticks that restarted nothing."""
    secret_and_dependent(core, apps, namespace, window_open_now())
    rollout_finished(cluster, namespace, "web")
    start()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    message = held_event(core, namespace, "web")
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1  # nothing restarted
    assert pending(apps, namespace, "web")  # nothing lost: still pending
    return message


def test_a_namespace_hold_keeps_a_due_restart_pending_until_it_is_removed(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.patch_namespace(namespace, {"metadata": {"annotations": {keys.HOLD: "change freeze"}}})
    message = changed_while_held(cluster, core, apps, namespace, operator)
    assert f"held by {keys.HOLD} on namespace {namespace}: change freeze" in message
    (row,) = plan_json(cluster.kubeconfig, "-n", namespace)
    assert row["state"] == "held"
    assert any("change freeze" in note for note in row["notes"])

    lift_namespace_hold(core, apps, namespace)
    assert events(core, namespace, "web", "Restarted")


def test_a_workload_hold_holds_that_workload_alone(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    held = {keys.HOLD: "nightly job running"}
    apps.create_namespaced_deployment(
        namespace, deployment("batch", env=[env_from_secret("db")], annotations=held)
    )
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    for name in ("batch", "web"):
        rollout_finished(cluster, namespace, name)
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")

    message = held_event(core, namespace, "batch")
    assert f"held by {keys.HOLD} on workload batch: nightly job running" in message
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="web's restart")
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "batch")) == 1
    assert pending(apps, namespace, "batch")

    apps.patch_namespaced_deployment(
        "batch", namespace, {"metadata": {"annotations": {keys.HOLD: None}}}
    )
    wait_for(
        lambda: len(replica_sets(apps, namespace, "batch")) == 2, 30, message="batch's restart"
    )


def test_the_operators_hold_holds_every_restart(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    message = changed_while_held(
        cluster, core, apps, namespace, lambda: operator("--hold", "release day")
    )
    assert "held by the operator's --hold: release day" in message
    (row,) = plan_json(cluster.kubeconfig, "-n", namespace, "--hold", "release day")
    assert row["state"] == "held"
