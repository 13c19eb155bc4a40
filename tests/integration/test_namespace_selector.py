"""``--namespace-selector`` on the real control plane: restarter acts only in namespaces
whose labels match, picks up a namespace labelled in (its pending restarts and the changes
made while it was out), and lets go of one labelled out (marks kept, finalizer removed,
nothing restarted there, its workloads deletable)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest

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
from tests.integration.test_holds import held_event, lift_namespace_hold
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    rollout_finished,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

#: The label the test operator's selector asks for; each test gets its own value.
LABEL = "selector-test"


@pytest.fixture
def selected() -> str:
    """This test's value of LABEL: only namespaces carrying it match its operator."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def selecting_operator(
    cluster: Cluster, tmp_path: Path, selected: str
) -> Iterator[Callable[[], Operator]]:
    """Factory: restarter watching the namespaces labelled ``LABEL=<selected>``."""
    started: list[Operator] = []

    def start() -> Operator:
        args = ["--namespace-selector", f"{LABEL}={selected}", "--timer-interval", "1"]
        instance = Operator(cluster, tmp_path / "operator.log", args).start()
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()
    for instance in started[:1]:
        print(instance.log()[-4000:])


@pytest.fixture
def other_namespace(core: Core, namespace: str) -> Iterator[str]:
    """A second namespace of the test's own, never labelled."""
    name = f"{namespace[:50]}-other"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def label_namespace(core: Core, namespace: str, value: str | None) -> None:
    core.patch_namespace(namespace, {"metadata": {"labels": {LABEL: value}}})


def finalizers(apps: Apps, namespace: str, name: str) -> list[str]:
    return apps.read_namespaced_deployment(name, namespace).metadata.finalizers or []


def restarted_at(apps: Apps, namespace: str, name: str) -> str | None:
    template = apps.read_namespaced_deployment(name, namespace).spec.template
    return (template.metadata.annotations or {}).get(keys.KUBECTL_RESTARTED_AT)


def checksum(core: Core, namespace: str, name: str) -> str | None:
    annotations = core.read_namespaced_secret(name, namespace).metadata.annotations or {}
    return annotations.get(keys.CHECKSUM)


@pytest.mark.parametrize("asked_by", ["label", "opt-in"])
def test_a_change_in_a_matching_namespace_is_stamped_and_one_elsewhere_is_ignored(
    asked_by: str,
    core: Core,
    apps: Apps,
    namespace: str,
    other_namespace: str,
    selected: str,
    selecting_operator: Callable[[], Operator],
) -> None:
    """The Secret labelled, or unlabelled and asked for by the workload's opt-in (the
    metadata watch of unlabelled sources)."""
    label_namespace(core, namespace, selected)
    window = window_hours_away()
    label, opt_in = (
        (window, {}) if asked_by == "label" else (None, {keys.WORKLOAD_RESTART_AT: window})
    )
    for each in (namespace, other_namespace):
        core.create_namespaced_secret(each, secret("db", {"password": "a"}, label))
        web = deployment("web", env=[env_from_secret("db")], annotations=opt_in)
        apps.create_namespaced_deployment(each, web)
    running = selecting_operator()
    baseline(core, namespace, "db")

    change_data(core, other_namespace, "db", "b")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: pending(apps, namespace, "web"), 30, message="web stamped in the matching one")
    time.sleep(TICKS)
    # Never read, never written: no checksum, no marks, no Events from restarter.
    assert checksum(core, other_namespace, "db") is None
    assert pending(apps, other_namespace, "web") == {}
    assert finalizers(apps, other_namespace, "web") == []
    assert events(core, other_namespace, "db", "ChangeDetected") == []
    assert f"namespace {namespace} matches" in running.log()
    assert other_namespace not in running.log()


