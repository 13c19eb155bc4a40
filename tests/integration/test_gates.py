"""Gates on the real control plane, against a real Alertmanager on loopback: a due restart
waits while a matching alert fires or a blocking pod exists, says which, and restarts once
it is gone; a gate that cannot be read holds, with a Warning (fail closed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from restarter_cluster.alertmanager import Alertmanager
from restarter_cluster.binaries import MissingBinaries
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port
from tests.conftest import Operator, wait_for
from tests.integration.factories import window_open_now
from tests.integration.test_holds import held_event
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
from tests.integration.test_plan_command import plan, plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    try:
        running = Alertmanager(tmp_path_factory.mktemp("alertmanager")).start()
    except MissingBinaries as error:
        pytest.fail(f"Alertmanager is not built: {error}")
    yield running
    running.stop()


def changed(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, start: Callable[[], Operator]
) -> Operator:
    """Secret ``db`` with its window open now, Deployment ``web``; the operator ``start``
    gives; the data changes."""
    secret_and_dependent(core, apps, namespace, window_open_now())
    rollout_finished(cluster, namespace, "web")
    running = start()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    return running


def restarted(apps: Apps, namespace: str, why: str, timeout: float = 30) -> None:
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, timeout, message=why)


def test_a_firing_alert_holds_the_restart_until_it_resolves(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    alertmanager: Alertmanager,
) -> None:
    alertmanager.fire("DatabaseDown", severity="critical", namespace=namespace)
    alertmanager.fire("Unrelated", severity="info", namespace=namespace)
    gate = [
        "--gate-alertmanager-url",
        alertmanager.url,
        "--gate-alert-filter",
        "severity=critical",
        "--gate-namespace-only",
    ]
    changed(cluster, core, apps, namespace, lambda: operator(*gate))
    message = held_event(core, namespace, "web")
    assert "held by a gate: alert DatabaseDown firing in Alertmanager" in message
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1
    assert pending(apps, namespace, "web")

    alertmanager.resolve("DatabaseDown", severity="critical", namespace=namespace)
    restarted(apps, namespace, "the restart once the alert resolved")


def test_a_blocking_pod_holds_the_restart_until_it_is_gone(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    pod = {
        "metadata": {"name": "backup", "labels": {"job": "backup"}},
        "spec": {"containers": [{"name": "b", "image": "registry.invalid/backup:1"}]},
    }
    core.create_namespaced_pod(namespace, pod)
    changed(
        cluster,
        core,
        apps,
        namespace,
        lambda: operator("--gate-blocking-pods", "job=backup", "--gate-namespace-only"),
    )
    message = held_event(core, namespace, "web")
    assert f"blocking pod {namespace}/backup matches 'job=backup'" in message
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1
    # plan, given the operator's gate, shows the row held and each blocker as of now.
    gate = ("--gate-blocking-pods", "job=backup", "--gate-namespace-only")
    (row,) = plan_json(cluster.kubeconfig, "-n", namespace, *gate)
    assert row["state"] == "held"
    table = plan(cluster.kubeconfig, "-n", namespace, *gate).stdout
    assert "blockers, in order (as of now):" in table
    assert f"pods     held by a gate: blocking pod {namespace}/backup" in table

    core.delete_namespaced_pod("backup", namespace, grace_period_seconds=0)
    restarted(apps, namespace, "the restart once the blocking pod is gone", 60)


def test_an_alertmanager_that_cannot_be_read_holds_with_a_warning(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    changed(cluster, core, apps, namespace, lambda: operator("--gate-alertmanager-url", nobody))
    message = held_event(core, namespace, "web")
    assert "Alertmanager could not be read" in message
    (held,) = events(core, namespace, "web", "RestartHeld")
    assert held.type == "Warning"
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1
    assert pending(apps, namespace, "web")


def test_failing_open_restarts_when_alertmanager_cannot_be_read(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    running = changed(
        cluster,
        core,
        apps,
        namespace,
        lambda: operator("--gate-alertmanager-url", nobody, "--gate-fail-open"),
    )
    restarted(apps, namespace, "the restart")
    assert not events(core, namespace, "web", "RestartHeld")
    assert "the alerts gate could not be read" in running.log()
    # Failing open is said on the workload it let through, as a Warning.
    (opened,) = wait_for(
        lambda: events(core, namespace, "web", "GateFailedOpen"), 30, message="GateFailedOpen"
    )
    assert opened.type == "Warning"
    assert "Alertmanager could not be read" in opened.message
