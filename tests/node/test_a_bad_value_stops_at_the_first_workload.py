"""Waves, the circuit breaker and the quiet period on real containers: a Secret changed to a
value the app cannot run with restarts only its first workload, whose new pod crash-loops;
the change halts there, and the other apps keep running with the old value until the value
is fixed (or the change resumed). Two Secrets changed seconds apart make one restart.

The operator runs as a process (flags turn waves and the quiet period on); the apps run on
the real node, and what they printed is read from the node's pod logs."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from restarter_cluster.node import RealNode
from tests.conftest import REPO, Operator, wait_for
from tests.integration.factories import secret
from tests.integration.test_operator_restarts import (
    annotations_of,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
)
from tests.integration.test_plan_command import plan_json
from tests.node.conftest import app_deployment, printed, running_pods

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

#: The apps reading Secret ``db``: ``a-web`` comes first alphabetically, so it is the first wave.
FIRST, REST = "a-web", ("b-api", "c-worker")
SOAK = 5
WAVES = ("--first-wave", "1", "--soak", f"{SOAK}s", "--quiet", "0")
#: Prints the password it started with; cannot run with ``bad`` (exits 3 at once).
CHECKS_ITS_PASSWORD = 'echo "password=$PASSWORD"; if [ "$PASSWORD" = bad ]; then exit 3; fi'
#: How long the rest are watched, once the change halted, for a restart that must not come.
HELD_FOR = 30


def _live_pods(core: Core, namespace: str, selector: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [pod for pod in pods if pod.metadata.deletion_timestamp is None]


def _newest_replica_set(apps: Apps, namespace: str, app: str) -> Any:
    """The Deployment's ReplicaSet of its latest revision."""
    found = replica_sets(apps, namespace, app)
    revision = "deployment.kubernetes.io/revision"
    return max(found, key=lambda rs: int((rs.metadata.annotations or {}).get(revision, "0")))


def _pods_of_newest(core: Core, apps: Apps, namespace: str, app: str) -> list[Any]:
    """The live pods of the app's newest ReplicaSet (by its pod-template-hash)."""
    newest = _newest_replica_set(apps, namespace, app)
    template_hash = newest.metadata.labels["pod-template-hash"]
    return _live_pods(core, namespace, f"app={app},pod-template-hash={template_hash}")


def _ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _ready_since(pod: Any) -> dt.datetime:
    (ready,) = [c for c in pod.status.conditions or [] if c.type == "Ready"]
    return ready.last_transition_time  # type: ignore[no-any-return]


def _crashing(pod: Any) -> str | None:
    """How the pod's app container fails: its waiting reason, or its restarts."""
    for status in pod.status.container_statuses or []:
        waiting = status.state.waiting.reason if status.state and status.state.waiting else None
        if waiting == "CrashLoopBackOff" or status.restart_count > 0:
            return f"{waiting or 'restarted'} ({status.restart_count} restarts)"
    return None


