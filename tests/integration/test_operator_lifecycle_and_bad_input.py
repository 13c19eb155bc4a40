"""The operator stopped, restarted and fed bad or vanishing input: marks kept, finalizers released,
bad windows warned about, deleted Secrets and Deployments handled (moved here from
test_operator_restarts.py so they run beside its other tests; each proves what it did there)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import kubernetes
import pytest

from restarter.model import keys
from tests.conftest import Operator, wait_for
from tests.integration.factories import (
    deployment,
    env_from_secret,
    secret,
    window_hours_away,
    window_open_now,
)
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    secret_and_dependent,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


def test_marks_survive_an_operator_restart(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    secret_and_dependent(core, apps, namespace, window_hours_away(5))
    first = operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    marks = wait_for(lambda: pending(apps, namespace, "web"), 20, message="marks")
    first.stop()
    operator()
    time.sleep(TICKS)
    assert pending(apps, namespace, "web") == marks
    assert len(replica_sets(apps, namespace, "web")) == 1


@pytest.mark.parametrize("bad_window", ["25.00", "3.5", "abc", ""])
def test_bad_window_warns_on_the_secret_and_other_secrets_keep_working(
    bad_window: str, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("bad", {"password": "a"}, bad_window))
    core.create_namespaced_secret(
        namespace, secret("good", {"password": "a"}, window_hours_away(5))
    )
    apps.create_namespaced_deployment(
        namespace, deployment("uses-bad", env=[env_from_secret("bad")])
    )
    apps.create_namespaced_deployment(
        namespace, deployment("uses-good", env=[env_from_secret("good")])
    )
    operator()
    baseline(core, namespace, "good")
    change_data(core, namespace, "bad", "b")
    change_data(core, namespace, "good", "b")
    warnings = wait_for(
        lambda: events(core, namespace, "bad", "InvalidWindow"),
        20,
        message="a Warning Event on the Secret",
    )
    assert warnings[0].type == "Warning"
    assert "HH.MM" in warnings[-1].message
    wait_for(lambda: pending(apps, namespace, "uses-good"), 20, message="good Secret stamped")
    assert pending(apps, namespace, "uses-bad") == {}


def paused_dependent(core: Core, apps: Apps, namespace: str) -> None:
    """Secret ``db`` in a window open now and ``web`` reading it, paused: once stamped it is
    due at once and stays pending, held by its timer (label and finalizer), until resumed."""
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    body = deployment("web", env=[env_from_secret("db")], paused=True)
    apps.create_namespaced_deployment(namespace, body)


def holds_finalizer(apps: Apps, namespace: str, name: str) -> bool:
    finalizers = apps.read_namespaced_deployment(name, namespace).metadata.finalizers
    return keys.FINALIZER in (finalizers or [])


def test_deleting_a_pending_deployment_does_not_hang(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    paused_dependent(core, apps, namespace)
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: holds_finalizer(apps, namespace, "web"), 20, message="timer finalizer")
    apps.delete_namespaced_deployment("web", namespace)

    def gone() -> bool:
        return not [
            d for d in apps.list_namespaced_deployment(namespace).items if d.metadata.name == "web"
        ]

    wait_for(gone, 30, message="deletion of the pending Deployment")


def test_deleted_secret_restarts_nothing(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    secret_and_dependent(core, apps, namespace, window_open_now())
    operator()
    baseline(core, namespace, "db")
    core.delete_namespaced_secret("db", namespace)
    time.sleep(TICKS)
    assert pending(apps, namespace, "web") == {}
    assert len(replica_sets(apps, namespace, "web")) == 1


def test_stopping_the_operator_releases_the_finalizer_but_keeps_the_marks(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    paused_dependent(core, apps, namespace)
    running = operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")

    def finalizers() -> list[str]:
        return apps.read_namespaced_deployment("web", namespace).metadata.finalizers or []

    wait_for(lambda: keys.FINALIZER in finalizers(), 20, message="timer finalizer")
    marks = pending(apps, namespace, "web")
    running.stop()
    assert keys.FINALIZER not in finalizers()
    assert pending(apps, namespace, "web") == marks
    operator()
    wait_for(lambda: keys.FINALIZER in finalizers(), 20, message="finalizer back after start")
    # Paused and pending, it would keep a cluster-wide operator of a later test busy in a
    # namespace being deleted (its Events there refused).
    apps.delete_namespaced_deployment("web", namespace)


def test_a_secret_recreated_with_new_data_schedules_a_restart(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    far = window_hours_away(5)
    secret_and_dependent(core, apps, namespace, far)
    operator()
    baseline(core, namespace, "db")
    core.delete_namespaced_secret("db", namespace)
    core.create_namespaced_secret(namespace, secret("db", {"password": "recreated"}, far))
    marks = wait_for(lambda: pending(apps, namespace, "web"), 20, message="marks after re-create")
    assert json.loads(marks[keys.window_key("secret", "db")])["at"] == far
