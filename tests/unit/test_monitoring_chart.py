"""The chart's PrometheusRule and Grafana dashboard ConfigMap as rendered: off by default,
labelled as kube-prometheus expects when on."""

from __future__ import annotations

import pytest

from tests.chart_monitoring import ENABLED, dashboard, dashboard_queries, refused, render


def kinds(*values: str) -> list[tuple[str, str]]:
    return [(doc["kind"], doc["metadata"]["name"]) for doc in render(*values)]


def test_neither_is_rendered_by_default() -> None:
    found = kinds()
    assert not [kind for kind, _ in found if kind == "PrometheusRule"]
    assert ("ConfigMap", "restarter-dashboard") not in found


def test_the_rule_carries_the_labels_a_prometheus_selects_it_by() -> None:
    [rule] = [
        doc
        for doc in render(*ENABLED, "--set", "metrics.prometheusRule.labels.release=prometheus")
        if doc["kind"] == "PrometheusRule"
    ]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "ops"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["metadata"]["labels"]["app.kubernetes.io/instance"] == "restarter"


def test_the_dashboard_is_a_configmap_the_grafana_sidecar_loads() -> None:
    [config_map] = [
        doc
        for doc in render(
            *ENABLED,
            "--set",
            "metrics.grafanaDashboard.namespace=monitoring",
            "--set",
            "metrics.grafanaDashboard.annotations.grafana_folder=Platform",
        )
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "restarter-dashboard"
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Platform"}
    board = dashboard()
    assert board["uid"] == "restarter-operator"
    titles = {panel["title"] for panel in board["panels"]}
    assert {"Pending workloads by kind", "Restarts by result", "API errors", "Memory"} <= titles
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    assert all('job=~"$job", namespace=~"$namespace"' in q for q in dashboard_queries(board))


@pytest.mark.parametrize("part", ["prometheusRule", "grafanaDashboard"])
def test_each_needs_the_metrics_port(part: str) -> None:
    message = refused("--set", f"metrics.{part}.enabled=true", "--set", "metrics.port=0")
    assert f"metrics.{part}.enabled needs metrics.port" in message


def test_a_misspelt_key_is_refused() -> None:
    assert "enable" in refused("--set", "metrics.prometheusRule.enable=true")