def _state(core: Core, apps: Apps, namespace: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Each app's ReplicaSets and pods with their phase and container states (for failures)."""
    found: dict[str, Any] = {}
    for name in names:
        found[name] = {
            "replica_sets": [rs.metadata.name for rs in replica_sets(apps, namespace, name)],
            "pods": [
                (
                    pod.metadata.name,
                    pod.status.phase,
                    [
                        (s.restart_count, str(s.state.waiting.reason if s.state.waiting else ""))
                        for s in pod.status.container_statuses or []
                    ],
                )
                for pod in _live_pods(core, namespace, f"app={name}")
            ],
        }
    return found


def _new_pod_printing(
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
    app: str,
    text: str,
    *,
    ready: bool,
    timeout: float = 90,
) -> Any:
    """Wait until a pod of the app's newest ReplicaSet printed ``text`` (and is Ready, or
    crash-loops); that pod."""

    def found() -> Any:
        for pod in _pods_of_newest(core, apps, namespace, app):
            if not printed(real_node, namespace, pod.metadata.name, text):
                continue
            if (ready and _ready(pod)) or (not ready and _crashing(pod)):
                return pod
        return None

    how = "Ready" if ready else "crash-looping"
    return wait_for(
        found,
        timeout,
        interval=1,
        message=f"a new pod of {app} printing {text!r}, {how}",
        describe=lambda: _state(core, apps, namespace, (app,)),
    )


def _the_one_pod_printing(
    core: Core, real_node: RealNode, namespace: str, app: str, text: str
) -> str:
    def one() -> str | None:
        pods = running_pods(core, namespace, app)
        if len(pods) == 1 and printed(real_node, namespace, pods[0].metadata.name, text):
            return str(pods[0].metadata.name)
        return None

    return str(wait_for(one, 120, interval=1, message=f"one {app} pod printing {text!r}"))


def _wave_record(core: Core, namespace: str, name: str = "db") -> dict[str, Any]:
    annotations = core.read_namespaced_secret(name, namespace).metadata.annotations or {}
    return dict(json.loads(annotations.get(keys.WAVE) or "{}"))


def _the_running_pod(core: Core, namespace: str, name: str) -> Any:
    """The app's one running pod, once the old one left (10 s after the new one is Ready:
    ``minReadySeconds``)."""

    def one() -> Any:
        pods = running_pods(core, namespace, name)
        return pods[0] if len(pods) == 1 else None

    return wait_for(one, 60, message=f"{name}'s one running pod")


def _three_apps_reading_db(
    core: Core, apps: Apps, real_node: RealNode, namespace: str
) -> dict[str, str]:
    """Secret ``db`` (restart-at=now) read from env by three apps on the real node; each
    app's one running pod, once it printed the first value."""
    core.create_namespaced_secret(namespace, secret("db", {"password": "good"}, "now"))
    for name in (FIRST, *REST):
        body = app_deployment(name, "db", script=CHECKS_ITS_PASSWORD)
        # A new pod counts as available once Ready for 10 s, as a readiness probe would
        # make it: the app exits at once on a bad value, but its container is Running and
        # Ready for an instant first, and without this the Deployment controller may take
        # that instant as available and scale the old pod down (seen in a clean-clone run).
        body["spec"]["minReadySeconds"] = 10
        apps.create_namespaced_deployment(namespace, body)
    return {
        name: _the_one_pod_printing(core, real_node, namespace, name, "password=good")
        for name in (FIRST, *REST)
    }


def _bad_value_halts_at_the_first(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
    first_pods: dict[str, str],
    held_for: float,
) -> None:
    """Change ``db`` to ``bad``; check that only the first app restarted and crash-loops,
    that the change halted there and says so, and that for ``held_for`` seconds the rest
    keep their one pod, running with the old value."""
    change_data(core, namespace, "db", "bad")

    crashing = _new_pod_printing(
        core, apps, real_node, namespace, FIRST, "password=bad", ready=False
    )
    assert crashing.metadata.name != first_pods[FIRST]
    halted = wait_for(
        lambda: events(core, namespace, "db", "ChangeHalted"),
        90,
        message="ChangeHalted on Secret db",
        describe=lambda: (_wave_record(core, namespace), _state(core, apps, namespace, (FIRST,))),
    )
    assert halted[0].type == "Warning"
    assert f"Deployment/{FIRST} failed" in halted[0].message
    assert crashing.metadata.name in halted[0].message  # the pod that failed
    assert f"restarter resume -n {namespace} secret/db" in halted[0].message
    record = _wave_record(core, namespace)
    assert (record["state"], record["first"], record["failed"]) == (
        "halted",
        [f"Deployment/{FIRST}"],
        f"Deployment/{FIRST}",
    )
    for name in REST:
        warned = wait_for(
            lambda name=name: events(core, namespace, name, "RestartHalted"),
            30,
            message=f"RestartHalted on {name}",
        )
        assert warned[0].type == "Warning"
        assert f"Deployment/{FIRST} failed" in warned[0].message
    rows = {row["name"]: row for row in plan_json(cluster.kubeconfig, "-n", namespace)}
    for name in REST:
        assert rows[name]["state"] == "halted", rows[name]

    # The rest are not restarted: one ReplicaSet, the same pod, still the old value.
    watched_until = time.monotonic() + held_for
    while time.monotonic() < watched_until:
        for name in REST:
            assert len(replica_sets(apps, namespace, name)) == 1, f"{name} restarted"
            pods = [p.metadata.name for p in _live_pods(core, namespace, f"app={name}")]
            assert pods == [first_pods[name]], f"{name}'s pods are {pods}"
        time.sleep(2)
    for name in REST:
        assert pending(apps, namespace, name), f"{name} keeps its marks"
        (pod,) = running_pods(core, namespace, name)
        assert pod.metadata.name == first_pods[name]
        assert _ready(pod)
        log = real_node.log(namespace, pod.metadata.name, "app")
        assert "password=good" in log and "bad" not in log, log
        assert events(core, namespace, name, "Restarted") == []
    assert len(replica_sets(apps, namespace, FIRST)) == 2  # restarted once, not again


def test_a_bad_value_halts_at_the_first_app_and_the_fix_reaches_all_three(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    first_pods = _three_apps_reading_db(core, apps, real_node, namespace)
    operator(*WAVES)
    baseline(core, namespace, "db")
    _bad_value_halts_at_the_first(
        cluster, core, apps, real_node, namespace, first_pods, held_for=HELD_FOR
    )

    change_data(core, namespace, "db", "fixed")
    # The fix goes to the app that failed first: it recovers, on a third ReplicaSet.
    recovered = _new_pod_printing(
        core, apps, real_node, namespace, FIRST, "password=fixed", ready=True
    )
    assert len(replica_sets(apps, namespace, FIRST)) == 3
    assert _wave_record(core, namespace)["first"] == [f"Deployment/{FIRST}"]
    # Then the rest, each exactly once, after the first stayed Ready for the soak time.
    for name in REST:
        new_pod = _new_pod_printing(
            core, apps, real_node, namespace, name, "password=fixed", ready=True
        )
        assert new_pod.metadata.name != first_pods[name]
        assert "bad" not in real_node.log(namespace, new_pod.metadata.name, "app")
        created = _newest_replica_set(apps, namespace, name).metadata.creation_timestamp
        soaked = _ready_since(recovered) + dt.timedelta(seconds=SOAK - 1)  # whole seconds
        assert created >= soaked, (name, created, _ready_since(recovered))
    record = _wave_record(core, namespace)
    assert record["state"] == "released", record
    assert any(
        f"first wave Deployment/{FIRST} healthy" in event.message
        for event in events(core, namespace, "db", "ChangeReleased")
    )
    time.sleep(5)
    for name in REST:
        assert len(replica_sets(apps, namespace, name)) == 2, f"{name} restarted once"
        assert not pending(apps, namespace, name)
        pod = _the_running_pod(core, namespace, name)
        assert printed(real_node, namespace, pod.metadata.name, "password=fixed")
    assert len(replica_sets(apps, namespace, FIRST)) == 3
    pod = _the_running_pod(core, namespace, FIRST)
    assert pod.metadata.name == recovered.metadata.name and _ready(pod)


def test_a_resumed_bad_value_reaches_the_rest_once(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    first_pods = _three_apps_reading_db(core, apps, real_node, namespace)
    operator(*WAVES)
    baseline(core, namespace, "db")
    _bad_value_halts_at_the_first(
        cluster, core, apps, real_node, namespace, first_pods, held_for=10
    )
    change = _wave_record(core, namespace)["change"]

    resumed = subprocess.run(
        [sys.executable, "-m", "restarter", "resume", "-n", namespace, "secret/db"],
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"change {change} resumed" in resumed.stdout
    annotations = core.read_namespaced_secret("db", namespace).metadata.annotations
    assert annotations[keys.RESUME] == change

    # What resume means: the rest restart with the value as it is, and crash like the first.
    for name in REST:
        new_pod = _new_pod_printing(
            core, apps, real_node, namespace, name, "password=bad", ready=False
        )
        assert new_pod.metadata.name != first_pods[name]
    released = wait_for(
        lambda: events(core, namespace, "db", "ChangeReleased"), 30, message="ChangeReleased"
    )
    assert any("resumed" in event.message for event in released)
    assert _wave_record(core, namespace)["state"] == "released"
    time.sleep(5)
    for name in REST:
        assert len(replica_sets(apps, namespace, name)) == 2, f"{name} restarted once"
        assert not pending(apps, namespace, name)
        # The old pod keeps serving: the rollout cannot finish with a pod that crashes.
        assert first_pods[name] in [p.metadata.name for p in running_pods(core, namespace, name)]
    assert len(replica_sets(apps, namespace, FIRST)) == 2


def test_two_secrets_changed_five_seconds_apart_restart_once_after_the_quiet_time(
    core: Core,
    apps: Apps,
    real_node: RealNode,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    core.create_namespaced_secret(namespace, secret("login", {"user": "ann"}, "now"))
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}, "now"))
    body = app_deployment("app", "db", script='echo "user=$APP_USER password=$PASSWORD"')
    (container,) = body["spec"]["template"]["spec"]["containers"]
    container["env"].append(
        {"name": "APP_USER", "valueFrom": {"secretKeyRef": {"name": "login", "key": "user"}}}
    )
    apps.create_namespaced_deployment(namespace, body)
    first_pod = _the_one_pod_printing(core, real_node, namespace, "app", "user=ann password=one")
    operator("--first-wave", "1", "--soak", f"{SOAK}s", "--quiet", "10s")
    baseline(core, namespace, "login")
    baseline(core, namespace, "db")

    core.patch_namespaced_secret(
        "login", namespace, {"stringData": {"user": "bob"}}
    )  # the first change
    mark = wait_for(
        lambda: annotations_of(apps, namespace, "app").get(keys.window_key("secret", "login")),
        30,
        message="the app marked pending for Secret login",
    )
    assert json.loads(mark)["quiet"] == 10
    time.sleep(5)
    assert len(replica_sets(apps, namespace, "app")) == 1, "restarted within the quiet time"
    change_data(core, namespace, "db", "two")
    second_change = dt.datetime.now(dt.UTC)

    new_pod = _new_pod_printing(
        core, apps, real_node, namespace, "app", "user=bob password=two", ready=True
    )
    assert new_pod.metadata.name != first_pod
    created = _newest_replica_set(apps, namespace, "app").metadata.creation_timestamp
    # Not before the second source had been quiet for 10 s (in whole seconds, both the
    # mark's time and the ReplicaSet's).
    assert created >= second_change + dt.timedelta(seconds=8), (created, second_change)
    time.sleep(5)
    assert len(replica_sets(apps, namespace, "app")) == 2  # exactly one restart
    assert len(events(core, namespace, "app", "Restarted")) == 1
    assert not pending(apps, namespace, "app")
    (pod,) = running_pods(core, namespace, "app")
    assert pod.metadata.name == new_pod.metadata.name
