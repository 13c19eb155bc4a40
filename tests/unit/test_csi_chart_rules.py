"""The chart's RBAC for SecretProviderClasses: with ``csi.enabled`` it may read the CSI
driver's two kinds (get, list, watch) and nothing more; without it, not even that."""

from __future__ import annotations

from typing import Any

from tests.chart_monitoring import render

CSI_RULE = {
    "apiGroups": ["secrets-store.csi.x-k8s.io"],
    "resources": ["secretproviderclasses", "secretproviderclasspodstatuses"],
    "verbs": ["get", "list", "watch"],
}


def operator_rules(*values: str) -> list[dict[str, Any]]:
    [role] = [
        doc
        for doc in render(*values)
        if doc["kind"] in ("ClusterRole", "Role") and doc["metadata"]["name"].endswith("restarter")
    ]
    return list(role["rules"])


def env_value(*values: str) -> str:
    [deployment] = [doc for doc in render(*values) if doc["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return str(next(e["value"] for e in container["env"] if e["name"] == "RESTARTER_CSI"))


def test_the_chart_reads_the_drivers_kinds_only_when_csi_is_on() -> None:
    rules = operator_rules("--set", "csi.enabled=true")
    assert CSI_RULE in rules
    assert [rule for rule in rules if "secrets-store.csi.x-k8s.io" in rule["apiGroups"]] == [
        CSI_RULE
    ]
    assert env_value("--set", "csi.enabled=true") == "true"


def test_csi_is_off_by_default_with_no_rule_for_the_drivers_kinds() -> None:
    rules = operator_rules()
    assert not [rule for rule in rules if "secrets-store.csi.x-k8s.io" in rule["apiGroups"]]
    assert env_value() == "false"
