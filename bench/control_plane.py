"""The local control plane with an audit log, and an API client for the harness."""

from __future__ import annotations

import tempfile
from pathlib import Path

import kubernetes
import yaml

from bench.workload import NAMESPACE
from restarter_cluster import pki
from restarter_cluster.cluster import Cluster

#: User agent of the harness's own requests, so the audit log can leave them out.
HARNESS_AGENT = "restarter-bench"


def fresh_workdir(workdir: Path | None, prefix: str) -> Path:
    """The run's directory, new or empty of any control plane: a cluster left there by an
    earlier run would start with its etcd data, and the sizes measured would be wrong."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    if (workdir / "cluster").exists():
        raise SystemExit(
            f"bench: {workdir / 'cluster'} exists (an earlier run's control plane and data); "
            "remove it or pick another --workdir"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


class AuditedCluster(Cluster):
    """A Cluster whose apiserver writes every request in the benchmark namespace to a file.

    The audit log names each request's user agent: that is how requests are attributed
    to the operator under test rather than to the controllers or the harness.
    """

    @property
    def audit_log(self) -> Path:
        return self.directory / "audit.log"

    def _apiserver_args(self, bins: dict[str, Path], certs: pki.Pki) -> list[str]:
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        {"level": "Metadata", "namespaces": [NAMESPACE]},
                        {"level": "None"},
                    ],
                }
            )
        )
        return [
            *super()._apiserver_args(bins, certs),
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            # 0 would mean lumberjack's default of 100 MB, then a rotation mid-measurement.
            "--audit-log-maxsize=100000",
            "--audit-log-format=json",
        ]

    def _kcm_args(self, bins: dict[str, Path], certs: pki.Pki) -> list[str]:
        # The default client limit (20 requests/s) makes the deployment controller take
        # minutes to catch up after thousands of rollouts; the harness waits for it
        # between runs.
        return [*super()._kcm_args(bins, certs), "--kube-api-qps=300", "--kube-api-burst=600"]


def api_client(cluster: Cluster, pool: int = 16) -> kubernetes.client.ApiClient:
    """An admin client for the harness, with a connection pool for bulk work."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(cluster.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = pool
    client = kubernetes.client.ApiClient(configuration)
    client.user_agent = HARNESS_AGENT
    return client
