"""Pacing on the real control plane: K in flight by kubectl's rollout rules, R per minute,
RestartDeferred when a window closes first, and an operator killed mid-pacing."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import kubernetes

from restarter.model import keys
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
from tests.integration.rollouts_watch import Rollouts
from tests.integration.test_operator_restarts import baseline, change_data, events

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

#: A node selector no kwok node matches: the new pod stays Pending, the rollout never ends.
NOWHERE = {"restarter-test/never": "scheduled"}


def create_dependents(
    apps: Apps, namespace: str, names: list[str], stuck: frozenset[str] = frozenset()
) -> None:
    """Deployments of one replica using Secret ``cert``; the pods of ``stuck`` are never
    scheduled, so none of their rollouts ever completes."""

    def create(name: str) -> None:
        body = deployment(name, env=[env_from_secret("cert")], replicas=1)
        if name in stuck:
            body["spec"]["template"]["spec"]["nodeSelector"] = NOWHERE
        apps.create_namespaced_deployment(namespace, body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, names))


def all_ready(apps: Apps, namespace: str, names: list[str]) -> bool:
    bodies = {d.metadata.name: d for d in apps.list_namespaced_deployment(namespace).items}
    return all(
        (bodies[name].status.available_replicas or 0) == 1
        and (bodies[name].status.updated_replicas or 0) == 1
        and bodies[name].status.observed_generation == bodies[name].metadata.generation
        for name in names
    )


def replica_set_counts(apps: Apps, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for rs in apps.list_namespaced_replica_set(namespace).items:
        counts[rs.metadata.owner_references[0].name] += 1
    return dict(counts)


def test_sixty_due_at_once_restart_at_most_ten_at_a_time_each_once(
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    rollouts: Callable[..., Rollouts],
) -> None:
    names = [f"app-{i:02d}" for i in range(60)]
    stuck = frozenset({"app-00", "app-01"})  # first by name: two slots held until the timeout
    core.create_namespaced_secret(namespace, secret("cert", {"tls.key": "a"}, window_open_now()))
    create_dependents(apps, namespace, names, stuck)
    ready = [name for name in names if name not in stuck]
    wait_for(lambda: all_ready(apps, namespace, ready), 120, message="58 Deployments ready")
    operator("--max-in-flight", "10", "--max-per-minute", "0", "--rollout-timeout", "60s")
    recorded = baseline(core, namespace, "cert")
    watch = rollouts(60)
    started = time.monotonic()
    change_data(core, namespace, "cert", "b")
    wait_for(lambda: watch.restarted() == set(names), 240, message="all 60 restarted")
    took = time.monotonic() - started
    wait_for(
        lambda: all(events(core, namespace, name, "RolloutStalled") for name in stuck),
        60,
        message="RolloutStalled on the two Deployments whose pods never get Ready",
    )
    print(f"\n60 restarts with K=10: {took:.1f}s, most in flight seen {watch.max_in_flight}")
    assert watch.max_in_flight <= 10
    assert watch.max_in_flight >= 5  # pacing was what held them back, not a slow operator
    for name in names:
        assert len(watch.restarted_at[name]) == 1, (name, watch.restarted_at[name])
    [stalled] = events(core, namespace, "app-00", "RolloutStalled")
    assert stalled.type == "Warning"
    assert "not complete 60s after the restart" in stalled.message
    assert core.read_namespaced_secret("cert", namespace).metadata.annotations[keys.CHECKSUM] != (
        recorded
    )
    wait_for(
        lambda: replica_set_counts(apps, namespace) == dict.fromkeys(names, 2),
        60,
        message="one new ReplicaSet each",
    )


def test_an_operator_killed_mid_pacing_loses_and_repeats_no_restart(
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    rollouts: Callable[..., Rollouts],
) -> None:
    names = [f"app-{i:02d}" for i in range(20)]
    core.create_namespaced_secret(namespace, secret("cert", {"tls.key": "a"}, window_open_now()))
    create_dependents(apps, namespace, names)
    wait_for(lambda: all_ready(apps, namespace, names), 90, message="Deployments ready")
    flags = ("--max-in-flight", "3", "--max-per-minute", "0")
    first = operator(*flags)
    baseline(core, namespace, "cert")
    watch = rollouts()
    change_data(core, namespace, "cert", "b")
    wait_for(lambda: len(watch.restarted()) >= 6, 90, message="six restarts")
    assert first.process is not None
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    first.process = None
    killed_at = len(watch.restarted())
    operator(*flags)
    wait_for(lambda: watch.restarted() == set(names), 180, message="all 20 restarted")
    print(f"\nkilled after {killed_at} of 20 restarts; most in flight {watch.max_in_flight}")
    for name in names:
        assert len(watch.restarted_at[name]) == 1, (name, watch.restarted_at[name])
    # The restarted operator found the rollouts still in flight from the cluster.
    assert watch.max_in_flight <= 3
