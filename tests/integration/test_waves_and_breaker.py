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
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
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


def _three_dependents(core: Core, apps: Apps, namespace: str, first: dict[str, Any]) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
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
    releases the rest once; killed while halted, a new one keeps the change halted."""
    _three_dependents(core, apps, namespace, deployment("a-first", env=[env_from_secret("db")]))
    for name in ("a-first", "b-web", "c-api"):
        rollout_finished(cluster, namespace, name)
    first = operator("--first-wave", "1", "--soak", "20s", "--quiet", "0")
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: len(replica_sets(apps, namespace, "a-first")) == 2, 30, message="wave 1")
    rollout_finished(cluster, namespace, "a-first")
    kill(first)  # soaking: the rest not restarted yet
    assert len(replica_sets(apps, namespace, "b-web")) == 1
    second = operator("--first-wave", "1", "--soak", "20s", "--quiet", "0")
    for name in ("b-web", "c-api"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            90,
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
