"""The chart as `helm template` renders it with no cluster (or refuses to), its
PrometheusRule and Grafana dashboard, the metric names their PromQL reads, and promtool,
built by hack/build-cluster-binaries.sh."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from restarter_cluster import binaries

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "restarter"
#: The release the unit tests render; its series carry the ServiceMonitor's labels.
RELEASE, NAMESPACE = "restarter", "ops"
SELECTOR_LABELS = {"job": RELEASE, "namespace": NAMESPACE}
ENABLED = (
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.grafanaDashboard.enabled=true",
)
#: Series names restarter's process exports (its own and prometheus_client's process
#: collector), as opposed to PromQL's functions, keywords and Prometheus's own ``up``.
EXPORTED_NAME = re.compile(r"\b(?:restarter|process)_[a-z0-9_]+\b")


def promtool() -> Path:
    """The pinned promtool, or MissingBinaries naming the script that builds it."""
    return binaries.component("promtool", "PROMETHEUS_VERSION")


def render(
    *values: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    kubeconfig: Path | None = None,
) -> list[dict[str, Any]]:
    """The chart's objects as `helm template` renders them, hooks included (no cluster
    needed; ``kubeconfig`` lets helm ask a cluster's version)."""
    helm = [str(binaries.locate()["helm"])]
    if kubeconfig is not None:
        helm.append(f"--kubeconfig={kubeconfig}")
    out = subprocess.run(
        [*helm, "template", release, str(CHART), "-n", namespace, *values],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def refused(*values: str) -> str:
    """What helm says when it refuses to render the chart with these values."""
    out = subprocess.run(
        [str(binaries.locate()["helm"]), "template", "t", str(CHART), *values],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0, out.stdout
    return out.stderr


def rule_groups(*values: str) -> dict[str, Any]:
    """The rendered PrometheusRule's spec: a Prometheus rule file."""
    [rule] = [doc for doc in render(*ENABLED, *values) if doc["kind"] == "PrometheusRule"]
    return dict(rule["spec"])


def alerts(groups: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in groups["groups"] for rule in group["rules"]}


def dashboard(*values: str) -> dict[str, Any]:
    """The dashboard the rendered ConfigMap carries."""
    [config_map] = [
        doc
        for doc in render(*ENABLED, *values)
        if doc["kind"] == "ConfigMap" and "restarter.json" in doc.get("data", {})
    ]
    return dict(json.loads(config_map["data"]["restarter.json"]))


def dashboard_queries(board: dict[str, Any]) -> list[str]:
    return [
        target["expr"]
        for panel in board["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def used_metric_names() -> set[str]:
    """Every restarter or process series name the alerts and the dashboard query."""
    expressions = [rule["expr"] for rule in alerts(rule_groups()).values()]
    expressions += dashboard_queries(dashboard())
    return {name for expr in expressions for name in EXPORTED_NAME.findall(expr)}
