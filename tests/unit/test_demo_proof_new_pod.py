"""The demo's proof reads a pod of the Deployment's current ReplicaSet, never the old pod
still running beside it, and fails when that pod printed the old value or no restart came."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hack import demo_proof
from hack.demo_proof import ProofFailed, prove_new_pod

UID = "d-uid"


def deployment(revision: str, *, rolled_out: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"uid": UID, "generation": 2, "annotations": {demo_proof.REVISION: revision}},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 2,
            "updatedReplicas": 1 if rolled_out else 0,
            "availableReplicas": 1,
        },
    }


def replica_set(hash_: str, revision: str, owner: str = UID) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"shop-{hash_}",
            "labels": {demo_proof.TEMPLATE_HASH: hash_},
            "annotations": {demo_proof.REVISION: revision},
            "ownerReferences": [{"uid": owner}],
        }
    }


def pod(name: str, hash_: str, *, deleting: bool = False) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {demo_proof.TEMPLATE_HASH: hash_},
            "deletionTimestamp": "2026-12-07T10:00:00Z" if deleting else None,
        },
        "status": {"phase": "Running"},
    }


@dataclass
class FakeCluster:
    """A cluster frozen in one state: a Deployment, its ReplicaSets and pods, their logs."""

    found: dict[str, Any]
    replica_sets: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    logs: dict[str, str]
    read: list[str] = field(default_factory=list)

    def objects(self, namespace: str, name: str) -> tuple[Any, list[Any], list[Any]]:
        return self.found, self.replica_sets, self.pods

    def log(self, namespace: str, pod: str, container: str) -> str:
        self.read.append(pod)
        return self.logs[pod]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def prove(cluster: FakeCluster, *, timeout: float = 10) -> str:
    clock = Clock()
    return prove_new_pod(
        cluster,
        "demo",
        "shop",
        "shop",
        before="aaa",
        prints="password=second",
        not_prints="first",
        timeout=timeout,
        clock=clock,
        pause=clock.sleep,
    )


def rolled(new_log: str, *, old_deleting: bool) -> FakeCluster:
    """The restart done: revision 2 (hash bbb) rolled out, the old pod of aaa still there."""
    return FakeCluster(
        deployment("2"),
        [replica_set("aaa", "1"), replica_set("bbb", "2")],
        # The old pod first, as the first Running pod of the app was read before.
        [pod("shop-old", "aaa", deleting=old_deleting), pod("shop-new", "bbb")],
        {"shop-old": "password=first", "shop-new": new_log},
    )


@pytest.mark.parametrize("old_deleting", [True, False])
def test_the_pod_read_is_the_new_replica_sets_not_the_old_one_still_running(
    old_deleting: bool,
) -> None:
    cluster = rolled("password=second", old_deleting=old_deleting)
    assert prove(cluster) == "shop-new"
    assert cluster.read == ["shop-new"]


def test_a_new_pod_printing_the_old_value_fails_at_once_naming_it() -> None:
    cluster = rolled("password=first", old_deleting=True)
    with pytest.raises(ProofFailed, match=r"shop-new printed 'first', the old value"):
        prove(cluster, timeout=3600)


def test_no_new_replica_set_fails_after_the_timeout_saying_no_restart_came() -> None:
    cluster = FakeCluster(deployment("1"), [replica_set("aaa", "1")], [pod("shop-old", "aaa")], {})
    with pytest.raises(ProofFailed, match=r"after 10 s: no ReplicaSet newer than .* aaa"):
        prove(cluster)
    assert cluster.read == []


def test_a_rollout_not_finished_is_no_proof_yet() -> None:
    cluster = rolled("password=second", old_deleting=False)
    cluster.found = deployment("2", rolled_out=False)
    with pytest.raises(ProofFailed, match="ReplicaSet bbb has not rolled out"):
        prove(cluster)


def test_a_new_pod_that_printed_nothing_yet_fails_with_what_it_printed() -> None:
    cluster = rolled("", old_deleting=True)
    with pytest.raises(ProofFailed, match=r"shop-new did not print 'password=second'"):
        prove(cluster)


def test_the_current_replica_set_is_the_one_of_the_deployments_revision_and_owner() -> None:
    sets = [
        replica_set("aaa", "1"),
        replica_set("ccc", "2", owner="other"),
        replica_set("bbb", "2"),
    ]
    current = demo_proof.current_replica_set(deployment("2"), sets)
    assert current is not None
    assert demo_proof.template_hash(current) == "bbb"
    assert demo_proof.current_replica_set(deployment("3"), sets) is None
