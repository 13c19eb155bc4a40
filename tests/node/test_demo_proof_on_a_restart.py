"""The demo's proof step (hack/demo_proof.py, as hack/demo.sh runs it) on real pods: it fails
when the new ReplicaSet's pod printed the old value, and passes after restarter's restart
although the old pod, slow to stop, still runs beside the new one."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.integration.factories import secret
from tests.integration.test_operator_restarts import baseline, change_data
from tests.node.conftest import Release, app_deployment

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
PROOF = Path(__file__).resolve().parents[2] / "hack" / "demo_proof.py"
NEW_VALUE = "env=second file=second"


def proof(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The proof step, run as the demo runs it: a separate process on the cluster's dir."""
    return subprocess.run(
        [sys.executable, str(PROOF), "--cluster-dir", str(cluster.directory), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def template_hash(cluster: Cluster, namespace: str) -> str:
    done = proof(cluster, "template-hash", namespace, "app")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_proof_fails_on_a_new_pod_with_the_old_value_and_passes_after_the_restart(
    cluster: Cluster,
    install: Callable[..., Release],
    core: Core,
    apps: Apps,
    namespace: str,
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "first"}, "now"))
    app = app_deployment("app", "db")
    # The old pod ignores SIGTERM and stays Running, being deleted, for 30 s after each
    # rollout: the first Running pod of the app is then the old one.
    container = app["spec"]["template"]["spec"]["containers"][0]
    container["command"][-1] = container["command"][-1].replace("'exit 0'", "''")
    app["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    apps.create_namespaced_deployment(namespace, app)
    install([namespace])
    baseline(core, namespace, "db")
    first = template_hash(cluster, namespace)

    # A restart that is not restarter's, with the Secret unchanged: a new ReplicaSet whose
    # pod prints the old value. The proof must fail and name that pod.
    restarted_at = dt.datetime.now(dt.UTC).isoformat()
    apps.patch_namespaced_deployment(
        "app",
        namespace,
        {
            "spec": {
                "template": {"metadata": {"annotations": {keys.KUBECTL_RESTARTED_AT: restarted_at}}}
            }
        },
    )
    stale = proof(
        cluster, "new-pod", namespace, "app", "app", "--before", first,
        "--prints", NEW_VALUE, "--not-prints", "first", "--timeout", "120",
    )  # fmt: skip
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "FAILED" in stale.stderr
    assert "the old value" in stale.stderr
    second = template_hash(cluster, namespace)
    assert second != first
    assert f"ReplicaSet {second}" in stale.stderr

    # No restart yet after that one: the proof fails for want of a new ReplicaSet.
    waiting = proof(
        cluster, "new-pod", namespace, "app", "app", "--before", second,
        "--prints", NEW_VALUE, "--timeout", "3",
    )  # fmt: skip
    assert waiting.returncode == 1
    assert "no restart" in waiting.stderr

    # restarter's restart: the proof reads the new ReplicaSet's pod and passes, while the
    # old pod, which printed "first", is still Running for up to 30 s beside it.
    change_data(core, namespace, "db", "second")
    proved = proof(
        cluster, "new-pod", namespace, "app", "app", "--before", second,
        "--prints", NEW_VALUE, "--not-prints", "first", "--timeout", "180",
    )  # fmt: skip
    assert proved.returncode == 0, proved.stderr
    third = template_hash(cluster, namespace)
    assert third not in (first, second)
    assert NEW_VALUE in proved.stdout
    assert third in proved.stdout
