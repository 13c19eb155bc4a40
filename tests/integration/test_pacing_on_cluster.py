"""Pacing on the real control plane: K in flight by kubectl's rollout rules, R per minute,
RestartDeferred when a window closes first, and an operator killed mid-pacing."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes
import pytest

from restarter.model import keys
from restarter.restarting.rollouts import Progress, progress
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
from tests.integration.test_operator_restarts import baseline, change_data, events

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

#: A node selector no kwok node matches: the new pod stays Pending, the rollout never ends.
NOWHERE = {"restarter-test/never": "scheduled"}


class Rollouts:
    """The test's own watch: each Deployment's restartedAt values and restart-ts, and the
    most restarts by restarter whose rollout was incomplete (kubectl's rules) at once,
    counting a rollout until it completes or its rollout timeout passes."""

    def __init__(
        self, api_client: kubernetes.client.ApiClient, namespace: str, timeout: float
    ) -> None:
        self.api_client, self.namespace, self.timeout = api_client, namespace, timeout
        self.restarted_at: dict[str, set[str]] = defaultdict(set)
        self.restart_ts: dict[str, set[int]] = defaultdict(set)
        self.incomplete: dict[str, int] = {}  # name → restart-ts
        self.completed: dict[str, set[int]] = defaultdict(set)
        self.max_in_flight = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Rollouts:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()

    def _run(self) -> None:
        apps = kubernetes.client.AppsV1Api(self.api_client)
        watch = kubernetes.watch.Watch()
        for event in watch.stream(
            apps.list_namespaced_deployment, self.namespace, timeout_seconds=900
        ):
            body = self.api_client.sanitize_for_serialization(event["object"])
            name = body["metadata"]["name"]
            template = (body["spec"]["template"].get("metadata") or {}).get("annotations") or {}
            restart_ts = (body["metadata"].get("annotations") or {}).get(keys.RESTART_TS)
            with self._lock:
                if keys.RESTARTED_AT in template:
                    self.restarted_at[name].add(template[keys.RESTARTED_AT])
                # A rollout counts until it first completes (as kubectl rollout status
                # waits); a later dip in availability is not the restart's rollout.
                if restart_ts and int(restart_ts) not in self.completed[name]:
                    self.restart_ts[name].add(int(restart_ts))
                    if progress("deployments", body) is Progress.COMPLETE:
                        self.incomplete.pop(name, None)
                        self.completed[name].add(int(restart_ts))
                    else:
                        self.incomplete[name] = int(restart_ts)
                now = time.time()
                holding = [ts for ts in self.incomplete.values() if now - ts < self.timeout]
                self.max_in_flight = max(self.max_in_flight, len(holding))
            if self._stop.is_set():
                watch.stop()

    def restarted(self) -> set[str]:
        with self._lock:
            return set(self.restarted_at)

    def starts(self) -> list[int]:
        with self._lock:
            return sorted(ts for values in self.restart_ts.values() for ts in values)


@pytest.fixture
def rollouts(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> Iterator[Callable[..., Rollouts]]:
    """Factory: ``rollouts(timeout)`` starts the watch (timeout: the operator's setting)."""
    started: list[Rollouts] = []

    def start(timeout: float = 600.0) -> Rollouts:
        started.append(Rollouts(api_client, namespace, timeout).__enter__())
        return started[-1]

    yield start
    for watch in started:
        watch.__exit__()


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


def test_the_start_rate_stays_under_r_per_minute(
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    rollouts: Callable[..., Rollouts],
) -> None:
    names = [f"app-{i}" for i in range(5)]
    core.create_namespaced_secret(namespace, secret("cert", {"tls.key": "a"}, window_open_now()))
    create_dependents(apps, namespace, names)
    operator("--max-in-flight", "0", "--max-per-minute", "3")
    baseline(core, namespace, "cert")
    watch = rollouts()
    change_data(core, namespace, "cert", "b")
    wait_for(lambda: len(watch.restarted()) == 3, 30, message="the first three restarts")
    time.sleep(5)
    assert len(watch.restarted()) == 3  # the fourth waits for the minute to pass
    wait_for(lambda: watch.restarted() == set(names), 120, message="all five restarted")
    starts = watch.starts()
    print(f"\nstarts (s after the first): {[ts - starts[0] for ts in starts]}")
    assert len(starts) == 5
    # Any four consecutive starts span at least a minute (restart-ts has whole seconds).
    assert all(starts[i + 3] - starts[i] >= 59 for i in range(len(starts) - 3))


def test_a_window_that_closes_first_defers_the_rest_to_the_next_window(
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    rollouts: Callable[..., Rollouts],
) -> None:
    # Windows open at every minute for 15 s; one slot. Neither rollout ever completes, so
    # whichever of the two ticks first at the window's start holds the slot past the
    # window's close (the rollout timeout, 20 s), and the other cannot start in it.
    window = {keys.CRON: "* * * * *", keys.WINDOW_LENGTH: "15s"}
    names = {"a-stuck", "b-stuck"}
    core.create_namespaced_secret(namespace, secret("cert", {"tls.key": "a"}, "cron", window))
    create_dependents(apps, namespace, sorted(names), frozenset(names))
    operator("--max-in-flight", "1", "--rollout-timeout", "20s")
    baseline(core, namespace, "cert")
    watch = rollouts(20)
    change_data(core, namespace, "cert", "b")
    started = wait_for(lambda: watch.restarted(), 75, message="one restarted first")
    assert len(started) == 1, started
    [took_the_slot] = started
    first = dt.datetime.now(dt.UTC)
    [waiting] = names - {took_the_slot}
    [deferred] = wait_for(
        lambda: events(core, namespace, waiting, "RestartDeferred"), 30, message="RestartDeferred"
    )
    assert "window closed before pacing let the restart start" in deferred.message
    assert "1 restarts in flight (limit 1)" in deferred.message
    assert waiting not in watch.restarted()
    marks = apps.read_namespaced_deployment(waiting, namespace).metadata.annotations
    assert keys.pending_key("secret", "cert") in marks  # still pending
    wait_for(lambda: waiting in watch.restarted(), 90, message="restarted in the next window")
    [restarted_at] = watch.restarted_at[waiting]
    later = dt.datetime.strptime(restarted_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert later.replace(second=0) > first.replace(second=0, microsecond=0)  # a later minute
    assert later.second < 15  # inside that occurrence
    assert len(watch.restarted_at[took_the_slot]) == 1


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
