"""Every connection the operator holds goes silently dead: no request waits it out.

The operator talks to the apiserver through the test's own forwarder. Once it is running
and idle (connections waiting in its pools), ``stall()`` makes every connection open at
that moment swallow what the operator sends next, with no answer and no close, as a
load balancer that forgot its idle connections (or an apiserver restarted behind a
virtual IP) leaves them; watches that are streaming keep streaming. New connections pass.

- A Secret whose window is hours away changes: every dependent carries its pending mark
  within ``BOUND`` seconds of the change (it took 30 s and more when a request waited out
  its read timeout on a dead connection), stamped once.
- Stalled again, a Secret whose window is open changes: every dependent is restarted
  (a new ReplicaSet from its ``restartedAt``) within ``BOUND`` seconds, once.
- The operator's log says which request got no answer and was tried again.

``pytest -s`` prints the seconds each took (``FAULT {...}``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.faults import NO_PACING
from tests.faults.ledger import Ledger, report
from tests.faults.test_sigkill_fan_out import replica_sets_per_owner
from tests.integration.factories import (
    deployment,
    env_from_secret,
    secret,
    window_hours_away,
    window_open_now,
)
from tests.integration.proxy import CuttableProxy
from tests.integration.test_operator_restarts import TICKS, baseline, change_data

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

DEPENDENTS = 5
#: Seconds from a change to its stamps (or restarts) on every dependent. A request on a
#: dead connection costs its first attempt's 5 s read timeout, then goes out again on a
#: new connection; a handful of requests in a row follow on live ones.
BOUND = 10.0
#: Seconds the test waits at most, so that a slow run still reports how slow it was.
PATIENCE = 150.0
#: Seconds of quiet before the stall, so the operator's start-up requests are done and
#: its connections wait idle in the pools.
IDLE = 3.0
NO_ANSWER = re.compile(r"\b(get|patch|list|create): no answer \(ReadTimeoutError")


@pytest.fixture
def proxied_kubeconfig(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[CuttableProxy, Path]]:
    """A kubeconfig whose server is the test's forwarder in front of the apiserver."""
    proxy = CuttableProxy(cluster.ports["apiserver"])
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield proxy, path
    proxy.close()


def dependents(apps: Apps, namespace: str, source: str) -> list[str]:
    names = [f"{source}-{index}" for index in range(DEPENDENTS)]
    for name in names:
        body = deployment(name, env=[env_from_secret(source)], replicas=0)
        apps.create_namespaced_deployment(namespace, body)
    return names


def seconds_until(predicate: Callable[[], bool], since: float) -> float:
    """Seconds from ``since`` until ``predicate`` held (polled every 0.1 s), or inf."""
    while time.monotonic() - since < PATIENCE:
        if predicate():
            return time.monotonic() - since
        time.sleep(0.1)
    return float("inf")


def test_dead_connections_delay_no_stamp_and_no_restart(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    api_client: kubernetes.client.ApiClient,
    namespace: str,
    tmp_path: Path,
    proxied_kubeconfig: tuple[CuttableProxy, Path],
) -> None:
    proxy, kubeconfig = proxied_kubeconfig
    core.create_namespaced_secret(namespace, secret("far", {"password": "a"}, window_hours_away()))
    core.create_namespaced_secret(namespace, secret("soon", {"password": "a"}, window_open_now()))
    far, soon = dependents(apps, namespace, "far"), dependents(apps, namespace, "soon")
    wait_for(
        lambda: sum(replica_sets_per_owner(apps, namespace).values()) == 2 * DEPENDENTS,
        60,
        message="a ReplicaSet per Deployment",
    )
    args = ["--namespace", namespace, "--timer-interval", "1", *NO_PACING]
    running = Operator(cluster, tmp_path / "operator.log", args, kubeconfig=kubeconfig).start()
    far_key, soon_key = keys.pending_key("secret", "far"), keys.pending_key("secret", "soon")

    def marked(names: list[str], key: str) -> bool:
        bodies = apps.list_namespaced_deployment(namespace).items
        found = {body.metadata.name for body in bodies if key in (body.metadata.annotations or {})}
        return set(names) <= found

    def restarted(names: list[str]) -> bool:
        bodies = apps.list_namespaced_deployment(namespace).items
        done = {
            body.metadata.name
            for body in bodies
            if keys.KUBECTL_RESTARTED_AT in (body.spec.template.metadata.annotations or {})
        }
        return set(names) <= done

    figures: dict[str, object] = {}
    with Ledger(api_client, namespace) as ledger:
        try:
            for name in ("far", "soon"):
                baseline(core, namespace, name)
            time.sleep(IDLE)

            figures["stalled_before_far"] = proxy.stall()
            changed = time.monotonic()
            change_data(core, namespace, "far", "b")
            far_seconds = seconds_until(lambda: marked(far, far_key), changed)
            figures["swallowed_far"] = proxy.swallowed

            figures["stalled_before_soon"] = proxy.stall()
            changed = time.monotonic()
            change_data(core, namespace, "soon", "b")
            soon_seconds = seconds_until(lambda: restarted(soon), changed)
            figures["swallowed"] = proxy.swallowed
            time.sleep(TICKS)  # a second restart or stamp, if any, would show by now
        finally:
            running.stop()
    log = running.log()
    retried = NO_ANSWER.findall(log)
    figures["far_stamped_after"] = round(far_seconds, 1)
    figures["soon_restarted_after"] = round(soon_seconds, 1)
    figures["no_answer_warnings"] = retried
    figures["connections_accepted"] = proxy.accepted
    report("every connection silently dead", figures)

    # The stall was real: requests went into dead connections, and the log says so.
    assert proxy.swallowed > 0, figures
    assert retried, log[-4000:]
    assert far_seconds <= BOUND, figures
    assert soon_seconds <= BOUND, figures
    # Nothing lost, nothing twice: one mark per far dependent, not restarted; one restart
    # per soon dependent, its marks gone, a second ReplicaSet from it.
    for name in far:
        assert ledger.marks[name] and {key for key, _ in ledger.marks[name]} == {far_key}
        assert len(ledger.marks[name]) == 1, ledger.marks[name]
        assert ledger.restarts_of(name) == []
    for name in soon:
        assert len(ledger.marks[name]) == 1 and {key for key, _ in ledger.marks[name]} == {
            soon_key
        }, ledger.marks[name]
        assert len(ledger.restarts_of(name)) == 1, ledger.restarts_of(name)
        assert not any(
            key.startswith(keys.PENDING_MARK)
            for key in apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}
        )

    def replica_sets_settled() -> bool:
        counts = replica_sets_per_owner(apps, namespace)
        return all(counts[name] == 1 for name in far) and all(counts[name] == 2 for name in soon)

    wait_for(replica_sets_settled, 60, message="2 ReplicaSets per soon-*, 1 per far-*")
