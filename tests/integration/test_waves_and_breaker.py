"""Waves and the circuit breaker on the real control plane (simulated nodes): a change
reaches its first wave first; a first wave that rolls out healthy releases the rest; one
that never rolls out (ProgressDeadlineExceeded) halts the change, the rest stay pending with
their marks, say so, show ``halted`` in ``plan``, and restart once the change is resumed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import REPO, Operator, wait_for
from tests.integration.factories import (
    configmap,
    deployment,
    env_from_secret,
    secret,
    window_open_now,
)
from tests.integration.test_exactly_once_across_crash import kill
from tests.integration.test_operator_restarts import (
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    rollout_finished,
)
from tests.integration.test_plan_command import plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

WAVES = ("--first-wave", "1", "--soak", "3s", "--quiet", "0")


def _never_ready(name: str) -> dict[str, Any]:
    """A Deployment reading Secret ``db`` whose pods no node takes: its rollouts never
    complete, and the Deployment controller gives up on each after 5 s."""
    body = deployment(name, env=[env_from_secret("db")], replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 5
    body["spec"]["template"]["spec"]["nodeSelector"] = {"restarter.io/test": "no-such-node"}
    return body


def _wave_record(core: Core, namespace: str) -> dict[str, Any]:
    annotations = core.read_namespaced_secret("db", namespace).metadata.annotations or {}
    return dict(json.loads(annotations.get(keys.WAVE) or "{}"))


def _three_dependents(
    core: Core, apps: Apps, namespace: str, first: dict[str, Any], window: str = ""
) -> None:
    window = window or window_open_now()
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window))
    apps.create_namespaced_deployment(namespace, first)
    for name in ("b-web", "c-api"):
        apps.create_namespaced_deployment(namespace, deployment(name, env=[env_from_secret("db")]))


def test_a_healthy_first_wave_releases_the_rest_after_the_soak(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    _three_dependents(core, apps, namespace, deployment("a-first", env=[env_from_secret("db")]))
    for name in ("a-first", "b-web", "c-api"):
        rollout_finished(cluster, namespace, name)
    operator(*WAVES)
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")

    wait_for(lambda: len(replica_sets(apps, namespace, "a-first")) == 2, 30, message="wave 1")
    record = wait_for(lambda: _wave_record(core, namespace).get("first"), 30, message="record")
    assert record == ["Deployment/a-first"]
    # The rest wait for the first wave's rollout and its soak: not restarted at once.
    assert len(replica_sets(apps, namespace, "b-web")) == 1
    assert pending(apps, namespace, "b-web")
    for name in ("b-web", "c-api"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            60,
            message=f"{name} restarted once the first wave soaked",
        )
    assert _wave_record(core, namespace)["state"] == "released"
    (released,) = events(core, namespace, "db", "ChangeReleased")
    assert "first wave Deployment/a-first healthy for 3s" in released.message
    time.sleep(3)
    for name in ("a-first", "b-web", "c-api"):
        assert len(replica_sets(apps, namespace, name)) == 2, f"{name} restarted once"


def test_a_first_wave_past_its_progress_deadline_halts_the_change_until_resumed(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    _three_dependents(core, apps, namespace, _never_ready("a-first"))
    for name in ("b-web", "c-api"):
        rollout_finished(cluster, namespace, name)
    operator(*WAVES)
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")

    halted = wait_for(
        lambda: events(core, namespace, "db", "ChangeHalted"), 90, message="ChangeHalted"
    )
    assert halted[0].type == "Warning"
    assert "Deployment/a-first failed: its rollout failed (ProgressDeadlineExceeded)" in (
        halted[0].message
    )
    assert f"restarter resume -n {namespace} secret/db" in halted[0].message
    record = _wave_record(core, namespace)
    assert (record["state"], record["failed"]) == ("halted", "Deployment/a-first")
    for name in ("b-web", "c-api"):
        warned = wait_for(
            lambda name=name: events(core, namespace, name, "RestartHalted"),
            30,
            message=f"RestartHalted on {name}",
        )
        assert warned[0].type == "Warning"
        assert "Deployment/a-first failed" in warned[0].message
    time.sleep(5)
    for name in ("b-web", "c-api"):
        assert len(replica_sets(apps, namespace, name)) == 1, f"{name} never restarted"
        assert pending(apps, namespace, name), f"{name} keeps its marks"
    rows = {row["name"]: row for row in plan_json(cluster.kubeconfig, "-n", namespace)}
    assert rows["b-web"]["state"] == rows["c-api"]["state"] == "halted"
    assert any("restarter resume" in note for note in rows["b-web"]["notes"])

    resumed = subprocess.run(
        [sys.executable, "-m", "restarter", "resume", "-n", namespace, "secret/db"],
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stdout
    for name in ("b-web", "c-api"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            60,
            message=f"{name} restarted once resumed",
        )
    assert _wave_record(core, namespace)["state"] == "released"
    assert any(
        "resumed" in event.message for event in events(core, namespace, "db", "ChangeReleased")
    )


def test_nothing_is_lost_when_the_operator_is_killed_while_soaking_or_halted(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    """The state lives on the objects: killed while the first wave soaks, a new operator
    releases the rest once; killed while halted, a new one keeps the change halted. (``now``:
    a window restarts a workload once per occurrence, and this test changes the data twice.)"""
    first = deployment("a-first", env=[env_from_secret("db")])
    _three_dependents(core, apps, namespace, first, window="now")
    for name in ("a-first", "b-web", "c-api"):
        rollout_finished(cluster, namespace, name)
    first = operator("--first-wave", "1", "--soak", "30s", "--quiet", "0")
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: len(replica_sets(apps, namespace, "a-first")) == 2, 30, message="wave 1")
    kill(first)  # rolling out or soaking: the rest not restarted yet
    assert len(replica_sets(apps, namespace, "b-web")) == 1
    second = operator("--first-wave", "1", "--soak", "30s", "--quiet", "0")
    for name in ("b-web", "c-api"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            150,
            message=f"{name} restarted by the new operator after the soak",
        )
    assert len(replica_sets(apps, namespace, "a-first")) == 2  # not restarted a second time

    # The next change's first wave never rolls out: halted, then the operator is killed.
    apps.patch_namespaced_deployment("a-first", namespace, _never_ready("a-first"))
    change_data(core, namespace, "db", "c")
    wait_for(lambda: _wave_record(core, namespace).get("state") == "halted", 90, message="halt")
    kill(second)
    operator("--first-wave", "1", "--soak", "3s", "--quiet", "0")
    time.sleep(10)
    for name in ("b-web", "c-api"):
        assert len(replica_sets(apps, namespace, name)) == 2, f"{name} stays halted"
        assert pending(apps, namespace, name), f"{name} keeps its marks"
    assert len(events(core, namespace, "db", "ChangeHalted")) == 1  # told once


GROUP = 20


def _bundles(core: Core, apps: Apps, namespace: str, never_ready: bool) -> None:
    """20 ConfigMaps of rollout group ``bundle`` (the same CA bundle, as trust-manager
    writes into every namespace), each read by one Deployment."""
    for index in range(GROUP):
        body = configmap(
            f"bundle-{index:02}",
            window_open_now(),
            data={"ca.crt": "first"},
            annotations={keys.ROLLOUT_GROUP: "bundle"},
        )
        core.create_namespaced_config_map(namespace, body)
        reads = [
            {
                "name": "CA",
                "valueFrom": {
                    "configMapKeyRef": {"name": body["metadata"]["name"], "key": "ca.crt"}
                },
            }
        ]
        app = deployment(f"app-{index:02}", env=reads, replicas=1)
        if never_ready:
            app["spec"]["progressDeadlineSeconds"] = 5
            app["spec"]["template"]["spec"]["nodeSelector"] = {"restarter.io/test": "none"}
        apps.create_namespaced_deployment(namespace, app)


def _change_bundles(core: Core, namespace: str) -> None:
    """Once the operator recorded every bundle's checksum (first sight), change them all."""
    wait_for(
        lambda: all(
            (item.metadata.annotations or {}).get(keys.CHECKSUM)
            for item in core.list_namespaced_config_map(namespace).items
            if item.metadata.name.startswith("bundle-")
        ),
        60,
        message="every bundle's checksum",
    )
    for index in range(GROUP):
        core.patch_namespaced_config_map(
            f"bundle-{index:02}", namespace, {"data": {"ca.crt": "second"}}
        )


