"""Argo Rollouts as a workload kind, on the real control plane with Argo's own controller:
no CRD, no watch and no error; a CRD installed after the operator started is found, and
a Rollout restarts once in its window through ``spec.restartAt``; a Rollout with
``spec.workloadRef`` depends on what the referenced Deployment's template reads."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from restarter.model import keys
from restarter_cluster import argo_rollouts
from restarter_cluster.argo_rollouts import ArgoRollouts
from restarter_cluster.binaries import MissingBinaries
from restarter_cluster.cluster import Cluster
from tests.conftest import REPO, Operator, refused, wait_for
from tests.integration.factories import (
    deployment,
    env_from_secret,
    rollout,
    secret,
    window_open_now,
)
from tests.integration.test_chart import helm, install, run_as_chart
from tests.integration.test_operator_restarts import TICKS, baseline, change_data, events

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
OperatorFactory = Callable[..., Operator]
GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "rollouts"
NOT_SERVED = "Rollouts (argoproj.io/v1alpha1) are not served: not watched"
SERVED = "Rollouts are served: listing and watching them"


@pytest.fixture(scope="module")
def argo(cluster: Cluster) -> Iterator[Callable[[], ArgoRollouts]]:
    """Factory: install Argo Rollouts' CRDs and start its controller, once; at the end
    the controller stops and the CRDs go, so later files see a cluster without them."""
    started: list[ArgoRollouts] = []

    def start() -> ArgoRollouts:
        if not started:
            try:
                started.append(ArgoRollouts(cluster).start())
            except MissingBinaries as error:
                pytest.fail(f"Argo Rollouts' controller is not built: {error}")
        return started[0]

    yield start
    for controller in started:
        controller.stop()
        for path in argo_rollouts.crd_files():
            cluster.kubectl("delete", "--ignore-not-found", "--wait=false", f"-f={path}")


def read(custom: Custom, namespace: str, name: str) -> dict[str, Any]:
    return dict(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))


def marks(body: dict[str, Any]) -> dict[str, str]:
    annotations = body["metadata"].get("annotations") or {}
    return {key: value for key, value in annotations.items() if key.startswith(keys.MARK_PREFIXES)}


def healthy(custom: Custom, namespace: str, name: str) -> bool:
    return (read(custom, namespace, name).get("status") or {}).get("phase") == "Healthy"


def pods_of(core: Core, namespace: str, app: str) -> list[Any]:
    found = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [pod for pod in found if pod.metadata.deletion_timestamp is None]


ROLLOUT_RULE = {
    "apiGroups": ["argoproj.io"],
    "resources": ["rollouts"],
    "verbs": ["get", "list", "watch", "patch"],
}


def chart_dry_run(cluster: Cluster, *options: str) -> tuple[list[Any], str]:
    """The chart as ``helm install --dry-run=server`` renders it (its lookups answered by
    the cluster): the operator's ClusterRole rules and its RESTARTER_ROLLOUTS value."""
    release = f"d-{uuid.uuid4().hex[:6]}"
    chart = str(REPO / "charts" / "restarter")
    dry_run = ["install", release, chart, "-n", "default", "--dry-run=server", "-o", "json"]
    manifest = json.loads(helm(cluster, *dry_run, *options).stdout)["manifest"]
    documents = [doc for doc in yaml.safe_load_all(manifest) if doc]
    role = next(
        doc
        for doc in documents
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == f"{release}-restarter"
    )
    operator = next(doc for doc in documents if doc["kind"] == "Deployment")
    env = operator["spec"]["template"]["spec"]["containers"][0]["env"]
    value = next(item["value"] for item in env if item["name"] == "RESTARTER_ROLLOUTS")
    return role["rules"], value


def test_without_the_crd_the_operator_watches_no_rollouts_and_reports_no_error(
    cluster: Cluster, namespace: str, operator: OperatorFactory
) -> None:
    served = cluster.kubectl("get", "crd", "rollouts.argoproj.io", check=False)
    assert served.returncode != 0, "the Rollout CRD must be absent for this test"
    rules, enabled = chart_dry_run(cluster)
    assert ROLLOUT_RULE not in rules and enabled == "false"  # the chart's lookup: no CRD
    running = operator()
    wait_for(lambda: NOT_SERVED in running.log(), 30, message="the log line")
    time.sleep(TICKS)
    log = running.log()
    assert SERVED not in log
    assert "Unresolved resources" not in log  # kopf was never asked to watch Rollouts
    assert "rollouts" not in log.replace(NOT_SERVED, "").lower()
    assert "Traceback" not in log and " ERROR " not in log


