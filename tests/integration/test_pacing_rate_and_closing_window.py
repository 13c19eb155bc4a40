"""Pacing on the cluster, the parts that take minutes: the per-minute start rate and a window that
closes before pacing lets a restart start (moved here from test_pacing_on_cluster.py so the two
run beside the others; each proves what it did there)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import kubernetes

from restarter.model import keys
from tests.conftest import Operator, wait_for
from tests.integration.factories import secret, window_open_now
from tests.integration.rollouts_watch import Rollouts
from tests.integration.test_operator_restarts import baseline, change_data, events
from tests.integration.test_pacing_on_cluster import create_dependents

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


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
