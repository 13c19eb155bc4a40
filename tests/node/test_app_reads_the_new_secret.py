"""The outcome users care about, on real containers: after the restart, the application's new
pod reads the new Secret value, from env and from a volume; before its window, nothing
restarts. The operator is the chart's pod; output is read from the node's pod logs."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import kubernetes

from restarter.model import keys
from restarter_cluster.node import RealNode
from tests.conftest import wait_for
from tests.integration.factories import secret
from tests.integration.test_cert_manager import next_window
from tests.integration.test_operator_restarts import (
    baseline,
    change_data,
    events,
    replica_sets,
)
from tests.node.conftest import Release, app_deployment, printed, running_pods

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


def _the_one_pod_printing(
    core: Core, real_node: RealNode, namespace: str, text: str, timeout: float = 120
) -> str:
    """Wait until the app has exactly one running pod and it printed ``text``; its name."""

    def one() -> str | None:
        pods = running_pods(core, namespace, "app")
        if len(pods) == 1 and printed(real_node, namespace, pods[0].metadata.name, text):
            return str(pods[0].metadata.name)
        return None

    return str(
        wait_for(
            one,
            timeout,
            message=f"one app pod printing {text!r}",
            describe=lambda: [p.metadata.name for p in running_pods(core, namespace, "app")],
        )
    )


def _app_with_secret(
    core: Core, apps: Apps, real_node: RealNode, namespace: str, window: str
) -> str:
    core.create_namespaced_secret(namespace, secret("db", {"password": "first"}, window))
    apps.create_namespaced_deployment(namespace, app_deployment("app", "db"))
    return _the_one_pod_printing(core, real_node, namespace, "env=first file=first")


def test_a_change_with_restart_at_now_gives_the_new_pod_the_new_values_in_one_rollout(
    install: Callable[..., Release], core: Core, apps: Apps, real_node: RealNode, namespace: str
) -> None:
    first_pod = _app_with_secret(core, apps, real_node, namespace, "now")
    install([namespace])
    baseline(core, namespace, "db")
    assert len(replica_sets(apps, namespace, "app")) == 1

    change_data(core, namespace, "db", "second")
    new_pod = _the_one_pod_printing(core, real_node, namespace, "env=second file=second")

    assert new_pod != first_pod
    assert not printed(real_node, namespace, new_pod, "first")
    assert len(replica_sets(apps, namespace, "app")) == 2  # exactly one rollout
    assert len(events(core, namespace, "app", "Restarted")) == 1
    template = apps.read_namespaced_deployment("app", namespace).spec.template
    assert keys.KUBECTL_RESTARTED_AT in template.metadata.annotations


def test_a_change_waits_for_its_window_minutes_ahead_then_the_new_pod_reads_it(
    install: Callable[..., Release], core: Core, apps: Apps, real_node: RealNode, namespace: str
) -> None:
    install([namespace])
    window, opens = next_window("UTC", dt.timedelta(seconds=60))
    first_pod = _app_with_secret(core, apps, real_node, namespace, window)
    baseline(core, namespace, "db")

    change_data(core, namespace, "db", "second")
    wait_for(lambda: events(core, namespace, "app", "RestartScheduled"), 30, message="stamp")
    # Until the window opens: the same single pod, one ReplicaSet, no restart.
    while dt.datetime.now(dt.UTC) < opens - dt.timedelta(seconds=3):
        assert [p.metadata.name for p in running_pods(core, namespace, "app")] == [first_pod]
        assert len(replica_sets(apps, namespace, "app")) == 1
        time.sleep(2)
    assert events(core, namespace, "app", "Restarted") == []

    new_pod = _the_one_pod_printing(core, real_node, namespace, "env=second file=second")
    restarted = events(core, namespace, "app", "Restarted")
    assert len(restarted) == 1
    assert len(replica_sets(apps, namespace, "app")) == 2
    restarted_at = apps.read_namespaced_deployment("app", namespace).spec.template.metadata
    stamp = dt.datetime.fromisoformat(restarted_at.annotations[keys.KUBECTL_RESTARTED_AT])
    assert stamp >= opens
    assert new_pod != first_pod
