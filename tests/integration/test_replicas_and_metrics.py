"""Two replicas with one acting (the chart's Lease and RBAC), and the metrics endpoint."""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import kubernetes
from prometheus_client.parser import text_string_to_metric_families

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port
from tests.conftest import Operator, wait_for
from tests.integration.factories import (
    deployment,
    env_from_secret,
    secret,
    window_hours_away,
    window_open_now,
)
from tests.integration.test_chart import (
    CHART,
    helm,
    install,
    objects_of,
    release,  # noqa: F401  (the fixture)
    run_as_chart,
)
from tests.integration.test_operator_restarts import baseline, change_data, events

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


# --- the chart -----------------------------------------------------------------------------


def kinds(cluster: Cluster, *values: str) -> list[str]:
    rendered = helm(cluster, "template", "t", str(CHART), "-n", "restarter-system", *values)
    return [doc["kind"] for doc in objects_of(rendered.stdout)]


def test_the_service_monitor_is_rendered_only_when_enabled(cluster: Cluster) -> None:
    assert "ServiceMonitor" not in kinds(cluster)
    enabled = ("--set", "metrics.serviceMonitor.enabled=true")
    assert kinds(cluster, *enabled).count("ServiceMonitor") == 1
    refused = helm(
        cluster, "template", "t", str(CHART), *enabled, "--set", "metrics.port=0", check=False
    )
    assert refused.returncode != 0
    assert "metrics.serviceMonitor.enabled needs metrics.port" in refused.stderr


def test_the_metrics_port_is_on_the_pod_and_the_service(cluster: Cluster) -> None:
    rendered = objects_of(helm(cluster, "template", "t", str(CHART)).stdout)
    service = next(doc for doc in rendered if doc["kind"] == "Service")
    assert {"name": "metrics", "port": 9090, "targetPort": "metrics"} in service["spec"]["ports"]
    pod = next(doc for doc in rendered if doc["kind"] == "Deployment")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 9090} in container["ports"]


def test_one_replica_has_no_lease_rules_no_budget_and_never_runs_two_at_once(
    cluster: Cluster,
) -> None:
    found = kinds(cluster)
    assert "PodDisruptionBudget" not in found
    rendered = objects_of(helm(cluster, "template", "t", str(CHART)).stdout)
    assert not any(
        "leases" in rule["resources"]
        for doc in rendered
        if doc["kind"] in ("Role", "ClusterRole")
        for rule in doc["rules"]
    )
    operator = next(doc for doc in rendered if doc["kind"] == "Deployment")
    assert operator["spec"]["strategy"] == {"type": "Recreate"}


def test_two_replicas_get_a_budget_the_lease_rules_and_a_rolling_update(cluster: Cluster) -> None:
    rendered = objects_of(
        helm(cluster, "template", "t", str(CHART), "-n", "ops", "--set", "replicaCount=2").stdout
    )
    [budget] = [doc for doc in rendered if doc["kind"] == "PodDisruptionBudget"]
    assert budget["spec"]["minAvailable"] == 1
    [role] = [
        doc
        for doc in rendered
        if doc["kind"] == "Role" and doc["metadata"]["name"] == "t-restarter-lease"
    ]
    assert role["metadata"]["namespace"] == "ops"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["t-restarter"],
            "verbs": ["get", "update"],
        },
    ]
    operator = next(doc for doc in rendered if doc["kind"] == "Deployment")
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


# --- two replicas ----------------------------------------------------------------------------


def kill(instance: Operator) -> None:
    assert instance.process is not None
    instance.process.send_signal(signal.SIGKILL)
    instance.process.wait(10)
    instance.process = None


