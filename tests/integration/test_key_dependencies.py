"""Key-level dependencies on the real control plane: a change restarts only the workloads
that read a changed key, and a checksum recorded alone restarts nothing while the data
matches it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from restarter.model import keys
from restarter.model.checksums import checksum
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, encoded, secret
from tests.integration.test_operator_restarts import (
    TICKS,
    annotations_of,
    events,
    replica_sets,
    rollout_finished,
)
from tests.integration.test_reference_map_on_cluster import DeploymentHistory

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

TOKEN = keys.source_token("secret", "creds")


def readers_of_creds() -> dict[str, dict[str, Any]]:
    """Four Deployments of Secret creds: keyRef a, volume items b, envFrom, whole volume."""
    key_ref = {"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "a"}}}
    items = {"secretName": "creds", "items": [{"key": "b", "path": "b"}]}
    env_from = deployment("env-from")
    env_from["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"secretRef": {"name": "creds"}}
    ]
    return {
        "key-ref-a": deployment("key-ref-a", env=[key_ref]),
        "items-b": deployment("items-b", volumes=[{"name": "b", "secret": items}]),
        "env-from": env_from,
        "volume": deployment(
            "volume", volumes=[{"name": "all", "secret": {"secretName": "creds"}}]
        ),
    }


def digests_of(core: Core, namespace: str, name: str) -> dict[str, Any]:
    annotations = core.read_namespaced_secret(name, namespace).metadata.annotations or {}
    value = annotations.get(keys.KEY_DIGESTS)
    return {} if value is None else dict(json.loads(value), recorded=annotations[keys.CHECKSUM])


def restarted_events(core: Core, namespace: str, name: str) -> int:
    return sum(event.count or 1 for event in events(core, namespace, name, "Restarted"))


def test_a_change_restarts_exactly_the_readers_of_a_changed_key_once_each(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    values = {"a": "value-a1", "b": "value-b1", "c": "value-c1"}
    core.create_namespaced_secret(namespace, secret("creds", values, "now"))
    workloads = readers_of_creds()
    for body in workloads.values():
        apps.create_namespaced_deployment(namespace, body)
    for name in workloads:
        rollout_finished(cluster, namespace, name)
    expected = dict.fromkeys(workloads, 1)  # ReplicaSets of each Deployment

    with DeploymentHistory(apps, namespace) as history:
        operator()
        first = wait_for(lambda: digests_of(core, namespace, "creds"), 30, message="digests")
        assert set(first["digests"]) == {"a", "b", "c"}
        assert first["checksum"] == first["recorded"]

        steps: list[tuple[dict[str, Any], str, set[str]]] = [
            ({"data": encoded({"b": "value-b2"})}, "key b", {"items-b", "env-from", "volume"}),
            ({"data": encoded({"d": "value-d1"})}, "key d", {"env-from", "volume"}),
            ({"data": {"c": None}}, "key c", {"env-from", "volume"}),
        ]
        for number, (patch, named, restarted) in enumerate(steps, start=1):
            core.patch_namespaced_secret("creds", namespace, patch)
            for name in restarted:
                expected[name] += 1
            wait_for(
                lambda restarted=restarted: all(
                    len(replica_sets(apps, namespace, name)) == expected[name] for name in restarted
                ),
                60,
                message=f"the restarts for {named}",
            )
            for name in restarted:
                rollout_finished(cluster, namespace, name)
            time.sleep(TICKS)
            # What a user sees: one new ReplicaSet and one Restarted Event per change read.
            for name in workloads:
                assert len(replica_sets(apps, namespace, name)) == expected[name], (named, name)
                assert restarted_events(core, namespace, name) == expected[name] - 1, (named, name)
                assert not [
                    k
                    for k in annotations_of(apps, namespace, name)
                    if k.startswith(keys.MARK_PREFIXES)
                ]
            detected = events(core, namespace, "creds", "ChangeDetected")
            assert len(detected) == number
            assert any(f"data changed ({named})" in event.message for event in detected)
            for name in restarted:
                scheduled = events(core, namespace, name, "RestartScheduled")
                assert any(f"Secret creds changed ({named})" in e.message for e in scheduled)
                restarted_for = json.loads(
                    annotations_of(apps, namespace, name)[keys.RESTARTED_FOR]
                )
                assert set(restarted_for) == {TOKEN}
            recorded = digests_of(core, namespace, "creds")
            assert recorded["checksum"] == recorded["recorded"]
            assert recorded["salt"] == first["salt"]  # kept: equal values, equal digests
            annotations = core.read_namespaced_secret("creds", namespace).metadata.annotations
            assert set(annotations) == {keys.CHECKSUM, keys.KEY_DIGESTS}  # the change is done

        assert set(digests_of(core, namespace, "creds")["digests"]) == {"a", "b", "d"}
        time.sleep(TICKS)

    stamped = {keys.pending_key("secret", "creds"), keys.window_key("secret", "creds")}
    assert {
        name: history.marks[name] for name in ("items-b", "env-from", "volume")
    } == dict.fromkeys(("items-b", "env-from", "volume"), stamped)
    # The keyRef-a Deployment was never stamped, never restarted.
    assert history.marks["key-ref-a"] == set()
    assert history.restarted_at["key-ref-a"] == set()
    assert len(replica_sets(apps, namespace, "key-ref-a")) == 1
    assert keys.RESTART_TS not in annotations_of(apps, namespace, "key-ref-a")
    # Each restart of the others was one rollout of its own: one restartedAt per change read.
    assert {name: len(history.restarted_at[name]) for name in workloads} == {
        "key-ref-a": 0,
        "items-b": 1,
        "env-from": 3,
        "volume": 3,
    }
    # Names of keys, never values, in any Event of the namespace.
    messages = [event.message for event in core.list_namespaced_event(namespace).items]
    for value in ("value-a1", "value-b1", "value-b2", "value-c1", "value-d1"):
        assert not [m for m in messages if value in m or encoded({"v": value})["v"] in m]


@pytest.mark.parametrize("changed_while_down", [False, True], ids=["unchanged", "changed"])
def test_a_checksum_recorded_alone(
    changed_while_down: bool,
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    """Only restarter.io/checksum, as restarter records it when the digests have no room or
    are refused: if the data still matches, digests are recorded and nothing restarts; if it
    changed meanwhile, which keys is unknown, so every dependent restarts (the keyRef-a one
    too)."""
    values = {"a": "value-a1", "b": "value-b1", "c": "value-c1"}
    recorded_then = checksum(encoded({**values, "b": "value-b0"} if changed_while_down else values))
    core.create_namespaced_secret(
        namespace, secret("creds", values, "now", {keys.CHECKSUM: recorded_then})
    )
    workloads = readers_of_creds()
    for body in workloads.values():
        apps.create_namespaced_deployment(namespace, body)
    for name in workloads:
        rollout_finished(cluster, namespace, name)

    with DeploymentHistory(apps, namespace) as history:
        operator()
        recorded = wait_for(lambda: digests_of(core, namespace, "creds"), 30, message="digests")
        assert set(recorded["digests"]) == {"a", "b", "c"}
        assert recorded["checksum"] == recorded["recorded"] == checksum(encoded(values))
        if changed_while_down:
            wait_for(
                lambda: all(len(replica_sets(apps, namespace, n)) == 2 for n in workloads),
                60,
                message="every dependent restarted",
            )
            for name in workloads:
                rollout_finished(cluster, namespace, name)
        time.sleep(TICKS)
        for name in workloads:
            assert len(replica_sets(apps, namespace, name)) == (2 if changed_while_down else 1)
            assert restarted_events(core, namespace, name) == (1 if changed_while_down else 0)
        if not changed_while_down:
            assert all(not history.marks[name] for name in workloads)
            assert not events(core, namespace, "creds", "ChangeDetected")

        # From now on changes name their keys: a change of c restarts the key readers of c.
        core.patch_namespaced_secret("creds", namespace, {"data": encoded({"c": "value-c2"})})
        base = 2 if changed_while_down else 1
        wait_for(
            lambda: all(
                len(replica_sets(apps, namespace, n)) == base + 1 for n in ("env-from", "volume")
            ),
            60,
            message="the restarts for key c",
        )
        time.sleep(TICKS)
        assert len(replica_sets(apps, namespace, "key-ref-a")) == base
        assert len(replica_sets(apps, namespace, "items-b")) == base
