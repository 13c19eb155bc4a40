"""The circuit breaker's reads of a source, without a cluster: a source read again while the
record read with it is still remembered never pairs the new state with the old record (a
change that had finished fanning out, judged as one with no record coming, would let the
rest of its dependents through before its first wave was judged)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from typing import Any

import pytest

from restarter.model import keys, waves
from restarter.model.waves import WaveRecord
from restarter.restarting import breaker
from restarter.restarting.blocking import Cached
from restarter.restarting.breaker import Breaker
from restarter.restarting.rollout_groups import RolloutGroups
from tests.unit.test_waves_decisions import NOW, _plan


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Source:
    """A Secret ``db`` as the API answers, each read taking ``delay`` seconds of the clock."""

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.delay = clock, 0.0
        self.annotations: dict[str, str] = {}
        self.version = 1

    def read_source_metadata(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        self.clock.now += self.delay
        metadata = {"annotations": dict(self.annotations), "resourceVersion": str(self.version)}
        return {"metadata": {"namespace": namespace, "name": name, **metadata}}

    def read_workload(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        # The first wave is still pending: its verdict is to wait.
        pending = {keys.pending_key("secret", "db"): str(int(NOW.timestamp()))}
        return {"metadata": {"name": name, "annotations": pending}, "spec": {}, "status": {}}

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return []


def _rest_of_the_change() -> dict[str, Any]:
    plan = _plan("a", "b")
    annotations = plan.patch_for(("deployments", "b"))["metadata"]["annotations"]
    return {"metadata": {"namespace": "ns", "name": "b", "annotations": annotations}}


def test_a_source_read_again_is_never_judged_by_the_record_read_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(breaker.time, "monotonic", clock)
    source = _Source(clock)
    judge = Breaker(source, 600, None, read_only=True)  # type: ignore[arg-type]
    workload = _rest_of_the_change()
    key = ("ns", "secret", "db")

    # The change is fanning out: no record yet; the rest is held.
    source.annotations = {keys.CHANGE: "812 checksum"}
    hold = judge.blocks(workload, NOW)
    assert hold is not None and "not chosen yet" in hold.reason

    # The fan-out ends: the record is written, the change annotation dropped. Restarts
    # asking from several threads interleave: one stores the new state while another
    # still stores the "no record" it judged from the old one, and the once-per-TTL read
    # again of this change is spent. (The caches are set as those threads leave them.)
    source.annotations = {keys.WAVE: WaveRecord("812", ("Deployment/a",), 60).to_annotation()}
    source.version = 2
    judge._sources.forget(key)
    judge._state(*key)
    assert not judge._reread(key, "812")
    hold = judge.blocks(workload, NOW + dt.timedelta(seconds=1))
    assert hold is not None, "the rest of the change went through before its first wave"
    assert hold.reason == "waiting for its first wave (Deployment/a)"


def test_a_change_whose_record_was_refused_holds_nothing() -> None:
    source = _Source(_Clock())
    judge = Breaker(source, 600, None, read_only=True)  # type: ignore[arg-type]
    source.annotations = {}  # the fan-out is over, and its record was never written
    assert judge.blocks(_rest_of_the_change(), NOW) is None


def test_a_mark_of_the_rest_goes_once_its_first_wave_is_released() -> None:
    source = _Source(_Clock())
    judge = Breaker(source, 600, None, read_only=True)  # type: ignore[arg-type]
    record = WaveRecord("812", ("Deployment/a",), 60).judged(waves.RELEASED, NOW, "healthy")
    source.annotations = {keys.WAVE: record.to_annotation()}
    assert judge.blocks(_rest_of_the_change(), NOW) is None


def test_a_source_of_a_halted_rollout_group_takes_the_halt_before_it_is_spread_to_it() -> None:
    since = NOW.timestamp() - 30
    pilot = WaveRecord("7", ("Deployment/app-01",), 3, group="bundle", since=since)
    halted = pilot.judged(waves.HALTED, NOW, "Deployment/app-01 failed: its rollout failed")
    groups = RolloutGroups()
    groups.record(("ns", "configmap", "bundle-01"), halted)
    source = _Source(_Clock())
    own = WaveRecord("812", ("Deployment/app-02",), 3, group="bundle", since=since + 1)
    source.annotations = {keys.WAVE: own.to_annotation()}
    judge = Breaker(source, 600, None, groups=groups, read_only=True)  # type: ignore[arg-type]
    plan = _plan("app-02", kind="configmap", name="bundle-02", grouped=True)
    annotations = plan.patch_for(("deployments", "app-02"))["metadata"]["annotations"]
    workload = {"metadata": {"namespace": "ns", "name": "app-02", "annotations": annotations}}

    hold = judge.blocks(workload, NOW)
    # Not a first wave of its own: the group's change halted while the verdict was spread.
    assert hold is not None and hold.halted
    assert "whose first wave (ns/ConfigMap/bundle-01) decided" in hold.reason


def test_a_group_change_recorded_after_its_release_tries_a_first_wave_of_its_own() -> None:
    pilot = WaveRecord("7", ("Deployment/app-01",), 3, group="bundle", since=NOW.timestamp() - 30)
    released = pilot.judged(waves.RELEASED, NOW - dt.timedelta(seconds=10), "healthy")
    members = {("ns", "configmap", "bundle-01"): released}
    later = WaveRecord("9", ("Deployment/app-02",), 3, group="bundle", since=NOW.timestamp())
    during = dataclasses.replace(later, since=NOW.timestamp() - 20)
    assert waves.group_verdict(members, ("ns", "configmap", "bundle-02"), later) is None
    assert waves.group_verdict(members, ("ns", "configmap", "bundle-02"), during) == (
        ("ns", "configmap", "bundle-01"),
        released,
    )


def test_restarts_that_ask_while_a_read_is_under_way_wait_for_it_instead_of_reading() -> None:
    reads: list[int] = []
    started = threading.Event()

    def slow_read() -> int:
        reads.append(1)
        started.set()
        time.sleep(0.2)
        return len(reads)

    cache: Cached[int] = Cached(ttl=5)
    first = threading.Thread(target=cache.get, args=("secret/db", slow_read))
    first.start()
    started.wait(2)
    answers: list[int] = []
    askers = [
        threading.Thread(target=lambda: answers.append(cache.get("secret/db", slow_read)))
        for _ in range(20)
    ]
    for asker in askers:
        asker.start()
    for thread in (first, *askers):
        thread.join(5)
    assert len(reads) == 1
    assert answers == [1] * 20
    # Another version of the answer is read, once.
    assert cache.get("secret/db", slow_read, version="2") == 2