def _restarted(apps: Apps, namespace: str) -> list[str]:
    return [
        f"app-{index:02}"
        for index in range(GROUP)
        if len(replica_sets(apps, namespace, f"app-{index:02}")) > 1
    ]


def _bundle_records(core: Core, namespace: str) -> list[dict[str, Any]]:
    found = core.list_namespaced_config_map(namespace).items
    return [
        json.loads((item.metadata.annotations or {}).get(keys.WAVE) or "{}")
        for item in found
        if item.metadata.name.startswith("bundle-")
    ]


def test_a_rollout_group_has_one_first_wave_then_the_rest(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    _bundles(core, apps, namespace, never_ready=False)
    for index in range(GROUP):
        rollout_finished(cluster, namespace, f"app-{index:02}")
    # The group's sources are recorded while its first wave waits out the quiet time and
    # is judged: one change. 20 s leaves room for a loaded operator's twenty fan-outs.
    operator("--first-wave", "1", "--soak", "10s", "--quiet", "20s")
    _change_bundles(core, namespace)

    first = wait_for(lambda: _restarted(apps, namespace), 90, message="the group's first wave")
    assert len(first) == 1, f"one first wave across the group: {first}"
    time.sleep(5)  # the first wave soaks: nothing else restarts meanwhile
    assert _restarted(apps, namespace) == first
    wait_for(lambda: len(_restarted(apps, namespace)) == GROUP, 120, message="the rest")
    records = _bundle_records(core, namespace)
    assert [record.get("state") for record in records] == ["released"] * GROUP


def test_a_failure_in_a_rollout_groups_first_wave_halts_every_source_of_it(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    _bundles(core, apps, namespace, never_ready=True)
    operator("--first-wave", "1", "--soak", "3s", "--quiet", "20s")
    _change_bundles(core, namespace)

    wait_for(
        lambda: [r.get("state") for r in _bundle_records(core, namespace)] == ["halted"] * GROUP,
        120,
        message="all 20 halted",
    )
    time.sleep(5)
    restarted = _restarted(apps, namespace)
    assert len(restarted) == 1, f"only the group's first wave restarted: {restarted}"
    halted = events(core, namespace, "bundle-00", "ChangeHalted") + events(
        core, namespace, "bundle-19", "ChangeHalted"
    )
    assert len(halted) == 2
    assert all(f"Deployment/{restarted[0]} failed" in event.message for event in halted)