def test_a_namespace_labelled_in_has_the_change_made_while_out_found_and_new_ones_seen(
    core: Core,
    apps: Apps,
    namespace: str,
    selected: str,
    selecting_operator: Callable[[], Operator],
) -> None:
    label_namespace(core, namespace, selected)
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    selecting_operator()
    baseline(core, namespace, "db")

    label_namespace(core, namespace, None)
    time.sleep(TICKS)  # the namespace watch sees it leave
    change_data(core, namespace, "db", "b")
    time.sleep(TICKS)
    assert pending(apps, namespace, "web") == {}
    assert events(core, namespace, "db", "ChangeDetected") == []

    label_namespace(core, namespace, selected)
    # Like a start-up there: the source is compared with the checksum recorded on it.
    wait_for(lambda: pending(apps, namespace, "web"), 30, message="the change made while out")
    wait_for(
        lambda: len(events(core, namespace, "db", "ChangeDetected")) == 1,
        20,
        message="ChangeDetected for the change made while out",
    )
    # Its window is hours away: it waits without a timer or finalizer.
    assert keys.FINALIZER not in finalizers(apps, namespace, "web")
    first = checksum(core, namespace, "db")

    change_data(core, namespace, "db", "c")
    wait_for(
        lambda: len(events(core, namespace, "db", "ChangeDetected")) == 2,
        30,
        message="ChangeDetected for a change after it came back",
    )
    assert checksum(core, namespace, "db") != first


def test_a_namespace_labelled_out_while_pending_keeps_the_marks_and_restarts_nothing(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    selected: str,
    selecting_operator: Callable[[], Operator],
) -> None:
    label_namespace(core, namespace, selected)
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    for name in ("web", "api"):
        apps.create_namespaced_deployment(namespace, deployment(name, env=[env_from_secret("db")]))
        rollout_finished(cluster, namespace, name)
        # Paused: due at once, it stays pending (with its timer) until resumed.
        apps.patch_namespaced_deployment(name, namespace, {"spec": {"paused": True}})
    selecting_operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    for name in ("web", "api"):
        wait_for(
            lambda name=name: keys.FINALIZER in finalizers(apps, namespace, name),
            30,
            message=f"{name} pending, with the finalizer",
        )
    marks = pending(apps, namespace, "web")
    assert marks

    label_namespace(core, namespace, None)
    for name in ("web", "api"):
        wait_for(
            lambda name=name: keys.FINALIZER not in finalizers(apps, namespace, name),
            20,
            message=f"the finalizer released from {name}",
        )
    assert pending(apps, namespace, "web") == marks
    apps.delete_namespaced_deployment("api", namespace)
    wait_for(
        lambda: (
            "api" not in {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}
        ),
        20,
        message="the pending Deployment api deleted",
    )
    cluster.kubectl("-n", namespace, "rollout", "resume", "deployment/web")
    time.sleep(TICKS)
    # Due and resumed, but out of scope: nothing restarts, nothing takes it back.
    assert restarted_at(apps, namespace, "web") is None
    assert pending(apps, namespace, "web") == marks
    assert finalizers(apps, namespace, "web") == []
    assert len(replica_sets(apps, namespace, "web")) == 1

    labelled_in = time.monotonic()
    label_namespace(core, namespace, selected)
    wait_for(
        lambda: restarted_at(apps, namespace, "web"),
        30,
        message="the pending restart done once the namespace matches again",
    )
    picked_up = time.monotonic() - labelled_in
    print(f"namespace labelled in → pending restart done in {picked_up:.1f}s (timer 1 s)")
    assert pending(apps, namespace, "web") == {}
    assert len(events(core, namespace, "web", "Restarted")) == 1
    wait_for(lambda: finalizers(apps, namespace, "web") == [], 20, message="finalizer gone")
    rollout_finished(cluster, namespace, "web")
    assert len(replica_sets(apps, namespace, "web")) == 2


def test_a_hold_set_on_a_watched_namespace_holds_its_due_restart_until_removed(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    selected: str,
    selecting_operator: Callable[[], Operator],
) -> None:
    """Cluster-wide, a Namespace's hold comes from the namespace watch: set after the
    operator started, it holds the due restart; removed, the restart follows."""
    label_namespace(core, namespace, selected)
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    rollout_finished(cluster, namespace, "web")
    selecting_operator()
    baseline(core, namespace, "db")
    core.patch_namespace(namespace, {"metadata": {"annotations": {keys.HOLD: "change freeze"}}})
    time.sleep(TICKS)  # the namespace watch sees the hold
    change_data(core, namespace, "db", "b")
    message = held_event(core, namespace, "web")
    assert f"held by {keys.HOLD} on namespace {namespace}: change freeze" in message
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1
    assert pending(apps, namespace, "web")
    lift_namespace_hold(core, apps, namespace)
