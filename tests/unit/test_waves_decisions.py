"""Waves, the circuit breaker and the quiet period, decided without a cluster: which
dependents are in the first wave, how a first-wave workload is judged from its body and its
pods, when a change halts or is released, and when a workload is quiet enough to restart."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from restarter.model import health, keys, restart_decisions, stamps, waves, windows
from restarter.model.fan_out import FanOut, Target, plan_fan_out
from restarter.model.health import Health
from restarter.model.restart_decisions import Action
from restarter.model.waves import HALTED, RELEASED, WaveError, WaveRecord
from restarter.services.settings import Settings

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
EPOCH = int(NOW.timestamp())


@pytest.mark.parametrize(
    ("text", "dependents", "size"),
    [("1", 10, 1), ("3", 2, 2), ("10%", 1000, 50), ("10%", 30, 3), ("1%", 5, 1), ("0", 9, 0)],
)
def test_a_first_wave_is_a_count_or_a_percentage_of_at_least_one(
    text: str, dependents: int, size: int
) -> None:
    assert waves.parse_first_wave(text).size(dependents) == size


@pytest.mark.parametrize("text", ["", "one", "-1", "101%", "5 %"])
def test_a_first_wave_that_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(WaveError):
        waves.parse_first_wave(text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("45s", 45), ("10m", 600), ("1h30m", 5400)]
)
def test_soak_and_quiet_times_read_like_lengths_and_may_be_zero(text: str, seconds: float) -> None:
    assert waves.parse_seconds(text, "soak") == seconds


def test_the_first_wave_is_the_first_names_alphabetically_after_the_one_that_failed() -> None:
    dependents = [("deployments", "web"), ("statefulsets", "db"), ("deployments", "api")]
    assert waves.first_wave(dependents, waves.FirstWave(1)) == (("deployments", "api"),)
    preferred = waves.first_wave(dependents, waves.FirstWave(1), prefer=("Deployment/web",))
    assert preferred == (("deployments", "web"),)


def _readers(*names: str) -> list[Target]:
    return [Target("deployments", name, None, None) for name in names]


def _plan(*names: str, kind: str = "secret", name: str = "db", **options: Any) -> FanOut:
    """The fan-out of a ``now`` change of one source to Deployments named ``names``."""
    return plan_fan_out(
        kind=kind,
        name=name,
        readers=_readers(*names),
        source_window=windows.WindowRequest("now", "UTC", dt.timedelta(hours=1)),
        settings=Settings(),
        change_id="812",
        now=NOW,
        first_wave=waves.FirstWave(1),
        **options,
    )


def test_the_fan_out_marks_the_first_wave_and_the_rest_and_names_the_quiet_time() -> None:
    plan = _plan("c", "a", "b", quiet=10)
    assert plan.first == (("deployments", "a"),)
    marks = {
        name: json.loads(
            plan.patch_for(("deployments", name))["metadata"]["annotations"][
                keys.window_key("secret", "db")
            ]
        )
        for name in "abc"
    }
    assert {name: mark["wave"] for name, mark in marks.items()} == {"a": 1, "b": 2, "c": 2}
    assert all(mark["quiet"] == 10 for mark in marks.values())


def test_a_change_with_one_dependent_has_no_waves() -> None:
    plan = _plan("a")
    mark = plan.patch_for(("deployments", "a"))["metadata"]["annotations"]
    assert plan.first == ()
    assert "wave" not in json.loads(mark[keys.window_key("secret", "db")])


def _restarted(token: str = "secret.db", change: str = "812", at: int = EPOCH - 120) -> dict:
    return {
        "metadata": {
            "generation": 2,
            "annotations": {
                keys.RESTART_TS: str(at),
                keys.RESTARTED_FOR: json.dumps({token: change}),
            },
        },
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "web"}}}},
        "status": {
            "observedGeneration": 2,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": 1,
        },
    }


def _pod(
    created: int, *, ready_at: int | None = None, restarts: int = 0, waiting: str = ""
) -> dict:
    def stamp(seconds: int) -> str:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    container: dict = {"name": "app", "restartCount": restarts, "state": {}}
    if waiting:
        container["state"] = {"waiting": {"reason": waiting}}
        container["lastState"] = {"terminated": {"reason": "Error", "exitCode": 3}}
    conditions = []
    if ready_at is not None:
        conditions.append(
            {"type": "Ready", "status": "True", "lastTransitionTime": stamp(ready_at)}
        )
    return {
        "metadata": {"name": f"web-{created}", "creationTimestamp": stamp(created)},
        "status": {"containerStatuses": [container], "conditions": conditions},
    }


def _assess(body: dict | None, pods: list[dict], soak: float = 60) -> waves.Verdict:
    return health.assess("deployments", body, pods, "secret.db", "812", NOW, soak, 600)


def test_a_first_wave_pod_that_crash_loops_is_unhealthy_and_named_without_a_value() -> None:
    verdict = _assess(_restarted(), [_pod(EPOCH - 100, restarts=3, waiting="CrashLoopBackOff")])
    assert verdict.health is Health.UNHEALTHY
    assert verdict.why == (
        f"pod web-{EPOCH - 100} container app: CrashLoopBackOff, restarted 3 time(s), exit code 3"
    )


def test_an_old_pod_that_restarted_before_the_restart_does_not_count() -> None:
    old = _pod(EPOCH - 3600, ready_at=EPOCH - 3500, restarts=5)
    fresh = _pod(EPOCH - 100, ready_at=EPOCH - 90)
    assert _assess(_restarted(), [old, fresh]).health is Health.HEALTHY


def test_a_rollout_past_its_progress_deadline_is_unhealthy() -> None:
    body = _restarted()
    body["status"]["conditions"] = [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    ]
    verdict = _assess(body, [])
    assert (verdict.health, verdict.why) == (
        Health.UNHEALTHY,
        "its rollout failed (ProgressDeadlineExceeded)",
    )


def test_a_degraded_rollout_is_unhealthy() -> None:
    body = _restarted()
    body["status"]["phase"] = "Degraded"
    verdict = health.assess("rollouts", body, [], "secret.db", "812", NOW, 60, 600)
    assert verdict.health is Health.UNHEALTHY


def test_a_rollout_incomplete_past_the_rollout_timeout_is_unhealthy() -> None:
    body = _restarted(at=EPOCH - 700)
    body["status"]["availableReplicas"] = 0
    assert _assess(body, []).health is Health.UNHEALTHY
    assert _assess(_restarted(at=EPOCH - 30) | {"status": {}}, []).health is Health.ROLLING


def test_a_healthy_first_wave_soaks_from_its_last_pod_ready() -> None:
    pods = [_pod(EPOCH - 100, ready_at=EPOCH - 30)]
    verdict = _assess(_restarted(), pods, soak=60)
    assert (verdict.health, verdict.until) == (Health.SOAKING, EPOCH + 30)
    assert _assess(_restarted(), pods, soak=0).health is Health.HEALTHY


def test_a_first_wave_workload_not_restarted_yet_waits_and_one_deleted_is_gone() -> None:
    pending = {"metadata": {"annotations": {keys.pending_key("secret", "db"): str(EPOCH)}}}
    assert _assess(pending, []).health is Health.WAITING
    assert _assess(None, []).health is Health.GONE


def _record(state: str = "", why: str = "") -> WaveRecord:
    return WaveRecord("812", ("Deployment/a",), 60, state, EPOCH if state else None, why)


def test_one_unhealthy_first_wave_workload_halts_the_change_and_healthy_ones_release_it() -> None:
    unhealthy = {"Deployment/a": health.Verdict(Health.UNHEALTHY, "pod a-1 crashed")}
    assert waves.judge(_record(), unhealthy) == (
        HALTED,
        "Deployment/a failed: pod a-1 crashed",
        "Deployment/a",
    )
    healthy = {"Deployment/a": health.Verdict(Health.HEALTHY)}
    assert waves.judge(_record(), healthy)[0] == RELEASED
    soaking = {"Deployment/a": health.Verdict(Health.SOAKING, "soaking")}
    assert waves.judge(_record(), soaking)[0] == ""


def test_the_record_reads_back_what_it_wrote() -> None:
    record = _record().judged(HALTED, NOW, "Deployment/a failed: x", "Deployment/a")
    annotations = {keys.WAVE: record.to_annotation()}
    assert waves.read_record(annotations) == record
    assert waves.read_record({keys.WAVE: "not json"}) is None


@pytest.mark.parametrize(
    ("wave", "record", "newer", "held", "halted"),
    [
        (waves.REST, None, None, True, False),  # the record is not written yet
        (waves.REST, _record(), 0, True, False),  # the first wave is judged
        (waves.REST, _record(RELEASED), 0, False, False),
        (waves.REST, _record(HALTED, "x"), 0, True, True),
        (waves.REST, _record(HALTED, "x"), 1, True, True),  # a newer change, halted too
        (waves.FIRST, _record(), 0, False, False),
        (waves.FIRST, _record(HALTED, "x"), 0, True, True),  # its own change halted
        (waves.FIRST, _record(HALTED, "x"), -1, False, False),  # a new change's first wave
        (None, _record(HALTED, "x"), 0, False, False),  # no waves
    ],
)
def test_which_marks_the_breaker_holds(
    wave: int | None, record: WaveRecord | None, newer: int | None, held: bool, halted: bool
) -> None:
    hold = waves.mark_hold(wave, "812", record, newer)
    assert (hold is not None, hold is not None and hold.halted) == (held, halted)


def test_a_halt_is_released_by_a_resume_of_that_change_or_by_its_expiry() -> None:
    halted = _record(HALTED, "x")
    assert waves.released_by_hand(halted, "812", NOW, None) is not None
    assert waves.released_by_hand(halted, "700", NOW, None) is None
    later = NOW + dt.timedelta(hours=3)
    assert waves.released_by_hand(halted, None, later, 2 * 3600) is not None
    assert waves.released_by_hand(halted, None, later, None) is None


def _pending(*marks: tuple[str, int, int]) -> dict:
    """A workload pending with ``now`` marks: (source name, seen, quiet seconds)."""
    annotations = {}
    for name, seen, quiet in marks:
        request = windows.WindowRequest("now", "UTC", dt.timedelta(hours=1))
        annotations |= stamps.stamp_patch(
            "secret",
            name,
            dt.datetime.fromtimestamp(seen, dt.UTC),
            request,
            "812",
            None,
            {"quiet": quiet},
        )["metadata"]["annotations"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"annotations": annotations}}


def test_a_workload_restarts_only_once_every_source_has_been_quiet() -> None:
    # user changed at T-12, password at T-5: both with a quiet time of 10 s.
    workload = _pending(("user", EPOCH - 12, 10), ("password", EPOCH - 5, 10))
    decision = restart_decisions.decide_restart(workload, Settings(), NOW)
    assert decision.action is Action.WAIT
    assert decision.quiet_until == NOW + dt.timedelta(seconds=5)
    later = restart_decisions.decide_restart(workload, Settings(), NOW + dt.timedelta(seconds=5))
    assert later.action is Action.RESTART


def test_marks_without_a_quiet_time_restart_at_once() -> None:
    decision = restart_decisions.decide_restart(_pending(("db", EPOCH, 0)), Settings(), NOW)
    assert decision.action is Action.RESTART


def test_a_rollout_group_is_a_label_or_an_annotation() -> None:
    assert waves.group_of({"labels": {keys.ROLLOUT_GROUP: "bundle"}}) == "bundle"
    assert waves.group_of({"annotations": {keys.ROLLOUT_GROUP: "bundle"}}) == "bundle"
    assert waves.group_of({}) == ""


def test_the_pilot_of_a_group_is_its_earliest_unjudged_change_then_its_name() -> None:
    def member(since: int, state: str = "") -> WaveRecord:
        return WaveRecord("1", ("Deployment/x",), 0, state, group="bundle", since=since)

    members = {
        ("ns-b", "configmap", "bundle"): member(EPOCH),
        ("ns-a", "configmap", "bundle"): member(EPOCH),
        ("ns-0", "configmap", "bundle"): member(EPOCH + 5),
        ("ns-z", "configmap", "bundle"): member(EPOCH - 60, RELEASED),
    }
    assert waves.pilot(members) == ("ns-a", "configmap", "bundle")
    judged = {key: member(EPOCH, HALTED) for key in members}
    assert waves.pilot(judged) is None


def test_a_source_of_a_rollout_group_keeps_its_waves_with_one_dependent() -> None:
    plan = _plan("a", kind="configmap", name="bundle", grouped=True)
    assert plan.first == (("deployments", "a"),)


def test_a_halted_change_is_notified_as_a_warning() -> None:
    from restarter.model import notices

    source = {"kind": "Secret", "metadata": {"namespace": "shop", "name": "db"}}
    notice = notices.notice_of(source, "Warning", "ChangeHalted", "change 812 halted: x")
    assert notice is not None and notice.category == "halted"
    title, _, warns = notices.render("shop", [notice])
    assert (title, warns) == ("restarter in shop: 1 halted", True)
