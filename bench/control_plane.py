"""The local control plane with an audit log, and an API client for the harness."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import kubernetes
import yaml

from bench.workload import NAMESPACE
from restarter_cluster import pki
from restarter_cluster.cluster import STATE_FILE, Cluster, process_alive

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

    def audit_rules(self) -> list[dict[str, Any]]:
        """Every request in the benchmark namespace, nothing else."""
        return [{"level": "Metadata", "namespaces": [NAMESPACE]}, {"level": "None"}]

    def _apiserver_args(self, bins: dict[str, Path], certs: pki.Pki) -> list[str]:
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": self.audit_rules(),
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


class WideAuditedCluster(AuditedCluster):
    """Audits, in every namespace, the requests an operator makes to restart workloads: on
    Secrets, ConfigMaps, Namespaces, Events and the workload kinds (not their status, nor
    ReplicaSets, Pods or Leases: the controllers' and kwok's own traffic)."""

    def audit_rules(self) -> list[dict[str, Any]]:
        resources = [
            {"group": "", "resources": ["secrets", "configmaps", "events", "namespaces"]},
            {"group": "apps", "resources": ["deployments", "statefulsets", "daemonsets"]},
            {"group": "batch", "resources": ["jobs", "cronjobs"]},
            {"group": "argoproj.io", "resources": ["rollouts"]},
            {"group": "events.k8s.io", "resources": ["events"]},
        ]
        return [{"level": "Metadata", "resources": resources}, {"level": "None"}]


def reusable_cluster(workdir: Path | None, prefix: str) -> tuple[Path, WideAuditedCluster, bool]:
    """The run's directory and its control plane, and whether that is already running.

    A control plane an earlier run left running there (``--keep-cluster``) is attached
    to, with all it holds; otherwise the directory must hold none (``fresh_workdir``)."""
    if workdir is not None and (workdir / "cluster" / STATE_FILE).exists():
        cluster = cast(WideAuditedCluster, WideAuditedCluster.attach(workdir / "cluster"))
        if cluster.pids and all(process_alive(pid) for pid in cluster.pids.values()):
            return workdir, cluster, True
    workdir = fresh_workdir(workdir, prefix)
    return workdir, WideAuditedCluster(directory=workdir / "cluster", nodes=2), False


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


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> None:
    """Poll ``check`` until it is true; a RuntimeError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
