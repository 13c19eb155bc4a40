"""Workloads that opt in with ``restarter.io/restart-at`` on the real control plane: a
change of a source they use restarts them in their own window, labelled source or not;
workloads that did not opt in are left alone; unrelated sources are never read or written;
and when a labelled source and the workload both give a window, the workload's wins."""

from __future__ import annotations

import json
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
)
from tests.integration.test_operator_restarts import (
    annotations_of,
    events,
    pending,
    replica_sets,
    rollout_finished,
)
from tests.integration.test_plan_command import plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


def opted_in(name: str, window: str, source: str = "db", **extra: str) -> dict[str, Any]:
    return deployment(
        name,
        env=[env_from_secret(source)],
        annotations={keys.WORKLOAD_RESTART_AT: window, **extra},
    )


def source_annotations(core: Core, namespace: str, name: str) -> dict[str, str]:
    return core.read_namespaced_secret(name, namespace).metadata.annotations or {}


def change_detected(core: Core, namespace: str, name: str, count: int) -> list[Any]:
    """Wait for the ``count``-th ChangeDetected Event on the source: posted once every
    stamp of that change was answered, so what it did not stamp, it never will."""
    return wait_for(
        lambda: (
            (found := events(core, namespace, name, "ChangeDetected"))
            and len(found) >= count
            and found
        ),
        60,
        message=f"ChangeDetected #{count} on {name}",
    )


def window_mark(apps: Apps, namespace: str, name: str, source: str = "db") -> dict[str, Any]:
    value = annotations_of(apps, namespace, name)[keys.window_key("secret", source)]
    return dict(json.loads(value))


def test_an_unlabelled_source_restarts_only_the_workloads_that_opted_in_in_their_windows(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    far = window_hours_away(6)
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}))
    core.create_namespaced_secret(namespace, secret("unrelated", {"password": "one"}))
    apps.create_namespaced_deployment(namespace, opted_in("now-web", "now"))
    apps.create_namespaced_deployment(namespace, opted_in("later-web", far))
    apps.create_namespaced_deployment(namespace, deployment("plain", env=[env_from_secret("db")]))
    for name in ("now-web", "later-web", "plain"):
        rollout_finished(cluster, namespace, name)
    running = operator()
    # First sight of a wanted source: its checksum is recorded, nothing restarts.
    wait_for(
        lambda: keys.CHECKSUM in source_annotations(core, namespace, "db"), 30, message="baseline"
    )

    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    (detected,) = change_detected(core, namespace, "db", 1)
    assert "2 dependent workload(s) scheduled" in detected.message, detected.message
    assert "1 did not opt in for it" in detected.message, detected.message
    wait_for(lambda: len(replica_sets(apps, namespace, "now-web")) == 2, 30, message="restart")
    rollout_finished(cluster, namespace, "now-web")

    # The one that did not opt in: never stamped, never restarted.
    assert pending(apps, namespace, "plain") == {}
    assert len(replica_sets(apps, namespace, "plain")) == 1
    # The far window: stamped with the workload's own window, waiting for it.
    assert len(replica_sets(apps, namespace, "later-web")) == 1
    mark = window_mark(apps, namespace, "later-web")
    assert (mark["at"], mark["from"], mark["source"]) == (far, "workload", "Secret/db")
    (scheduled,) = events(core, namespace, "later-web", "RestartScheduled")
    assert f"the workload's {keys.WORKLOAD_RESTART_AT}" in scheduled.message
    plan = plan_json(cluster.kubeconfig, "-n", namespace)
    assert [(row["name"], row["windowFrom"]) for row in plan] == [("later-web", "workload")]
    # The unrelated Secret was never written.
    assert not [k for k in source_annotations(core, namespace, "unrelated") if "restarter" in k]
    # kopf watches no unlabelled source, yet restarter's lines about it name it as kopf's
    # do: a grep for the Secret finds what was done with it.
    log = running.log()
    assert f"[{namespace}/db] first sight: recorded the checksum" in log, log[-3000:]
    assert f"[{namespace}/db] data changed (" in log, log[-3000:]


def test_the_workloads_window_wins_over_the_labelled_sources(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    far = window_hours_away(6)
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}, far))
    apps.create_namespaced_deployment(namespace, opted_in("opted", "now"))
    apps.create_namespaced_deployment(namespace, deployment("plain", env=[env_from_secret("db")]))
    for name in ("opted", "plain"):
        rollout_finished(cluster, namespace, name)
    operator()
    wait_for(
        lambda: keys.CHECKSUM in source_annotations(core, namespace, "db"), 30, message="baseline"
    )

    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    change_detected(core, namespace, "db", 1)
    # The workload's "now" beats the label's far window; the other keeps the label's.
    wait_for(lambda: len(replica_sets(apps, namespace, "opted")) == 2, 30, message="restart")
    assert len(replica_sets(apps, namespace, "plain")) == 1
    mark = window_mark(apps, namespace, "plain")
    assert (mark["at"], mark.get("from", "source")) == (far, "source")
    restarted = events(core, namespace, "opted", "Restarted")
    assert len(restarted) == 1


def test_a_workload_that_opts_in_later_gets_the_next_change(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    rollout_finished(cluster, namespace, "web")
    operator()
    # Not wanted yet: restarter leaves the Secret alone.
    assert keys.CHECKSUM not in source_annotations(core, namespace, "db")

    apps.patch_namespaced_deployment(
        "web", namespace, {"metadata": {"annotations": {keys.WORKLOAD_RESTART_AT: "now"}}}
    )
    # Wanted now: checked at once, so the next change is a change, not a first sight.
    wait_for(
        lambda: keys.CHECKSUM in source_annotations(core, namespace, "db"), 30, message="baseline"
    )
    assert len(replica_sets(apps, namespace, "web")) == 1
    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart")
    (detected,) = change_detected(core, namespace, "db", 1)
    assert "Deployment web" in detected.message


def test_a_workload_window_restarter_cannot_read_is_a_warning_on_the_workload(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}))
    apps.create_namespaced_deployment(namespace, opted_in("bad", "25.00"))
    apps.create_namespaced_deployment(namespace, opted_in("good", "now"))
    operator()
    wait_for(
        lambda: keys.CHECKSUM in source_annotations(core, namespace, "db"), 30, message="baseline"
    )
    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    change_detected(core, namespace, "db", 1)
    (warning,) = wait_for(lambda: events(core, namespace, "bad", "InvalidWindow"), 30)
    assert warning.type == "Warning" and "25.00" in warning.message
    assert pending(apps, namespace, "bad") == {}
    wait_for(lambda: len(replica_sets(apps, namespace, "good")) == 2, 30, message="restart")
