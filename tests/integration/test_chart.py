"""The Helm chart on the real control plane, and the operator running as its ServiceAccount."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from restarter import keys
from restarter_cluster import binaries
from restarter_cluster.cluster import Cluster
from tests.conftest import REPO, Operator, wait_for
from tests.integration.factories import (
    deployment,
    encoded,
    env_from_secret,
    secret,
    window_open_now,
)

CHART = REPO / "charts" / "restarter"
Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


def helm(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binaries.locate()["helm"]), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=180,
    )


def objects_of(manifest: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def release_objects(cluster: Cluster, release: str) -> list[str]:
    """Every object of ours that carries the release's instance label, in any namespace."""
    kinds = (
        "deployments,serviceaccounts,services,roles,rolebindings,clusterroles,clusterrolebindings"
    )
    out = cluster.kubectl(
        "get", kinds, "-A", "-l", f"app.kubernetes.io/instance={release}", "-o", "name"
    )
    return out.stdout.split()


def create_namespace(core: Core, name: str) -> None:
    core.create_namespace({"metadata": {"name": name}})


def install(cluster: Cluster, release: str, *options: str) -> None:
    helm(
        cluster,
        "install",
        release,
        str(CHART),
        "-n",
        "restarter-system",
        "--create-namespace",
        *options,
    )


@pytest.fixture
def release(cluster: Cluster) -> Iterator[str]:
    name = f"r-{uuid.uuid4().hex[:6]}"
    yield name
    helm(cluster, "uninstall", name, "-n", "restarter-system", check=False)


def test_helm_lint_passes() -> None:
    out = subprocess.run(
        [str(binaries.locate()["helm"]), "lint", str(CHART), "--strict"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_rendered_chart_is_accepted_by_the_apiserver(
    mode: str, cluster: Cluster, core: Core, namespace: str
) -> None:
    values = ["--set", f"namespaces={{{namespace}}}"] if mode == "namespaced" else []
    rendered = helm(cluster, "template", "dry", str(CHART), "-n", namespace, *values).stdout
    kinds = sorted({doc["kind"] for doc in objects_of(rendered)})
    expected = {
        "cluster": ["ClusterRole", "ClusterRoleBinding"],
        "namespaced": ["Role", "RoleBinding"],
    }
    assert set(expected[mode]) <= set(kinds)
    applied = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert applied.returncode == 0, applied.stderr


@pytest.mark.parametrize(
    "bad",
    ["timezone=Mars/Base", "timzone=UTC", "windowLength=2h30", "logLevel=LOUD", "image.tagg=1"],
)
def test_schema_refuses_invalid_values(bad: str, cluster: Cluster) -> None:
    out = helm(cluster, "template", "bad", str(CHART), "--set", bad, check=False)
    assert out.returncode != 0
    assert "schema" in out.stderr


def test_install_creates_every_object_and_uninstall_leaves_none(
    cluster: Cluster, release: str
) -> None:
    install(cluster, release, "--wait", "--timeout", "90s")
    found = release_objects(cluster, release)
    for kind in (
        "deployment.apps",
        "serviceaccount",
        "service",
        "clusterrole.rbac",
        "clusterrolebinding.rbac",
    ):
        assert any(item.startswith(kind) for item in found), (kind, found)
    helm(cluster, "uninstall", release, "-n", "restarter-system", "--wait")
    assert release_objects(cluster, release) == []


def _token_kubeconfig(cluster: Cluster, release: str, path: Path) -> Path:
    """A kubeconfig holding only a TokenRequest token of the chart's ServiceAccount."""
    sa = f"{release}-restarter"
    token = cluster.kubectl(
        "-n", "restarter-system", "create", "token", sa, "--duration=1h"
    ).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sa",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": cluster.server,
                    "certificate-authority": str(cluster.pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _chart_container(cluster: Cluster, release: str) -> dict[str, Any]:
    manifest = helm(cluster, "get", "manifest", release, "-n", "restarter-system").stdout
    operator = next(doc for doc in objects_of(manifest) if doc["kind"] == "Deployment")
    return dict(operator["spec"]["template"]["spec"]["containers"][0])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_as_chart(cluster: Cluster, release: str, tmp_path: Path) -> tuple[Operator, int]:
    """The chart's command, args and env, run here with the ServiceAccount's token."""
    container = _chart_container(cluster, release)
    env = {item["name"]: item["value"] for item in container["env"]}
    env["RESTARTER_TIMER_INTERVAL"] = "1"
    port = _free_port()
    args = [*container["args"], "--liveness", f"http://127.0.0.1:{port}/healthz"]
    kubeconfig = _token_kubeconfig(cluster, release, tmp_path / "sa-kubeconfig")
    return Operator(cluster, tmp_path / "operator.log", args, env, kubeconfig).start(), port


def _stamped_and_restarted(core: Core, apps: Apps, namespace: str) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    wait_for(
        lambda: (core.read_namespaced_secret("db", namespace).metadata.annotations or {}).get(
            keys.CHECKSUM
        ),
        30,
        message="baseline checksum",
    )
    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "b"})})
    wait_for(
        lambda: (
            len(apps.list_namespaced_replica_set(namespace, label_selector="app=web").items) == 2
        ),
        30,
        message="restart as the SA",
    )
    found = core.list_namespaced_event(namespace, field_selector="involvedObject.name=web")
    assert any(event.reason == "Restarted" for event in found.items)


