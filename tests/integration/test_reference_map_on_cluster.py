"""The reference map and the pending label on the real control plane: start-up with many
workloads, a watch that is cut and listed again, a workload that stops using a Secret."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import urllib3
import yaml

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import (
    deployment,
    env_from_secret,
    secret,
    window_hours_away,
    window_open_now,
)
from tests.integration.proxy import CuttableProxy
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    pending,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

WORKLOADS = 240
PENDING_LABELLED = 10  # marked by this version: label and marks
PENDING_UNLABELLED = 10  # marked by restarter 0.2: marks only, found at start-up


class DeploymentHistory:
    """The test's own watch: every restartedAt, finalizer and pending-mark key each
    Deployment ever showed."""

    def __init__(self, apps: Apps, namespace: str) -> None:
        self.restarted_at: dict[str, set[str]] = defaultdict(set)
        self.had_finalizer: set[str] = set()
        self.marks: dict[str, set[str]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(apps, namespace), daemon=True)

    def __enter__(self) -> DeploymentHistory:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()

    def _run(self, apps: Apps, namespace: str) -> None:
        try:
            self._watch(apps, namespace)
        except urllib3.exceptions.ProtocolError:
            if not self._stop.is_set():
                raise  # a watch cut after the test is over (the cluster stopping) is no failure

    def _watch(self, apps: Apps, namespace: str) -> None:
        watch = kubernetes.watch.Watch()
        for event in watch.stream(apps.list_namespaced_deployment, namespace, timeout_seconds=600):
            body = event["object"]
            name = body.metadata.name
            template = body.spec.template.metadata.annotations or {}
            if keys.KUBECTL_RESTARTED_AT in template:
                self.restarted_at[name].add(template[keys.KUBECTL_RESTARTED_AT])
            if keys.FINALIZER in (body.metadata.finalizers or []):
                self.had_finalizer.add(name)
            annotations = body.metadata.annotations or {}
            self.marks[name] |= {key for key in annotations if key.startswith(keys.MARK_PREFIXES)}
            if self._stop.is_set():
                watch.stop()


def old_marks(now: dt.datetime) -> dict[str, str]:
    """Marks for Secret db, seen a minute ago, in a window open now."""
    return {
        keys.pending_key("secret", "db"): str(int(now.timestamp()) - 60),
        keys.window_key("secret", "db"): json.dumps(
            {"at": window_open_now(), "length": "1h", "source": "Secret/db", "timezone": "UTC"},
            separators=(",", ":"),
            sort_keys=True,
        ),
    }


def name_of(i: int) -> str:
    return f"app-{i:03d}"


def test_start_up_with_hundreds_of_workloads_restarts_exactly_the_pending_ones_once(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    now = dt.datetime.now(dt.UTC)
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    pending_names = {name_of(i) for i in range(PENDING_LABELLED + PENDING_UNLABELLED)}

    def create(i: int) -> None:
        body = deployment(name_of(i), env=[env_from_secret("db")], replicas=0)
        if i < PENDING_LABELLED + PENDING_UNLABELLED:
            body["metadata"]["annotations"] = old_marks(now)
        if i < PENDING_LABELLED:
            body["metadata"]["labels"] = {keys.PENDING_LABEL: "true"}
        apps.create_namespaced_deployment(namespace, body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(WORKLOADS)))

    def first_replica_sets() -> int:
        owners = {
            rs.metadata.owner_references[0].name
            for rs in apps.list_namespaced_replica_set(namespace).items
        }
        return len(owners)

    # A restart that lands before the deployment controller made a Deployment's first
    # ReplicaSet leaves it with one (of the new template): the count below needs the first.
    wait_for(lambda: first_replica_sets() == WORKLOADS, 120, message="every first ReplicaSet")

    with DeploymentHistory(apps, namespace) as history:
        operator()

        def all_restarted() -> bool:
            return all(not pending(apps, namespace, name) for name in pending_names)

        wait_for(all_restarted, 90, message="every pending Deployment restarted")
        time.sleep(TICKS)  # a second restart, if any, would come on the next ticks

        for name in sorted(pending_names):
            body = apps.read_namespaced_deployment(name, namespace)
            assert len(history.restarted_at[name]) == 1, (name, history.restarted_at[name])
            assert keys.PENDING_LABEL not in (body.metadata.labels or {}), name
            assert keys.FINALIZER not in (body.metadata.finalizers or []), name
            assert (body.metadata.annotations or {}).get(keys.RESTART_TS), name
        idle = {name_of(i) for i in range(WORKLOADS)} - pending_names
        assert not (history.had_finalizer & idle), sorted(history.had_finalizer & idle)[:5]
        assert not (set(history.restarted_at) & idle)

    # Each restarted Deployment gets exactly one new ReplicaSet; the others keep their one.
    def replica_sets() -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for rs in apps.list_namespaced_replica_set(namespace).items:
            counts[rs.metadata.owner_references[0].name] += 1
        return counts

    wait_for(
        lambda: {name for name, count in replica_sets().items() if count == 2} == pending_names,
        60,
        message="a second ReplicaSet for exactly the pending Deployments",
    )
    assert sorted(set(replica_sets().values())) == [1, 2]


@pytest.fixture
def proxied_kubeconfig(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[CuttableProxy, Path]]:
    """A kubeconfig whose server is a cuttable proxy in front of the apiserver (the chart's
    ServiceAccount's, as every operator of this tier runs with)."""
    proxy = CuttableProxy(cluster.ports["apiserver"])
    chosen = Operator.default_identity([]) if Operator.default_identity else cluster.kubeconfig
    config = yaml.safe_load(chosen.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield proxy, path
    proxy.close()


def test_after_a_cut_the_stream_relists_and_a_deployment_using_a_secret_since_is_stamped(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    tmp_path: Path,
    proxied_kubeconfig: tuple[CuttableProxy, Path],
) -> None:
    proxy, kubeconfig = proxied_kubeconfig
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=0))
    args = ["--namespace", namespace, "--timer-interval", "1"]
    running = Operator(cluster, tmp_path / "operator.log", args, kubeconfig=kubeconfig).start()
    try:
        baseline(core, namespace, "db")
        proxy.cut()
        wait_for(
            lambda: f"deployments in {namespace}: " in running.log(),
            30,
            message="the operator to notice the cut watch",
        )
        apps.patch_namespaced_deployment(
            "web",
            namespace,
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "app", "env": [env_from_secret("db")]}]}
                    }
                }
            },
        )
        time.sleep(2)
        proxy.restore()
        change_data(core, namespace, "db", "b")
        wait_for(lambda: pending(apps, namespace, "web"), 90, message="marks on web after the cut")
    finally:
        running.stop()
        print(running.log()[-3000:])


def test_a_deployment_that_stops_using_a_secret_is_no_longer_stamped_by_its_changes(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    for name in ("leaver", "stayer"):
        apps.create_namespaced_deployment(
            namespace, deployment(name, env=[env_from_secret("db")], replicas=0)
        )
    operator()
    baseline(core, namespace, "db")
    apps.patch_namespaced_deployment(
        "leaver",
        namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": None}]}}}},
    )
    body = apps.read_namespaced_deployment("leaver", namespace)
    assert not body.spec.template.spec.containers[0].env
    time.sleep(1)  # the watch event reaches the operator in milliseconds
    change_data(core, namespace, "db", "b")
    wait_for(lambda: pending(apps, namespace, "stayer"), 30, message="marks on stayer")
    time.sleep(TICKS)
    assert pending(apps, namespace, "leaver") == {}
    stayer = apps.read_namespaced_deployment("stayer", namespace)
    # Marked, waiting hours for its window: no timer holds it yet.
    assert keys.PENDING_LABEL not in (stayer.metadata.labels or {})
    assert keys.FINALIZER not in (stayer.metadata.finalizers or [])
