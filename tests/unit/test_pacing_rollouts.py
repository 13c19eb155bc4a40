"""Rollout completion by kubectl's rules, and the pacer's slots, rate and queue order."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model import keys
from restarter.model.kinds import progress
from restarter.model.limits import Limits, free_starts
from restarter.model.progress import Progress
from restarter.restarting.pacing import Pacer

NOW = 1_800_000_000.0


def deployment(
    generation: int = 2,
    observed: int = 2,
    replicas: int | None = 3,
    status: dict[str, Any] | None = None,
    restarted: float | None = None,
    name: str = "web",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": generation,
        },
        "spec": {} if replicas is None else {"replicas": replicas},
        "status": {"observedGeneration": observed, **(status or {})},
    }
    if restarted is not None:
        body["metadata"]["annotations"] = {keys.RESTART_TS: str(int(restarted))}
    return body


DONE = {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}


# --- rollouts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (deployment(status=DONE), Progress.COMPLETE),
        (deployment(generation=3, status=DONE), Progress.PROGRESSING),
        (deployment(status={**DONE, "updatedReplicas": 1}), Progress.PROGRESSING),
        (deployment(status={**DONE, "replicas": 4}), Progress.PROGRESSING),
        (deployment(status={**DONE, "availableReplicas": 2}), Progress.PROGRESSING),
        (deployment(replicas=0, status={}), Progress.COMPLETE),
        (
            deployment(
                status={
                    "conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]
                }
            ),
            Progress.FAILED,
        ),
    ],
    ids=[
        "complete",
        "generation-not-observed",
        "not-all-updated",
        "old-replicas-left",
        "not-all-available",
        "scaled-to-zero",
        "deadline-exceeded",
    ],
)
def test_deployment_rollouts_follow_kubectl_rollout_status(
    body: dict[str, Any], expected: Progress
) -> None:
    assert progress("deployments", body) is expected


def statefulset(strategy: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"generation": 2},
        "spec": {"replicas": 3, "updateStrategy": strategy},
        "status": {"observedGeneration": 2, **status},
    }


SET_DONE = {"readyReplicas": 3, "updatedReplicas": 3, "currentRevision": "b", "updateRevision": "b"}


@pytest.mark.parametrize(
    ("strategy", "status", "expected"),
    [
        ({"type": "RollingUpdate"}, SET_DONE, Progress.COMPLETE),
        ({"type": "RollingUpdate"}, {**SET_DONE, "currentRevision": "a"}, Progress.PROGRESSING),
        ({"type": "RollingUpdate"}, {**SET_DONE, "readyReplicas": 2}, Progress.PROGRESSING),
        ({"type": "OnDelete"}, {}, Progress.COMPLETE),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
            {**SET_DONE, "updatedReplicas": 1, "currentRevision": "a"},
            Progress.COMPLETE,
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
            {**SET_DONE, "updatedReplicas": 1, "currentRevision": "a"},
            Progress.PROGRESSING,
        ),
    ],
    ids=["complete", "revision-behind", "not-ready", "on-delete", "partition-met", "partition"],
)
def test_statefulset_rollouts_follow_kubectl_rollout_status(
    strategy: dict[str, Any], status: dict[str, Any], expected: Progress
) -> None:
    assert progress("statefulsets", statefulset(strategy, status)) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2},
            Progress.COMPLETE,
        ),
        (
            {"desiredNumberScheduled": 2, "updatedNumberScheduled": 1, "numberAvailable": 2},
            Progress.PROGRESSING,
        ),
        (
            {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1},
            Progress.PROGRESSING,
        ),
    ],
    ids=["complete", "not-updated", "not-available"],
)
def test_daemonset_rollouts_follow_kubectl_rollout_status(
    status: dict[str, Any], expected: Progress
) -> None:
    body = {
        "metadata": {"generation": 1},
        "spec": {},
        "status": {"observedGeneration": 1, **status},
    }
    assert progress("daemonsets", body) is expected


# --- the pacer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("in_flight", "started", "limits", "expected"),
    [
        (3, 0, Limits(10, 0), 7),
        (10, 0, Limits(10, 0), 0),
        (12, 0, Limits(10, 0), 0),
        (0, 28, Limits(0, 30), 2),
        (5, 28, Limits(10, 30), 2),
        (99, 99, Limits(0, 0), None),
    ],
)
def test_free_starts_is_the_tighter_of_both_limits(
    in_flight: int, started: int, limits: Limits, expected: int | None
) -> None:
    assert free_starts(in_flight, started, limits) == expected


def key(name: str) -> tuple[str, str, str]:
    return ("deployments", "ns", name)


def start(pacer: Pacer, name: str, due: float = NOW, now: float = NOW) -> bool:
    """Ask for a slot; on yes, send the restart at once."""
    if pacer.try_start(key(name), due, now) is not None:
        return False
    pacer.started(key(name), f"uid-{name}", now)
    return True


def test_at_most_k_start_until_a_rollout_completes() -> None:
    pacer = Pacer(Limits(max_in_flight=2), stale_after=10)
    assert start(pacer, "a") and start(pacer, "b")
    assert pacer.try_start(key("c"), NOW, NOW) == "2 restarts in flight (limit 2)"
    pacer.observe("deployments", deployment(name="a", restarted=NOW, status=DONE), NOW + 5)
    assert pacer.in_flight() == 1
    assert start(pacer, "c", now=NOW + 6)


def test_a_body_from_before_our_restart_does_not_free_its_slot() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    pacer.observe("deployments", deployment(name="a", restarted=NOW - 3600, status=DONE), NOW)
    assert pacer.in_flight() == 1


def test_the_earliest_due_starts_first_and_later_ones_wait_their_turn() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    assert pacer.try_start(key("late"), NOW - 10, NOW) == "1 restarts in flight (limit 1)"
    assert pacer.try_start(key("early"), NOW - 60, NOW) is not None
    pacer.observe("deployments", deployment(name="a", restarted=NOW, status=DONE), NOW + 1)
    # The slot is free, but "late" asks first: the earlier due "early" goes before it.
    assert pacer.try_start(key("late"), NOW - 10, NOW + 2) == (
        "1 other workload(s) due earlier or as early"
    )
    assert pacer.try_start(key("early"), NOW - 60, NOW + 2) is None


def test_a_due_workload_that_stops_asking_leaves_the_queue() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    assert pacer.try_start(key("gone"), NOW - 60, NOW) is not None  # then never asks again
    pacer.forget(key("a"))
    assert pacer.try_start(key("next"), NOW, NOW + 5) is not None
    assert pacer.try_start(key("next"), NOW, NOW + 11) is None


def test_at_most_r_start_in_any_minute_counting_restarts_seen_in_the_cluster() -> None:
    pacer = Pacer(Limits(max_per_minute=2), stale_after=100)
    # One restart started 30 s ago, found by the streams (say, before an operator restart).
    pacer.observe("deployments", deployment(name="old", restarted=NOW - 30, status=DONE), NOW)
    assert start(pacer, "a")
    assert pacer.try_start(key("b"), NOW, NOW) == (
        "2 restarts started in the last minute (limit 2)"
    )
    assert start(pacer, "b", now=NOW + 31)


def test_a_restart_ts_in_the_future_was_not_ours_and_holds_no_slot() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    hand_edited = deployment(name="a", generation=3, restarted=NOW + 86_400)
    pacer.observe("deployments", hand_edited, NOW)
    assert pacer.in_flight() == 0
    assert start(pacer, "b")


def test_in_flight_restarts_are_found_again_from_the_cluster_after_a_restart() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    pacer.observe("deployments", deployment(name="a", generation=3, restarted=NOW - 5), NOW)
    assert pacer.try_start(key("b"), NOW, NOW) == "1 restarts in flight (limit 1)"


def test_a_rollout_past_its_timeout_frees_the_slot_once_with_a_reason() -> None:
    pacer = Pacer(Limits(max_in_flight=1, rollout_timeout=120), stale_after=10)
    assert start(pacer, "stuck")
    assert pacer.sweep(NOW + 60) == []
    [stalled] = pacer.sweep(NOW + 121)
    assert (stalled.key, stalled.uid, stalled.restarted_at) == (key("stuck"), "uid-stuck", NOW)
    assert stalled.reason == "rollout not complete 120s after the restart"
    assert pacer.sweep(NOW + 200) == []
    assert start(pacer, "next", now=NOW + 121)


def test_a_failed_rollout_frees_the_slot_with_a_reason() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    failed = deployment(
        name="a",
        restarted=NOW,
        status={"conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]},
    )
    pacer.observe("deployments", failed, NOW + 30)
    [stalled] = pacer.sweep(NOW + 31)
    assert stalled.reason == "rollout failed (ProgressDeadlineExceeded)"
    assert pacer.in_flight() == 0


def test_a_deleted_workload_frees_its_slot() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    pacer.forget(key("a"))
    assert pacer.in_flight() == 0


def test_without_limits_everything_starts_and_is_still_counted() -> None:
    pacer = Pacer(Limits(0, 0), stale_after=10)
    assert all(start(pacer, f"w{i}") for i in range(50))
    assert pacer.in_flight() == 50


def test_a_completed_rollout_that_later_loses_availability_holds_no_slot() -> None:
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert start(pacer, "a")
    pacer.observe("deployments", deployment(name="a", restarted=NOW, status=DONE), NOW + 2)
    dipped = deployment(name="a", restarted=NOW, status={**DONE, "availableReplicas": 0})
    pacer.observe("deployments", dipped, NOW + 30)  # a node went away, say
    assert pacer.in_flight() == 0


def test_a_rollout_seen_complete_before_the_patch_returns_holds_no_slot() -> None:
    # The watch can bring the controller's "complete" before the timer hears back from its
    # own patch (a Deployment scaled to zero completes in milliseconds): the slot must not
    # then be held until the rollout timeout.
    pacer = Pacer(Limits(max_in_flight=1), stale_after=10)
    assert pacer.try_start(key("a"), NOW, NOW) is None
    pacer.observe("deployments", deployment(name="a", restarted=NOW, status=DONE), NOW + 0.1)
    pacer.started(key("a"), "uid-a", NOW)
    assert pacer.in_flight() == 0
    assert start(pacer, "b", now=NOW + 1)
