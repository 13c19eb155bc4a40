"""Argo Rollouts in the pure model: the stamp leaves the finalizer to kopf, the restart is
``spec.restartAt`` in one conditional JSON merge patch, a Rollout is in flight until
Healthy and caught up, and a workloadRef's template stands in for the Rollout's."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import pytz

from restarter.model import keys
from restarter.model.kinds import ROLLOUT_KIND, api_version, progress
from restarter.model.progress import Progress
from restarter.model.references import references, rollout_workload_ref, with_template
from restarter.model.restart_decisions import Action, decide_restart
from restarter.model.timer_admission import admit_patch
from restarter.services.settings import Settings
from tests.unit.test_decisions_restart import daily

WARSAW = pytz.timezone("Europe/Warsaw")
SETTINGS = Settings(timezone="Europe/Warsaw", window_length=dt.timedelta(hours=1))
NOW = WARSAW.localize(dt.datetime(2026, 12, 2, 3, 20))  # 02:20 UTC, inside 03.00


def rollout(
    finalizers: list[str], restart_at: str | None = None, kind: str = "Rollout"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 2, "template": {"metadata": {}, "spec": {}}}
    if restart_at is not None:
        spec["restartAt"] = restart_at
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "resourceVersion": "77",
            "labels": {keys.PENDING_LABEL: "true"},
            "finalizers": finalizers,
            "annotations": {
                keys.pending_key("secret", "db"): "1796000000",
                keys.window_key("secret", "db"): daily("03.00"),
            },
        },
        "spec": spec,
    }


def test_a_rollout_is_admitted_without_a_finalizer_list_a_merge_patch_would_replace() -> None:
    rollout_admit = admit_patch({"resourceVersion": "77"}, ROLLOUT_KIND)
    workload_admit = admit_patch({"resourceVersion": "77"})
    assert "finalizers" not in rollout_admit["metadata"]
    assert workload_admit["metadata"]["finalizers"] == [keys.FINALIZER]
    assert rollout_admit["metadata"]["labels"] == {keys.PENDING_LABEL: "true"}
    assert rollout_admit["metadata"]["resourceVersion"] == "77"


def test_a_due_rollout_gets_restart_at_and_its_finalizer_list_without_ours() -> None:
    decision = decide_restart(rollout(["example.com/keep", keys.FINALIZER]), SETTINGS, NOW)
    assert decision.action is Action.RESTART
    assert decision.patch["spec"] == {"restartAt": "2026-12-02T02:20:01Z"}
    metadata = decision.patch["metadata"]
    assert metadata["resourceVersion"] == "77"
    assert metadata["finalizers"] == ["example.com/keep"]
    assert not any(key.startswith("$") for key in metadata)  # no strategic merge directive
    assert metadata["labels"] == {keys.PENDING_LABEL: None}
    assert metadata["annotations"][keys.pending_key("secret", "db")] is None


def test_a_rollout_without_our_finalizer_leaves_the_list_alone() -> None:
    decision = decide_restart(rollout(["example.com/keep"]), SETTINGS, NOW)
    assert "finalizers" not in decision.patch["metadata"]


def test_restart_at_is_after_a_pod_created_in_the_same_second() -> None:
    # Argo keeps a pod whose creationTimestamp (whole seconds) equals restartAt; a pod
    # created at 02:20:00.2, before the change, must still be replaced.
    late_in_the_second = NOW.replace(microsecond=900_000)
    decision = decide_restart(rollout([]), SETTINGS, late_in_the_second)
    restart_at = dt.datetime.fromisoformat(decision.patch["spec"]["restartAt"])
    assert restart_at > late_in_the_second.replace(microsecond=0)


def test_a_second_restart_within_the_second_moves_restart_at_on() -> None:
    decision = decide_restart(rollout([], restart_at="2026-12-02T02:20:01Z"), SETTINGS, NOW)
    assert decision.patch["spec"] == {"restartAt": "2026-12-02T02:20:02Z"}


def test_a_deployment_body_still_gets_the_pod_template_annotation() -> None:
    decision = decide_restart(rollout([keys.FINALIZER], kind="Deployment"), SETTINGS, NOW)
    assert "restartAt" not in decision.patch["spec"]
    assert decision.patch["metadata"]["$deleteFromPrimitiveList/finalizers"] == [keys.FINALIZER]


def status(phase: str | None, restarted_at: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if phase is not None:
        found["phase"] = phase
    if restarted_at is not None:
        found["restartedAt"] = restarted_at
    return found


@pytest.mark.parametrize(
    ("restart_at", "found", "expected"),
    [
        (None, status("Healthy"), Progress.COMPLETE),
        (None, status("Progressing"), Progress.PROGRESSING),
        ("2026-12-02T02:20:00Z", status("Healthy"), Progress.PROGRESSING),
        ("2026-12-02T02:20:00Z", status("Healthy", "2026-12-01T02:20:00Z"), Progress.PROGRESSING),
        ("2026-12-02T02:20:00Z", status("Healthy", "2026-12-02T02:20:00Z"), Progress.COMPLETE),
        ("2026-12-02T02:20:00Z", status("Degraded", "2026-12-02T02:20:00Z"), Progress.PROGRESSING),
        ("2026-12-02T02:20:00Z", status(None), Progress.PROGRESSING),
    ],
)
def test_a_rollout_is_in_flight_until_healthy_and_restarted_at_caught_up(
    restart_at: str | None, found: dict[str, Any], expected: Progress
) -> None:
    spec = {} if restart_at is None else {"restartAt": restart_at}
    assert progress("rollouts", {"metadata": {}, "spec": spec, "status": found}) is expected


def test_a_workload_ref_names_the_deployment_whose_template_counts() -> None:
    body = {
        "metadata": {"name": "ref"},
        "spec": {"workloadRef": {"kind": "Deployment", "name": "base"}},
    }
    assert rollout_workload_ref(body) == "base"
    assert rollout_workload_ref({"spec": {"template": {}}}) is None
    assert (
        rollout_workload_ref({"spec": {"workloadRef": {"kind": "ReplicaSet", "name": "x"}}}) is None
    )
    env = [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    base = {"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env}]}}}}
    resolved = with_template(body, base)
    assert resolved["spec"]["workloadRef"] == body["spec"]["workloadRef"]
    assert [ref.name for ref in references(resolved["spec"]["template"]["spec"])] == ["db"]
    assert with_template(body, None)["spec"]["template"] == {}


def test_each_kind_has_its_api_version() -> None:
    assert api_version("rollouts") == "argoproj.io/v1alpha1"
    assert api_version("deployments") == "apps/v1"
