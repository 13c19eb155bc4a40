"""The chart's ServiceAccount for operators the tests run as local processes.

`helm template` renders the chart; its ServiceAccount, RBAC and ValidatingAdmissionPolicies
are applied as they are (the Deployment, Service and hooks left out: the operator runs
here), and a kubeconfig holds a TokenRequest token of that ServiceAccount. An operator
started with it has exactly the chart's permissions, and every write it sends passes the
chart's admission policy or is refused; ``refusals`` counts the policy's refusals, from the
apiserver's own metric.
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from restarter_cluster.cluster import Cluster
from tests import chart_monitoring

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "restarter"
#: The release namespace of every identity.
SYSTEM = "restarter-system"
#: What an operator running outside the cluster needs of a rendered chart.
IDENTITY_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
#: The apiserver's count of requests a ValidatingAdmissionPolicy refused, by policy.
DENIED = re.compile(
    r'^apiserver_validating_admission_policy_check_total\{[^}]*enforcement_action="deny"'
    r'[^}]*policy="(?P<policy>[^"]+)"[^}]*\} (?P<count>[0-9.e+]+)$',
    re.MULTILINE,
)


def render(cluster: Cluster, release: str, namespace: str, *values: str) -> list[dict[str, Any]]:
    """The chart's objects as `helm template` renders them (hooks included)."""
    return chart_monitoring.render(
        *values, release=release, namespace=namespace, kubeconfig=cluster.kubeconfig
    )


def is_hook(doc: dict[str, Any]) -> bool:
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def token_kubeconfig(
    cluster: Cluster, namespace: str, account: str, path: Path, server: str | None = None
) -> Path:
    """A kubeconfig holding only a TokenRequest token of one ServiceAccount (``server``: an
    address in front of the apiserver, such as a test's proxy)."""
    token = cluster.kubectl(
        "-n", namespace, "create", "token", account, "--duration=24h"
    ).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sa",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": server or cluster.server,
                    "certificate-authority": str(cluster.pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def apiserver_metrics(cluster: Cluster) -> str:
    """The apiserver's /metrics, read as the cluster's admin (no kubectl process: this runs
    twice in every test that starts an operator)."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=configuration
    )
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.load_cert_chain(configuration.cert_file, configuration.key_file)
    url = f"{configuration.host}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=30) as response:
        return str(response.read().decode())


def denied_counts(cluster: Cluster) -> dict[str, float]:
    """Refusals so far by ValidatingAdmissionPolicy (every binding and validation summed)."""
    metrics = apiserver_metrics(cluster)
    counts: dict[str, float] = {}
    for found in DENIED.finditer(metrics):
        counts[found["policy"]] = counts.get(found["policy"], 0.0) + float(found["count"])
    return counts


@dataclass(frozen=True)
class Identity:
    """One rendering of the chart, applied: its ServiceAccount's kubeconfig and policies."""

    release: str
    account: str
    kubeconfig: Path
    policies: tuple[str, ...]

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{SYSTEM}:{self.account}"


def apply_identity(cluster: Cluster, release: str, directory: Path, *values: str) -> Identity:
    """Apply the chart's ServiceAccount, RBAC and admission policies for ``values``."""
    docs = [
        doc
        for doc in render(cluster, release, SYSTEM, *values)
        if doc["kind"] in IDENTITY_KINDS and not is_hook(doc)
    ]
    cluster.kubectl("create", "namespace", SYSTEM, check=False)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    [account] = [doc["metadata"]["name"] for doc in docs if doc["kind"] == "ServiceAccount"]
    policies = tuple(
        doc["metadata"]["name"] for doc in docs if doc["kind"] == "ValidatingAdmissionPolicy"
    )
    kubeconfig = token_kubeconfig(cluster, SYSTEM, account, directory / f"{release}.kubeconfig")
    return Identity(release, account, kubeconfig, policies)


class ChartIdentities:
    """The session's identities, one per set of chart values, applied on first use."""

    def __init__(self, cluster: Cluster, directory: Path) -> None:
        self.cluster, self.directory = cluster, directory
        self._made: dict[tuple[str, ...], Identity] = {}

    def get(self, *values: str) -> Identity:
        if values not in self._made:
            release = f"tests-{len(self._made)}"
            self._made[values] = apply_identity(self.cluster, release, self.directory, *values)
        return self._made[values]

    def refusals(self) -> float:
        """Refusals so far by the policies of the identities applied."""
        counts = denied_counts(self.cluster)
        return sum(
            counts.get(policy, 0.0)
            for identity in self._made.values()
            for policy in identity.policies
        )