def test_a_crd_installed_later_is_found_and_the_rollout_restarts_once_in_its_window(
    cluster: Cluster,
    core: Core,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    argo: Callable[[], ArgoRollouts],
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    running = operator()
    baseline(core, namespace, "db")
    argo()  # the CRDs and the controller, after the operator started
    body = rollout("web", env=[env_from_secret("db")])
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    wait_for(lambda: SERVED in running.log(), 60, message="the operator finding Rollouts")
    wait_for(lambda: healthy(custom, namespace, "web"), 90, message="the Rollout Healthy")
    before = {pod.metadata.name for pod in pods_of(core, namespace, "web")}
    assert len(before) == 2

    change_data(core, namespace, "db", "b")
    wait_for(lambda: events(core, namespace, "web", "Restarted"), 60, message="the restart")
    restarted = read(custom, namespace, "web")
    restart_at = restarted["spec"]["restartAt"]
    assert marks(restarted) == {}
    assert keys.PENDING_LABEL not in (restarted["metadata"].get("labels") or {})
    assert keys.FINALIZER not in (restarted["metadata"].get("finalizers") or [])
    assert keys.RESTART_TS in restarted["metadata"]["annotations"]

    # Argo's controller replaces every pod older than restartAt, then records restartedAt.
    def replaced() -> bool:
        status = read(custom, namespace, "web").get("status") or {}
        pods = pods_of(core, namespace, "web")
        return (
            status.get("restartedAt") == restart_at
            and status.get("phase") == "Healthy"
            and len(pods) == 2
            and not before & {pod.metadata.name for pod in pods}
        )

    # Argo evicts one pod at a time here (maxUnavailable rounds down to 0, so 1) and, when
    # it may evict none yet, looks again after 30 s: several rounds under load.
    try:
        wait_for(replaced, 240, message="Argo replacing the Rollout's pods")
    except BaseException:
        print(argo().log_since(0)[-6000:], file=sys.stderr)
        raise
    asked = dt.datetime.fromisoformat(restart_at)
    assert all(pod.metadata.creation_timestamp >= asked for pod in pods_of(core, namespace, "web"))

    time.sleep(TICKS)  # still open window: nothing restarts a second time
    again = read(custom, namespace, "web")
    assert again["spec"]["restartAt"] == restart_at
    assert len(events(core, namespace, "web", "Restarted")) == 1
    assert "Unresolved resources" not in running.log()


def test_a_workload_ref_rollout_depends_on_what_the_deployment_template_reads(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    argo: Callable[[], ArgoRollouts],
) -> None:
    argo()
    window = window_open_now()
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window))
    core.create_namespaced_secret(namespace, secret("other", {"password": "a"}, window))
    template = deployment("base", env=[env_from_secret("db")], replicas=0)
    apps.create_namespaced_deployment(namespace, template)
    body = rollout("ref", workload_ref="base", replicas=1)
    # Paused: due at once, it stays pending, held by its timer, until resumed.
    body["spec"]["paused"] = True
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    running = operator()
    baseline(core, namespace, "db")
    baseline(core, namespace, "other")

    change_data(core, namespace, "other", "b")  # read by nothing
    change_data(core, namespace, "db", "b")
    wait_for(lambda: marks(read(custom, namespace, "ref")), 30, message="the Rollout's marks")
    stamped = read(custom, namespace, "ref")
    assert set(marks(stamped)) == {
        keys.pending_key("secret", "db"),
        keys.window_key("secret", "db"),
    }
    wait_for(
        lambda: (
            keys.PENDING_LABEL in (read(custom, namespace, "ref")["metadata"].get("labels") or {})
        ),
        30,
        message="the Rollout handed to its timer",
    )
    # Its admission (a merge patch) carries no finalizer list; kopf's timer adds ours.
    wait_for(
        lambda: (
            keys.FINALIZER in (read(custom, namespace, "ref")["metadata"].get("finalizers") or [])
        ),
        30,
        message="the finalizer kopf's timer adds",
    )

    plan = [sys.executable, "-m", "restarter", "plan", "-n", namespace, "-o", "json"]
    plan += ["--kubeconfig", str(cluster.kubeconfig)]
    listed = subprocess.run(plan, capture_output=True, text=True, check=True, cwd=REPO)
    rows = json.loads(listed.stdout)
    assert ("Rollout", "ref", "Secret/db") in {
        (row["kind"], row["name"], row["source"]) for row in rows
    }

    assert "restartAt" not in read(custom, namespace, "ref")["spec"]  # paused
    wait_for(lambda: events(core, namespace, "ref", "RestartDeferred"), 20, message="paused, said")
    running.stop()  # a clean stop releases the finalizer and keeps the marks
    released = read(custom, namespace, "ref")
    assert keys.FINALIZER not in (released["metadata"].get("finalizers") or [])
    assert set(marks(released)) == set(marks(stamped))
    # Paused and pending, it would keep a cluster-wide operator of a later test busy in a
    # namespace being deleted (its Events there refused).
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "ref")