def test_operator_as_chart_serviceaccount_in_cluster_mode(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, release: str, tmp_path: Path
) -> None:
    install(cluster, release, "--set", "logFormat=plain")
    operator, port = run_as_chart(cluster, release, tmp_path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
        _stamped_and_restarted(core, apps, namespace)
        assert "Forbidden" not in operator.log() and "403" not in operator.log()
    finally:
        operator.stop()
    helm(cluster, "uninstall", release, "-n", "restarter-system", "--wait")
    assert release_objects(cluster, release) == []
    kept = [
        d.metadata.name
        for d in apps.list_deployment_for_all_namespaces().items
        if keys.FINALIZER in (d.metadata.finalizers or [])
    ]
    assert kept == []


def test_operator_as_chart_serviceaccount_in_namespaced_mode_ignores_other_namespaces(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, release: str, tmp_path: Path
) -> None:
    outside = f"outside-{uuid.uuid4().hex[:5]}"
    create_namespace(core, outside)
    wait_for(
        lambda: core.list_namespaced_service_account(outside).items,
        30,
        message="default ServiceAccount",
    )
    core.create_namespaced_secret(outside, secret("db", {"password": "a"}, window_open_now()))
    apps.create_namespaced_deployment(outside, deployment("web", env=[env_from_secret("db")]))
    install(cluster, release, "--set", f"namespaces={{{namespace}}}", "--set", "logFormat=plain")
    sa = f"system:serviceaccount:restarter-system:{release}-restarter"
    can = cluster.kubectl(
        "auth", "can-i", "list", "secrets", "-n", outside, f"--as={sa}", check=False
    )
    assert can.stdout.strip() == "no"
    operator, _ = run_as_chart(cluster, release, tmp_path)
    try:
        _stamped_and_restarted(core, apps, namespace)
        core.patch_namespaced_secret("db", outside, {"data": encoded({"password": "b"})})
        time.sleep(4)  # four timer intervals: time to act, if it (wrongly) could
        untouched = core.read_namespaced_secret("db", outside).metadata.annotations or {}
        assert keys.CHECKSUM not in untouched
        assert len(apps.list_namespaced_replica_set(outside).items) == 1
        assert not [
            k
            for k in apps.read_namespaced_deployment("web", outside).metadata.annotations or {}
            if k.startswith(keys.PENDING_RESTART)
        ]
        assert "Forbidden" not in operator.log()
    finally:
        operator.stop()
        core.delete_namespace(outside)


def _dockerfile_instruction(name: str) -> list[str]:
    lines = (REPO / "Dockerfile").read_text().splitlines()
    values = [json.loads(line.split(None, 1)[1]) for line in lines if line.startswith(name + " ")]
    assert len(values) == 1, name
    return list(values[0])


def test_chart_runs_the_image_command_that_the_tests_run(cluster: Cluster) -> None:
    container = _chart_container_of_template(cluster)
    assert "command" not in container  # the image's ENTRYPOINT runs
    assert _dockerfile_instruction("ENTRYPOINT") == ["restarter"]
    assert _dockerfile_instruction("CMD") == container["args"]
    user = [
        line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("USER ")
    ]
    assert user == ["USER 10001:10001"]  # the chart's runAsUser


def _chart_container_of_template(cluster: Cluster) -> dict[str, Any]:
    rendered = helm(cluster, "template", "image", str(CHART)).stdout
    operator = next(doc for doc in objects_of(rendered) if doc["kind"] == "Deployment")
    return dict(operator["spec"]["template"]["spec"]["containers"][0])
