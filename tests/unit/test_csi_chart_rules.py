"""The chart's RBAC for SecretProviderClasses: with ``csi.enabled`` it may read the CSI
driver's two kinds (get, list, watch) and nothing more; without it, not even that. The
operator always knows its own Pod (downward API), which its CSINotServed Warning is about,
and may post that Event in its own namespace, also when it watches only others."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart_monitoring import NAMESPACE, render

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


def own_pod_env(*values: str) -> dict[str, str]:
    [deployment] = [doc for doc in render(*values) if doc["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
        if e["name"] in ("POD_NAME", "POD_NAMESPACE", "POD_UID")
    }


@pytest.mark.parametrize(
    "values",
    [(), ("--set", "leaderElection.enabled=true"), ("--set", "csi.enabled=true")],
    ids=["defaults", "leader-election", "csi"],
)
def test_the_operator_always_knows_its_own_pod_through_the_downward_api(
    values: tuple[str, ...],
) -> None:
    assert own_pod_env(*values) == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "POD_UID": "metadata.uid",
    }


def event_roles_in_own_namespace(*values: str) -> list[dict[str, Any]]:
    return [
        doc
        for doc in render(*values)
        if doc["kind"] in ("Role", "ClusterRole")
        and doc["metadata"].get("namespace") in (None, NAMESPACE)
        and {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]} in doc["rules"]
    ]


@pytest.mark.parametrize(
    "values",
    [
        ("--set", "csi.enabled=true"),
        ("--set", "csi.enabled=true", "--set", "namespaces={shop}"),
        ("--set", "csi.enabled=true", "--set", f"namespaces={{shop,{NAMESPACE}}}"),
    ],
    ids=["cluster-mode", "namespaced", "namespaced-with-own"],
)
def test_the_operator_may_post_events_in_its_own_namespace_with_csi(
    values: tuple[str, ...],
) -> None:
    assert len(event_roles_in_own_namespace(*values)) == 1


def test_no_extra_role_without_csi_in_namespaced_mode() -> None:
    docs = render("--set", "namespaces={shop}")
    assert not [doc for doc in docs if doc["metadata"]["name"].endswith("-own-events")]