def test_with_the_crd_at_install_the_chart_grants_rollouts_and_its_sa_restarts_one(
    cluster: Cluster,
    core: Core,
    custom: Custom,
    namespace: str,
    tmp_path: Path,
    argo: Callable[[], ArgoRollouts],
) -> None:
    argo()
    rules, enabled = chart_dry_run(cluster)
    assert ROLLOUT_RULE in rules and enabled == "true"
    rules, enabled = chart_dry_run(cluster, "--set", "rollouts.enabled=false")
    assert ROLLOUT_RULE not in rules and enabled == "false"

    release = f"r-{uuid.uuid4().hex[:6]}"
    try:
        install(cluster, release, "--set", "logFormat=plain")
        running, _ = run_as_chart(cluster, release, tmp_path)
        try:
            core.create_namespaced_secret(
                namespace, secret("db", {"password": "a"}, window_open_now())
            )
            body = rollout("web", env=[env_from_secret("db")], replicas=1)
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
            baseline(core, namespace, "db")
            change_data(core, namespace, "db", "b")
            wait_for(lambda: events(core, namespace, "web", "Restarted"), 60, message="restart")
            assert "restartAt" in read(custom, namespace, "web")["spec"]
            assert not refused(running.log())
        finally:
            running.stop()
    finally:
        helm(cluster, "uninstall", release, "-n", "restarter-system", "--no-hooks", check=False)


def test_with_a_namespace_selector_a_rollout_restarts_only_in_a_namespace_labelled_in(
    cluster: Cluster,
    core: Core,
    custom: Custom,
    namespace: str,
    tmp_path: Path,
    argo: Callable[[], ArgoRollouts],
) -> None:
    """The namespace comes into scope after the operator started: its Rollout stream is
    one of those it starts then."""
    argo()
    value = uuid.uuid4().hex[:8]
    other = f"{namespace[:50]}-other"
    core.create_namespace({"metadata": {"name": other}})
    args = ["--namespace-selector", f"rollout-test={value}", "--timer-interval", "1"]
    running = Operator(cluster, tmp_path / "operator.log", args).start()
    try:
        for each in (namespace, other):
            core.create_namespaced_secret(each, secret("db", {"password": "a"}, window_open_now()))
            body = rollout("web", env=[env_from_secret("db")], replicas=1)
            custom.create_namespaced_custom_object(GROUP, VERSION, each, PLURAL, body)
        core.patch_namespace(namespace, {"metadata": {"labels": {"rollout-test": value}}})
        baseline(core, namespace, "db")
        change_data(core, other, "db", "b")
        change_data(core, namespace, "db", "b")
        wait_for(lambda: events(core, namespace, "web", "Restarted"), 60, message="the restart")
        assert "restartAt" in read(custom, namespace, "web")["spec"]

        time.sleep(TICKS)
        untouched = read(custom, other, "web")
        assert "restartAt" not in untouched["spec"] and marks(untouched) == {}
        assert events(core, other, "web", "Restarted") == []
        assert "Traceback" not in running.log()
    finally:
        running.stop()
        core.delete_namespace(other)


def test_a_degraded_rollout_in_the_first_wave_halts_the_change(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    argo: Callable[[], ArgoRollouts],
) -> None:
    """A Rollout whose pods no node takes goes Degraded past its progress deadline: as the
    first wave of a change, it halts the change, and the Deployment after it stays pending."""
    argo()
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    body = rollout("a-first", env=[env_from_secret("db")], replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 5
    body["spec"]["template"]["spec"]["nodeSelector"] = {"restarter.io/test": "no-such-node"}
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    apps.create_namespaced_deployment(namespace, deployment("b-web", env=[env_from_secret("db")]))
    running = operator("--first-wave", "1", "--soak", "3s", "--quiet", "0")
    wait_for(lambda: SERVED in running.log(), 60, message="the operator finding Rollouts")
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")

    halted = wait_for(
        lambda: events(core, namespace, "db", "ChangeHalted"), 120, message="ChangeHalted"
    )
    assert "Rollout/a-first failed: its Rollout is Degraded" in halted[0].message
    wait_for(lambda: events(core, namespace, "b-web", "RestartHalted"), 30, message="b-web told")
    time.sleep(TICKS)
    replica_sets = apps.list_namespaced_replica_set(namespace, label_selector="app=b-web").items
    assert len(replica_sets) == 1  # b-web never restarted
