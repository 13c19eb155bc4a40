"""The operator against the real control plane: what a user sees with kubectl."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import (
    deployment,
    encoded,
    env_from_secret,
    secret,
    window_hours_away,
    window_open_now,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]
TICKS = 4.0  # seconds: four timer intervals of the test operator


def annotations_of(apps: Apps, namespace: str, name: str) -> dict[str, str]:
    return apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}


def pending(apps: Apps, namespace: str, name: str) -> dict[str, str]:
    return {
        key: value
        for key, value in annotations_of(apps, namespace, name).items()
        if key.startswith((keys.PENDING_MARK, keys.WINDOW_MARK))
    }


def replica_sets(apps: Apps, namespace: str, app: str) -> list[Any]:
    return apps.list_namespaced_replica_set(namespace, label_selector=f"app={app}").items


def events(core: Core, namespace: str, name: str, reason: str) -> list[Any]:
    found = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    return [event for event in found if event.reason == reason]


def secret_and_dependent(core: Core, apps: Apps, namespace: str, window: str) -> None:
    """Secret ``db`` labelled with ``window`` and Deployment ``web`` reading it from env."""
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))


def baseline(core: Core, namespace: str, name: str) -> str:
    """Wait until the operator recorded a checksum on the Secret (first sight)."""

    def recorded() -> str | None:
        return (core.read_namespaced_secret(name, namespace).metadata.annotations or {}).get(
            keys.CHECKSUM
        )

    return str(wait_for(recorded, 30, message=f"checksum on Secret {name}"))


def change_data(core: Core, namespace: str, name: str, password: str) -> None:
    core.patch_namespaced_secret(name, namespace, {"data": encoded({"password": password})})


def rollout_finished(cluster: Cluster, namespace: str, name: str) -> None:
    status = cluster.kubectl(
        "-n", namespace, "rollout", "status", f"deployment/{name}", "--timeout=90s", check=False
    )
    assert status.returncode == 0, status.stderr


def test_data_change_stamps_exactly_the_referencing_deployments_and_waits_for_a_far_window(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    far = window_hours_away(6)
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}, far))
    apps.create_namespaced_deployment(namespace, deployment("by-env", env=[env_from_secret("db")]))
    apps.create_namespaced_deployment(
        namespace,
        deployment(
            "by-volume",
            volumes=[{"name": "creds", "projected": {"sources": [{"secret": {"name": "db"}}]}}],
        ),
    )
    apps.create_namespaced_deployment(namespace, deployment("unrelated"))
    operator()
    baseline(core, namespace, "db")
    assert pending(apps, namespace, "by-env") == {}  # first sight restarts nothing

    change_data(core, namespace, "db", "two")
    for name in ("by-env", "by-volume"):
        marks = wait_for(
            lambda name=name: pending(apps, namespace, name), 20, message=f"marks on {name}"
        )
        mark = json.loads(marks[keys.window_key("secret", "db")])
        assert mark.pop("change").isdigit()  # the Secret's resourceVersion
        assert mark == {
            "keys": ["password"],  # the changed key both read, never its value
            "at": far,
            "timezone": "UTC",
            "length": "1h",
            "source": "Secret/db",
        }
        assert marks[keys.pending_key("secret", "db")].isdigit()
    time.sleep(TICKS)
    assert pending(apps, namespace, "unrelated") == {}
    for name in ("by-env", "by-volume", "unrelated"):
        assert len(replica_sets(apps, namespace, name)) == 1, name
    assert pending(apps, namespace, "by-env")  # still waiting for its window
    assert events(core, namespace, "db", "ChangeDetected")
    assert events(core, namespace, "by-env", "RestartScheduled")


def test_open_window_restarts_once_clears_marks_and_leaves_no_finalizer(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("tls", {"password": "old"}, window_open_now()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("tls")]))
    rollout_finished(cluster, namespace, "web")
    running = operator()
    baseline(core, namespace, "tls")

    change_data(core, namespace, "tls", "new")
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2,
        30,
        message="the ReplicaSet of the restart",
    )
    rollout_finished(cluster, namespace, "web")
    web = apps.read_namespaced_deployment("web", namespace)
    assert pending(apps, namespace, "web") == {}
    assert web.metadata.annotations[keys.RESTART_TS].isdigit()
    assert keys.KUBECTL_RESTARTED_AT in web.spec.template.metadata.annotations
    wait_for(
        lambda: not apps.read_namespaced_deployment("web", namespace).metadata.finalizers,
        20,
        message="finalizer removed",
    )
    assert len(events(core, namespace, "web", "Restarted")) == 1

    # The Secret never carries a copy of its data: no kopf diff-base or progress keys.
    stored = core.read_namespaced_secret("tls", namespace).metadata.annotations
    assert set(stored) == {keys.CHECKSUM, keys.KEY_DIGESTS}
    assert not [key for key in web.metadata.annotations if "kopf" in key]
    # An operator restart re-lists everything and must not restart again.
    running.stop()
    operator()
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 2
    assert "new" not in running.log() and "b2xk" not in running.log()


def test_annotation_and_label_changes_restart_nothing(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("api", {"password": "x"}, window_open_now()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("api")]))
    operator()
    baseline(core, namespace, "api")
    core.patch_namespaced_secret(
        "api",
        namespace,
        {
            "metadata": {
                "annotations": {"cert-manager.io/issuer-name": "other"},
                "labels": {"team": "a"},
            }
        },
    )
    time.sleep(TICKS)
    assert pending(apps, namespace, "web") == {}
    assert len(replica_sets(apps, namespace, "web")) == 1


def test_two_secrets_changed_give_one_restart_and_paused_stays_pending(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    for name in ("first", "second"):
        core.create_namespaced_secret(namespace, secret(name, {"password": "a"}, window_open_now()))
    apps.create_namespaced_deployment(
        namespace,
        deployment(
            "web",
            env=[
                env_from_secret("first"),
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "second", "key": "password"}}},
            ],
        ),
    )
    rollout_finished(cluster, namespace, "web")
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"paused": True}})
    operator()
    baseline(core, namespace, "first")
    baseline(core, namespace, "second")

    change_data(core, namespace, "first", "b")
    change_data(core, namespace, "second", "b")
    wait_for(lambda: len(pending(apps, namespace, "web")) == 4, 20, message="two marks")
    wait_for(
        lambda: events(core, namespace, "web", "RestartDeferred"),
        20,
        message="an Event saying the Deployment is paused",
    )
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1

    cluster.kubectl("-n", namespace, "rollout", "resume", "deployment/web")
    wait_for(lambda: pending(apps, namespace, "web") == {}, 30, message="marks cleared")
    rollout_finished(cluster, namespace, "web")
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 2
    assert len(events(core, namespace, "web", "Restarted")) == 1


def test_change_while_operator_is_down_is_restarted_after_start(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    secret_and_dependent(core, apps, namespace, window_open_now())
    first = operator()
    baseline(core, namespace, "db")
    first.stop()

    change_data(core, namespace, "db", "changed-while-down")
    time.sleep(1)
    assert pending(apps, namespace, "web") == {}
    operator()
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart after start-up"
    )
    rollout_finished(cluster, namespace, "web")
