"""The chart's values for holds, certificate deadlines, gates and notifications, as helm
renders and the API server accepts them (server-side dry run)."""

from __future__ import annotations

from typing import Any

from restarter_cluster.cluster import Cluster
from tests.integration.test_chart import CHART, helm, objects_of


def rendered(cluster: Cluster, *values: str) -> list[dict[str, Any]]:
    return objects_of(helm(cluster, "template", "r", str(CHART), *values).stdout)


def env_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def rules_of(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [
        rule
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name
        for rule in o["rules"]
    ]


def test_the_defaults_hold_nothing_gate_nothing_and_notify_nobody(cluster: Cluster) -> None:
    objects = rendered(cluster)
    env = env_of(objects)
    assert env["RESTARTER_HOLD"] == ""
    assert env["RESTARTER_CERTIFICATE_MARGIN"] == "1h"
    assert (
        env["RESTARTER_GATE_ALERTMANAGER_URL"] == "" and env["RESTARTER_GATE_BLOCKING_PODS"] == ""
    )
    assert "RESTARTER_NOTIFY_URLS" not in env
    assert (env["RESTARTER_FIRST_WAVE"], env["RESTARTER_SOAK"]) == ("1", "60s")
    assert (env["RESTARTER_QUIET"], env["RESTARTER_HALT_EXPIRY"]) == ("10s", "0")
    rules = rules_of(objects, "ClusterRole", "r-restarter")
    # Namespaces watched for their holds: a due restart reads none.
    namespaces = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}
    assert namespaces in rules
    # The circuit breaker reads a first wave's pods (waves are on by default).
    pods = [rule for rule in rules if "pods" in rule["resources"]]
    assert pods == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]


def test_without_waves_or_a_pod_gate_no_pod_is_read(cluster: Cluster) -> None:
    objects = rendered(cluster, "--set", "waves.firstWave=0")
    assert env_of(objects)["RESTARTER_FIRST_WAVE"] == "0"
    rules = rules_of(objects, "ClusterRole", "r-restarter")
    assert not [rule for rule in rules if "pods" in rule["resources"]]


def test_a_wave_setting_the_operator_cannot_read_fails_the_install(cluster: Cluster) -> None:
    refused = helm(cluster, "template", "r", str(CHART), "--set", "waves.soak=soon", check=False)
    assert refused.returncode != 0
    assert "waves.soak" in refused.stderr or "soak" in refused.stderr


def test_the_values_reach_the_operator_and_the_urls_come_from_a_secret(cluster: Cluster) -> None:
    objects = rendered(
        cluster,
        "--set", "hold=release day",
        "--set", "certificateMargin=6h",
        "--set", "gates.alertmanagerUrl=http://am.monitoring:9093",
        "--set", "gates.blockingPodSelector=app",
        "--set", "gates.failOpen=true",
        "--set", "notifications.urlsSecret.name=notify",
    )  # fmt: skip
    env = env_of(objects)
    assert env["RESTARTER_HOLD"] == "release day"
    assert env["RESTARTER_CERTIFICATE_MARGIN"] == "6h"
    assert env["RESTARTER_GATE_ALERTMANAGER_URL"] == "http://am.monitoring:9093"
    assert env["RESTARTER_GATE_FAIL_OPEN"] == "true"
    assert env["RESTARTER_NOTIFY_URLS"] == {"secretKeyRef": {"name": "notify", "key": "urls"}}
    rules = rules_of(objects, "ClusterRole", "r-restarter")
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]} in rules


def test_namespaced_mode_reads_only_its_own_namespaces(cluster: Cluster) -> None:
    objects = rendered(cluster, "--set", "namespaces={shop,billing}")
    assert rules_of(objects, "ClusterRole", "r-restarter-namespaces") == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["shop", "billing"],
            "verbs": ["get"],
        }
    ]
    applied = helm(cluster, "template", "r", str(CHART), "--set", "namespaces={shop}").stdout
    check = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=applied, check=False)
    assert "r-restarter-namespaces" in check.stdout, check.stderr


def test_the_schema_refuses_a_margin_or_url_it_cannot_read(cluster: Cluster) -> None:
    for bad in ("certificateMargin=soon", "gates.alertmanagerUrl=am:9093", "gates.unknown=1"):
        out = helm(cluster, "template", "bad", str(CHART), "--set", bad, check=False)
        assert out.returncode != 0 and "schema" in out.stderr, bad