def test_two_replicas_one_acts_and_the_other_takes_over_after_a_sigkill(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    release: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    install(cluster, release, "--set", "replicaCount=2", "--set", "logFormat=plain")
    first, _ = run_as_chart(cluster, release, tmp_path, "restarter-a", ready="acting as")
    second, port = run_as_chart(cluster, release, tmp_path, "restarter-b", ready="standby as")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            assert answer.status == 200  # the standby passes its liveness probe
        # A paused Deployment stays pending in its open window: the active replica stamps it.
        core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
        body = deployment("web", env=[env_from_secret("db")], paused=True)
        apps.create_namespaced_deployment(namespace, body)
        baseline(core, namespace, "db")
        change_data(core, namespace, "db", "b")
        wait_for(lambda: events(core, namespace, "web", "RestartDeferred"), 30, message="deferred")
        assert "data changed" in first.log()
        assert "Initial authentication" not in second.log()  # kopf never started there
        assert "data changed" not in second.log()

        killed = time.monotonic()
        kill(first)
        apps.patch_namespaced_deployment("web", namespace, {"spec": {"paused": False}})
        wait_for(lambda: "acting as restarter-b" in second.log(), 60, message="take-over")
        took_over = time.monotonic() - killed
        wait_for(lambda: events(core, namespace, "web", "Restarted"), 30, message="restart by b")
        restarted = time.monotonic() - killed
        print(f"\ntake-over {took_over:.1f}s after SIGKILL; restart {restarted:.1f}s after it")
        template = apps.read_namespaced_deployment("web", namespace).spec.template.metadata
        assert keys.KUBECTL_RESTARTED_AT in (template.annotations or {})
        assert len(events(core, namespace, "web", "Restarted")) == 1
        assert "Forbidden" not in second.log() and " 403 " not in second.log()
    finally:
        second.stop()
        coordination = kubernetes.client.CoordinationV1Api(core.api_client)
        coordination.delete_namespaced_lease(f"{release}-restarter", "restarter-system")


# --- metrics ---------------------------------------------------------------------------------


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_counters_move_by_exactly_what_a_change_and_its_restarts_did(
    core: Core, apps: Apps, namespace: str, operator: Callable[..., Operator]
) -> None:
    metrics_port = free_port()
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    core.create_namespaced_secret(namespace, secret("far", {"password": "a"}, window_hours_away()))
    core.create_namespaced_secret(namespace, secret("bad", {"password": "a"}, "25.00"))
    for name, source in (("web", "db"), ("api", "db"), ("batch", "far")):
        body = deployment(name, env=[env_from_secret(source)], replicas=0)
        apps.create_namespaced_deployment(namespace, body)
    operator("--metrics-port", str(metrics_port))
    baseline(core, namespace, "db")
    baseline(core, namespace, "far")
    before = scrape(metrics_port)

    change_data(core, namespace, "db", "b")
    change_data(core, namespace, "far", "b")
    wait_for(lambda: len(events(core, namespace, "api", "Restarted")) == 1, 30, message="api")
    wait_for(lambda: len(events(core, namespace, "web", "Restarted")) == 1, 30, message="web")
    wait_for(lambda: events(core, namespace, "batch", "RestartScheduled"), 30, message="batch")

    def moved() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        after = scrape(metrics_port)
        return {key: value - before.get(key, 0.0) for key, value in after.items()}

    deployment_kind = (("kind", "Deployment"),)
    expected = {
        ("restarter_changes_detected_total", (("kind", "Secret"),)): 2.0,
        ("restarter_workloads_stamped_total", deployment_kind): 3.0,
        ("restarter_restarts_total", (("kind", "Deployment"), ("result", "restarted"))): 2.0,
        ("restarter_restarts_total", (("kind", "Deployment"), ("result", "skipped"))): 0.0,
        ("restarter_restarts_total", (("kind", "Deployment"), ("result", "failed"))): 0.0,
        ("restarter_change_to_restart_seconds_count", ()): 2.0,
    }
    wait_for(lambda: all(moved().get(k) == v for k, v in expected.items()), 15, message="counts")
    after = scrape(metrics_port)
    assert after[("restarter_pending_workloads", deployment_kind)] == 1.0  # batch waits
    assert after[("restarter_restarts_in_flight", ())] >= 0
    assert after[("restarter_leader", ())] == 1.0
    assert after[("restarter_invalid_windows_total", (("kind", "Secret"),))] == 1.0  # "bad"
    assert not any(name.startswith("restarter_api_errors") and v for (name, _), v in after.items())
