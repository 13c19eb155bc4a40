"""The Helm chart on the real control plane, and the operator running as its ServiceAccount."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from restarter.model import keys
from restarter_cluster import binaries
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port
from tests.chart_identity import token_kubeconfig
from tests.conftest import REPO, Operator, refused, wait_for
from tests.integration.factories import (
    deployment,
    encoded,
    env_from_secret,
    secret,
    window_open_now,
)
from tests.integration.test_operator_restarts import baseline, change_data

CHART = REPO / "charts" / "restarter"
Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


def helm(
    cluster: Cluster, *args: str, check: bool = True, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """The pinned helm against the cluster; with ``check``, a failure fails the test with
    helm's output."""
    result = subprocess.run(
        [str(binaries.locate()["helm"]), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def objects_of(manifest: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def release_objects(cluster: Cluster, release: str) -> list[str]:
    """Every object of ours that carries the release's instance label, in any namespace."""
    kinds = (
        "deployments,jobs,serviceaccounts,services,roles,rolebindings,clusterroles,"
        "clusterrolebindings"
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
    # No hook Job here (a test that failed midway may have stopped anything), then the
    # hook objects a test created, found by the release's label.
    helm(cluster, "uninstall", name, "-n", "restarter-system", "--no-hooks", check=False)
    cluster.kubectl(
        "delete",
        "jobs,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings",
        "-A",
        "-l",
        f"app.kubernetes.io/instance={name}",
        "--ignore-not-found",
        check=False,
    )


def test_helm_lint_passes() -> None:
    out = subprocess.run(
        [str(binaries.locate()["helm"]), "lint", str(CHART), "--strict"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("mode", ["cluster", "namespaced", "namespaced-csi"])
def test_rendered_chart_is_accepted_by_the_apiserver(
    mode: str, cluster: Cluster, core: Core, namespace: str
) -> None:
    values = {
        "cluster": [],
        "namespaced": ["--set", f"namespaces={{{namespace}}}"],
        # Watching another namespace than its own: a Role for its own Events there.
        "namespaced-csi": ["--set", "namespaces={default}", "--set", "csi.enabled=true"],
    }[mode]
    rendered = helm(cluster, "template", "dry", str(CHART), "-n", namespace, *values).stdout
    kinds = sorted({doc["kind"] for doc in objects_of(rendered)})
    expected = {
        "cluster": ["ClusterRole", "ClusterRoleBinding"],
        "namespaced": ["Role", "RoleBinding"],
        "namespaced-csi": ["Role", "RoleBinding"],
    }
    assert set(expected[mode]) | {"Job"} <= set(kinds)  # the uninstall hook renders too
    applied = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert applied.returncode == 0, applied.stderr


@pytest.mark.parametrize(
    "bad",
    [
        "timezone=Mars/Base",
        "timzone=UTC",
        "windowLength=2h30",
        "logLevel=LOUD",
        "image.tagg=1",
        "uninstallHook.timeout=soon",
        "uninstallHook.enabld=false",
    ],
)
def test_schema_refuses_invalid_values(bad: str, cluster: Cluster) -> None:
    out = helm(cluster, "template", "bad", str(CHART), "--set", bad, check=False)
    assert out.returncode != 0
    assert "schema" in out.stderr


def test_schema_refuses_a_namespace_selector_with_a_namespace_list(cluster: Cluster) -> None:
    both = ("--set", "namespaceSelector=team=a", "--set", "namespaces={shop}")
    out = helm(cluster, "template", "bad", str(CHART), *both, check=False)
    assert out.returncode != 0
    assert "schema" in out.stderr and "/namespaces" in out.stderr
    alone = helm(cluster, "template", "ok", str(CHART), "--set", "namespaceSelector=team=a")
    rules = [
        rule
        for doc in objects_of(alone.stdout)
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "ok-restarter"
        for rule in doc["rules"]
    ]
    assert {
        "apiGroups": [""],
        "resources": ["namespaces"],
        "verbs": ["get", "list", "watch"],
    } in rules


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
    # kwok's fast stages mark the hook Job's pod Succeeded without running a container:
    # this proves Helm creates and then deletes every hook object, not what the Job does
    # (the hook tests below run its command).
    out = helm(cluster, "uninstall", release, "-n", "restarter-system", "--wait", "--debug")
    assert f"Watching for changes to Job {release}-restarter-uninstall" in out.stdout + out.stderr
    assert release_objects(cluster, release) == []


def _token_kubeconfig(cluster: Cluster, sa: str, path: Path) -> Path:
    """A kubeconfig holding only a TokenRequest token of one of the chart's ServiceAccounts."""
    return token_kubeconfig(cluster, "restarter-system", sa, path)


def _chart_container(cluster: Cluster, release: str) -> dict[str, Any]:
    manifest = helm(cluster, "get", "manifest", release, "-n", "restarter-system").stdout
    operator = next(doc for doc in objects_of(manifest) if doc["kind"] == "Deployment")
    return dict(operator["spec"]["template"]["spec"]["containers"][0])


def _chart_env(container: dict[str, Any], pod: str) -> dict[str, str]:
    """The container's env as the kubelet sets it for pod ``pod`` in restarter-system."""
    fields = {"metadata.name": pod, "metadata.namespace": "restarter-system", "metadata.uid": ""}
    return {
        item["name"]: item["value"]
        if "value" in item
        else fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        for item in container["env"]
    }


def run_as_chart(
    cluster: Cluster,
    release: str,
    tmp_path: Path,
    pod: str = "restarter-0",
    ready: str = "Initial authentication has finished",
) -> tuple[Operator, int]:
    """The chart's command, args and env, run here with the ServiceAccount's token; its
    own liveness and metrics ports, so that replicas can run side by side."""
    container = _chart_container(cluster, release)
    env = _chart_env(container, pod)
    env["RESTARTER_TIMER_INTERVAL"] = "1"
    env["RESTARTER_METRICS_PORT"] = str(free_port())
    port = free_port()
    args = [*container["args"], "--liveness", f"http://127.0.0.1:{port}/healthz"]
    kubeconfig = _token_kubeconfig(cluster, f"{release}-restarter", tmp_path / "sa-kubeconfig")
    log = tmp_path / f"{pod}.log"
    return Operator(cluster, log, args, env, kubeconfig).start(ready), port


def _stamped_and_restarted(core: Core, apps: Apps, namespace: str, operator: Operator) -> None:
    """A change of a Secret in an open window restarts its Deployment. A timeout shows the
    Deployment's annotations and the operator's last log lines: what it did, or did not."""

    def state() -> str:
        found = apps.read_namespaced_deployment("web", namespace).metadata.annotations or {}
        marks = {k: v for k, v in found.items() if k.startswith(keys.PREFIX)}
        tail = "\n".join(operator.log().splitlines()[-40:])
        return f"annotations {marks}; operator log:\n{tail}"

    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(
        lambda: (
            len(apps.list_namespaced_replica_set(namespace, label_selector="app=web").items) == 2
        ),
        60,
        message="restart as the SA",
        describe=state,
    )

    # kopf posts the Event from its own queue, after the restart's patch: it may come
    # a little after the ReplicaSet.
    def restarted_event() -> bool:
        found = core.list_namespaced_event(namespace, field_selector="involvedObject.name=web")
        return any(event.reason == "Restarted" for event in found.items)

    wait_for(restarted_event, 30, message="the Restarted Event")


def test_operator_as_chart_serviceaccount_in_cluster_mode(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, release: str, tmp_path: Path
) -> None:
    install(cluster, release, "--set", "logFormat=plain")
    operator, port = run_as_chart(cluster, release, tmp_path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
        _stamped_and_restarted(core, apps, namespace, operator)
        assert not refused(operator.log())
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


def test_operator_as_chart_serviceaccount_with_a_namespace_selector(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, release: str, tmp_path: Path
) -> None:
    selected = uuid.uuid4().hex[:8]
    core.patch_namespace(namespace, {"metadata": {"labels": {"selector-test": selected}}})
    install(
        cluster,
        release,
        "--set",
        f"namespaceSelector=selector-test={selected}",
        "--set",
        "logFormat=plain",
    )
    operator, _ = run_as_chart(cluster, release, tmp_path)
    try:
        _stamped_and_restarted(core, apps, namespace, operator)
        assert f"namespace {namespace} matches" in operator.log()
        assert not refused(operator.log())
    finally:
        operator.stop()


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
        _stamped_and_restarted(core, apps, namespace, operator)
        core.patch_namespaced_secret("db", outside, {"data": encoded({"password": "b"})})
        time.sleep(4)  # four timer intervals: time to act, if it (wrongly) could
        untouched = core.read_namespaced_secret("db", outside).metadata.annotations or {}
        assert keys.CHECKSUM not in untouched
        assert len(apps.list_namespaced_replica_set(outside).items) == 1
        assert not [
            k
            for k in apps.read_namespaced_deployment("web", outside).metadata.annotations or {}
            if k.startswith(keys.PENDING_MARK)
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


# --- The pre-delete hook (restarter release-finalizers) ---------------------------------
#
# kwok runs no containers, so the hook Job's command cannot run inside the cluster. The
# tests below render the hook with `helm template`, create its ServiceAccount and RBAC as
# Helm would (they come first, by weight), and run the Job's exact arguments here as a
# process holding a TokenRequest token of the hook's ServiceAccount: RBAC is enforced.

HOOK_RBAC = "templates/uninstall-hook-rbac.yaml"
HOOK_JOB = "templates/uninstall-hook-job.yaml"
SYSTEM = "restarter-system"
KEEP = "test.restarter.io/keep"


def _rendered_hook(cluster: Cluster, release: str, template: str, *values: str) -> str:
    return helm(
        cluster, "template", release, str(CHART), "-n", SYSTEM, "--show-only", template, *values
    ).stdout


def _create_hook_rbac(cluster: Cluster, release: str, *values: str) -> str:
    """The hook objects Helm creates before the Job (lower weights); returns the manifest."""
    rendered = _rendered_hook(cluster, release, HOOK_RBAC, *values)
    cluster.kubectl("apply", "-f", "-", input=rendered)
    return rendered


def _delete_hook_rbac(cluster: Cluster, rendered: str) -> None:
    """What Helm's hook-succeeded delete policy does after the Job."""
    cluster.kubectl("delete", "--ignore-not-found", "--wait", "-f", "-", input=rendered)


def _start_hook_command(
    cluster: Cluster, release: str, tmp_path: Path, *values: str, extra: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """The hook Job's arguments, run by the image's entry point, as the hook's ServiceAccount."""
    job = objects_of(_rendered_hook(cluster, release, HOOK_JOB, *values))[0]
    pod_spec = job["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    assert "command" not in container  # the image's ENTRYPOINT, `restarter`, runs
    kubeconfig = _token_kubeconfig(
        cluster, pod_spec["serviceAccountName"], tmp_path / "hook-kubeconfig"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "restarter", *container["args"], *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        cwd=REPO,
    )


def _run_hook_command(
    cluster: Cluster, release: str, tmp_path: Path, *values: str, extra: tuple[str, ...] = ()
) -> tuple[int, str]:
    process = _start_hook_command(cluster, release, tmp_path, *values, extra=extra)
    out, _ = process.communicate(timeout=120)
    return process.returncode, out


def _operator_pods(core: Core, release: str) -> list[Any]:
    selector = f"app.kubernetes.io/name=restarter,app.kubernetes.io/instance={release}"
    return list(core.list_namespaced_pod(SYSTEM, label_selector=selector).items)


@pytest.fixture
def held_node(core: Core) -> Iterator[str]:
    """A Node no kubelet (nor kwok) serves: a pod bound to it stays terminating until the
    test, playing the kubelet, removes it. kwok would remove a terminating pod at once,
    before the operator process standing in for its container has stopped."""
    name = f"held-{uuid.uuid4().hex[:5]}"
    core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    room = {"cpu": "4", "memory": "8Gi", "pods": "10"}
    core.patch_node_status(name, {"status": {"capacity": room, "allocatable": room}})
    yield name
    core.delete_node(name)


def _finalizers(apps: Apps, namespace: str, name: str) -> list[str]:
    return list(apps.read_namespaced_deployment(name, namespace).metadata.finalizers or [])


def _gone(read: Any, *args: str) -> bool:
    try:
        read(*args)
    except kubernetes.client.exceptions.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def test_uninstall_hook_is_a_pre_delete_job_after_its_own_rbac(cluster: Cluster) -> None:
    docs = objects_of(helm(cluster, "template", "hooked", str(CHART), "-n", SYSTEM).stdout)
    hooks = [
        doc
        for doc in docs
        if (doc["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"
    ]
    kinds = sorted(doc["kind"] for doc in hooks)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Job",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    for doc in hooks:
        policy = doc["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded"
    weight = {
        doc["kind"]: int(doc["metadata"]["annotations"]["helm.sh/hook-weight"]) for doc in hooks
    }
    assert max(w for kind, w in weight.items() if kind != "Job") < weight["Job"]
    job = next(doc for doc in hooks if doc["kind"] == "Job")
    operator = next(doc for doc in docs if doc["kind"] == "Deployment")
    job_pod, operator_pod = job["spec"]["template"], operator["spec"]["template"]
    # The hook waits for the operator's pods to be gone: it must not be one of them.
    selector = operator["spec"]["selector"]["matchLabels"].items()
    assert not selector <= job_pod["metadata"]["labels"].items()
    assert job_pod["spec"]["securityContext"] == operator_pod["spec"]["securityContext"]
    container = job_pod["spec"]["containers"][0]
    assert container["securityContext"] == operator_pod["spec"]["containers"][0]["securityContext"]
    assert container["image"] == operator_pod["spec"]["containers"][0]["image"]
    assert container["args"] == [
        "release-finalizers",
        f"--operator-namespace={SYSTEM}",
        f"--operator-deployment={operator['metadata']['name']}",
        "--timeout=60s",
    ]
    disabled = helm(
        cluster, "template", "plain", str(CHART), "--set", "uninstallHook.enabled=false"
    ).stdout
    assert "helm.sh/hook: pre-delete" not in disabled


def _install_on_held_node(cluster: Cluster, core: Core, release: str, node: str) -> Any:
    """Install the chart with the operator's pod bound to ``node``; return that pod."""
    install(
        cluster,
        release,
        "--set",
        "logFormat=plain",
        "--set",
        f"nodeSelector.kubernetes\\.io/hostname={node}",
        "--set-json",
        'tolerations=[{"operator": "Exists"}]',  # the held Node is never Ready
    )
    return wait_for(
        lambda: [p for p in _operator_pods(core, release) if p.spec.node_name == node],
        60,
        message="the operator's pod bound to the held Node",
    )[0]


def test_uninstall_hook_releases_nothing_while_the_operator_pod_remains(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    release: str,
    held_node: str,
    tmp_path: Path,
) -> None:
    pod = _install_on_held_node(cluster, core, release, held_node).metadata.name
    # No marks: an operator of another test, watching every namespace, must not adopt it.
    unmarked = _workload("Deployment", "web", [keys.FINALIZER], marked=False)
    apps.create_namespaced_deployment(namespace, unmarked)
    rbac = _create_hook_rbac(cluster, release)
    try:
        code, out = _run_hook_command(cluster, release, tmp_path, extra=("--timeout=3s",))
        assert code == 1, out
        assert f"operator pods still present after 3s: {pod}; released nothing" in out
        assert _finalizers(apps, namespace, "web") == [keys.FINALIZER]
    finally:
        apps.patch_namespaced_deployment("web", namespace, {"metadata": {"finalizers": None}})
        apps.delete_namespaced_deployment("web", namespace)
        core.delete_namespaced_pod(pod, SYSTEM, grace_period_seconds=0)
        _delete_hook_rbac(cluster, rbac)


@pytest.mark.parametrize("shutdown", ["clean", "killed"])
def test_uninstall_hook_stops_the_operator_then_frees_pending_deployments(
    shutdown: str,
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    release: str,
    held_node: str,
    tmp_path: Path,
) -> None:
    pod = _install_on_held_node(cluster, core, release, held_node)
    rbac = _create_hook_rbac(cluster, release)
    operator, _ = run_as_chart(cluster, release, tmp_path)
    try:
        # Paused in an open window: due, it stays pending and held by its timer.
        core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
        body = deployment("web", env=[env_from_secret("db")], paused=True)
        apps.create_namespaced_deployment(namespace, body)
        baseline(core, namespace, "db")
        change_data(core, namespace, "db", "b")
        wait_for(
            lambda: keys.FINALIZER in _finalizers(apps, namespace, "web"),
            30,
            message="a pending Deployment holding our finalizer",
        )
        hook = _start_hook_command(cluster, release, tmp_path)
        # The kubelet's part, played by the test: the operator's pod is terminating, so
        # its container gets SIGTERM (clean) or, past the grace period, SIGKILL (killed);
        # the pod is removed only once the process has exited.
        wait_for(
            lambda: core.read_namespaced_pod(pod.metadata.name, SYSTEM).metadata.deletion_timestamp,
            30,
            message="the operator's pod terminating",
        )
        assert hook.poll() is None, "the hook must wait for the operator's pod"
        assert operator.process is not None
        if shutdown == "clean":
            operator.process.terminate()
        else:
            operator.process.kill()
        operator.process.wait(30)
        core.delete_namespaced_pod(pod.metadata.name, SYSTEM, grace_period_seconds=0)
        out, _ = hook.communicate(timeout=60)
    finally:
        operator.stop()
    assert hook.returncode == 0, out
    operator_name = f"{release}-restarter"
    assert f"scaled deployment {SYSTEM}/{operator_name} to 0 replicas" in out
    assert "operator pods gone" in out
    assert apps.read_namespaced_deployment(operator_name, SYSTEM).spec.replicas == 0
    by_hook = f"released {keys.FINALIZER} from deployment {namespace}/web" in out
    # In cluster mode its shutdown releases any pending Deployment of the shared cluster.
    by_operator = bool(re.search(r"released the finalizer of \d+ pending", operator.log()))
    if shutdown == "killed":
        assert by_hook and not by_operator
    else:  # its own shutdown, with its RBAC still there; the hook only if that one conflicted
        assert by_hook != by_operator, (out, operator.log()[-3000:])
    assert "Forbidden" not in out + operator.log()
    time.sleep(2)  # nothing runs that could add it back
    web = apps.read_namespaced_deployment("web", namespace)
    assert keys.FINALIZER not in (web.metadata.finalizers or [])
    assert any(key.startswith(keys.PENDING_MARK) for key in web.metadata.annotations)

    _delete_hook_rbac(cluster, rbac)
    helm(cluster, "uninstall", release, "-n", SYSTEM, "--no-hooks", "--wait")
    assert release_objects(cluster, release) == []
    apps.delete_namespaced_deployment("web", namespace)
    wait_for(
        lambda: _gone(apps.read_namespaced_deployment, "web", namespace),
        30,
        message="the formerly pending Deployment deleted",
    )


def _workload(kind: str, name: str, finalizers: list[str], marked: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    marks = {keys.pending_key("secret", "db"): "1"} if marked else {}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "finalizers": finalizers, "annotations": marks},
        "spec": spec,
    }


def test_uninstall_hook_in_namespaced_mode_frees_every_workload_kind_with_only_its_rbac(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, release: str, tmp_path: Path
) -> None:
    outside = f"outside-{uuid.uuid4().hex[:5]}"
    create_namespace(core, outside)
    apps.create_namespaced_deployment(outside, _workload("Deployment", "other", [keys.FINALIZER]))
    values = ("--set", f"namespaces={{{namespace}}}")
    install(cluster, release, *values)
    apps.create_namespaced_deployment(
        namespace, _workload("Deployment", "web", [keys.FINALIZER, KEEP])
    )
    apps.create_namespaced_stateful_set(namespace, _workload("StatefulSet", "db", [keys.FINALIZER]))
    apps.create_namespaced_daemon_set(namespace, _workload("DaemonSet", "agent", [keys.FINALIZER]))
    rbac = _create_hook_rbac(cluster, release, *values)
    try:
        # Outside the chart's namespaces the hook may not even look: a clear failure.
        code, out = _run_hook_command(
            cluster, release, tmp_path, *values, extra=(f"--namespace={outside}",)
        )
        assert code == 1, out
        assert f"restarter release-finalizers: listing deployments in {outside}: HTTP 403" in out
        assert f"released {keys.FINALIZER}" not in out  # everything is listed first
        assert _finalizers(apps, namespace, "web") == [keys.FINALIZER, KEEP]

        code, out = _run_hook_command(cluster, release, tmp_path, *values)
        assert code == 0, out
        assert "403" not in out and "Forbidden" not in out
        for line in (
            f"released {keys.FINALIZER} from deployment {namespace}/web",
            f"released {keys.FINALIZER} from statefulset {namespace}/db",
            f"released {keys.FINALIZER} from daemonset {namespace}/agent",
            f"released the finalizer of 3 workload(s) in {namespace}",
        ):
            assert line in out
        assert _finalizers(apps, namespace, "web") == [KEEP]
        assert not apps.read_namespaced_stateful_set("db", namespace).metadata.finalizers
        assert not apps.read_namespaced_daemon_set("agent", namespace).metadata.finalizers
        marks = apps.read_namespaced_daemon_set("agent", namespace).metadata.annotations
        assert keys.pending_key("secret", "db") in marks
        assert _finalizers(apps, outside, "other") == [keys.FINALIZER]
        assert _operator_pods(core, release) == []
    finally:
        # Marked workloads left in a namespace being deleted would be adopted by the
        # cluster-wide operator of a later test.
        for name, where in (("web", namespace), ("other", outside)):
            apps.patch_namespaced_deployment(name, where, {"metadata": {"finalizers": None}})
            apps.delete_namespaced_deployment(name, where)
        apps.delete_namespaced_stateful_set("db", namespace)
        apps.delete_namespaced_daemon_set("agent", namespace)
        core.delete_namespace(outside)
    _delete_hook_rbac(cluster, rbac)
    helm(cluster, "uninstall", release, "-n", SYSTEM, "--no-hooks", "--wait")
    assert release_objects(cluster, release) == []
