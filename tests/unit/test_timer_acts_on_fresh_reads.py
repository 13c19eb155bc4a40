"""What one timer tick sends, decided on a fresh read of the workload: the order of
answers is scripted here (the cluster test plays the bodies kopf hands over).

Ticks run the operator's own flow (``restart_when_due``) against a scripted API whose
reads and patches answer in a fixed order; Events go through the one Event path (which
refuses to post from the event loop) to that API, which records them, and the restart
counter is read from the Prometheus registry.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from restarter.cluster.seen_marks import SeenMarks
from restarter.model import keys
from restarter.model.windows import WindowRequest
from restarter.restarting import ticking, timer_state
from restarter.restarting.pacing import Pacer
from restarter.services import events as event_path
from restarter.services.kube.errors import Conflict
from restarter.services.settings import Settings

HOUR = dt.timedelta(hours=1)
SETTINGS = Settings(timezone="UTC", window_length=HOUR)
log = logging.getLogger(__name__)


def deployments_timer(
    api: Any, pacer: Pacer, seen: SeenMarks, memo: dict[str, Any]
) -> timer_state.TimerContext:
    """The context of one tick of a Deployment's timer, as the operator's handler makes it."""
    return timer_state.TimerContext(
        plural="deployments",
        settings=SETTINGS,
        api=api,
        pacer=pacer,
        seen=seen,
        memo=memo,
        logger=log,
        events=event_path.Events(api),
    )


def deployment(version: str, annotations: dict[str, str], **metadata: Any) -> dict[str, Any]:
    identity = {"name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": version}
    return {
        "metadata": identity | {"annotations": annotations} | metadata,
        "spec": {"template": {"metadata": {}}},
    }


def pending(version: str, since: int) -> dict[str, Any]:
    """A Deployment stamped for change 812 of Secret db, window ``now``."""
    request = WindowRequest(at="now", timezone="UTC", length=HOUR)
    marks = {
        keys.pending_key("secret", "db"): str(since),
        keys.window_key("secret", "db"): request.to_mark("Secret/db", "812"),
    }
    return deployment(
        version, marks, labels={keys.PENDING_LABEL: "true"}, finalizers=[keys.FINALIZER]
    )


def restarted(version: str, at: int) -> dict[str, Any]:
    """The same Deployment after restarter's restart for change 812 at ``at``."""
    recorded = {keys.RESTART_TS: str(at), keys.RESTARTED_FOR: '{"secret.db":"812"}'}
    return deployment(version, recorded)


class ScriptedApi:
    """Reads and patches answer from their scripts, in order; an Exception is raised."""

    def __init__(self, reads: list[Any], patches: list[Any]) -> None:
        self.reads, self.patches = reads, patches
        self.sent: list[dict[str, Any]] = []

    def read_workload(self, plural: str, namespace: str, name: str) -> Any:
        return self._answer(self.reads.pop(0))

    def patch_workload(self, plural: str, namespace: str, name: str, patch: Any) -> Any:
        self.sent.append(patch)
        return self._answer(self.patches.pop(0))

    @staticmethod
    def _answer(answer: Any) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reasons of the Events the tick posted, as the scripted API was asked to create
    them (a post from the event loop would raise instead)."""
    posted: list[str] = []

    def create_event(self: Any, obj: Any, *, type: str, reason: str, message: str) -> None:
        posted.append(reason)

    monkeypatch.setattr(ScriptedApi, "create_event", create_event, raising=False)
    return posted


def count(result: str) -> float:
    labels = {"kind": "Deployment", "result": result}
    return REGISTRY.get_sample_value("restarter_restarts_total", labels) or 0.0


def tick(
    body: dict[str, Any],
    api: Any,
    memo: dict[str, Any],
    pacer: Pacer,
    seen: SeenMarks | None = None,
) -> None:
    seen = seen or SeenMarks()
    asyncio.run(
        ticking.restart_when_due(
            deployments_timer(api, pacer, seen, memo),
            body,
        )
    )


def new_pacer() -> Pacer:
    return Pacer(SETTINGS.pacing, stale_after=2.5 * SETTINGS.timer_interval)


def now_seconds() -> int:
    return int(dt.datetime.now(dt.UTC).timestamp())


def test_the_patch_is_conditional_on_the_fresh_read_not_on_the_ticks_body(
    events: list[str],
) -> None:
    since = now_seconds() - 5
    api = ScriptedApi(reads=[pending("12", since)], patches=[restarted("13", now_seconds())])
    memo: dict[str, Any] = {}
    before = count("restarted")
    tick(pending("10", since), api, memo, new_pacer())
    assert [patch["metadata"]["resourceVersion"] for patch in api.sent] == ["12"]
    assert events == ["Restarted"]
    assert count("restarted") == before + 1
    assert timer_state.settled(memo, {"resourceVersion": "13"})
    assert not timer_state.settled(memo, {"resourceVersion": "14"})


def test_a_body_the_streams_saw_at_its_version_with_its_marks_is_patched_without_a_read(
    events: list[str],
) -> None:
    since = now_seconds() - 5
    body = pending("12", since)
    seen = SeenMarks()
    seen.observe("deployments", body)
    api = ScriptedApi(reads=[], patches=[restarted("13", now_seconds())])
    tick(body, api, {}, new_pacer(), seen)
    assert [patch["metadata"]["resourceVersion"] for patch in api.sent] == ["12"]
    assert events == ["Restarted"]


def test_an_echo_is_read_again_though_the_streams_saw_its_marks_at_an_older_version(
    events: list[str],
) -> None:
    """The streams saw the marks at 12 and the restart at 13 (no marks); kopf's echo
    shows the marks at 13."""
    since = now_seconds() - 5
    seen = SeenMarks()
    seen.observe("deployments", pending("12", since))
    seen.observe("deployments", restarted("13", since + 2))
    assert not seen.vouches_for("deployments", pending("13", since))
    seen.observe("deployments", pending("12", since))  # streams lag behind
    assert not seen.vouches_for("deployments", pending("13", since))
    api = ScriptedApi(reads=[restarted("13", since + 2)], patches=[])
    tick(pending("13", since), api, {}, new_pacer(), seen)
    assert api.sent == []
    assert events == ["Restarted"]  # the lost answer's report, nothing sent


def test_other_marks_at_the_same_version_are_not_vouched_for() -> None:
    seen = SeenMarks()
    body = pending("12", 1796000000)
    seen.observe("deployments", body)
    other = pending("12", 1796000001)
    assert seen.vouches_for("deployments", body)
    assert not seen.vouches_for("deployments", other)
    seen.forget(("deployments", "ns", "web"))
    assert not seen.vouches_for("deployments", body)


def test_a_restart_whose_answer_was_lost_is_reported_once_and_not_sent_again(
    events: list[str],
) -> None:
    """The tick's body is the DELETED echo (marks, the restart's version); the fresh read
    shows the restart recorded for the marks' change after their stamp."""
    since = now_seconds() - 5
    api = ScriptedApi(reads=[restarted("13", since + 2)], patches=[])
    pacer = new_pacer()
    before = count("restarted")
    tick(pending("13", since), api, {}, pacer)
    assert api.sent == []
    assert events == ["Restarted"]
    assert count("restarted") == before + 1
    assert pacer.in_flight() == 1, "its rollout holds a pacing slot"


def test_marks_removed_meanwhile_send_and_report_nothing(events: list[str]) -> None:
    since = now_seconds() - 5
    cleared = restarted("13", since - 600)  # its last restart was before the stamp
    api = ScriptedApi(reads=[cleared], patches=[])
    memo: dict[str, Any] = {}
    tick(pending("12", since), api, memo, new_pacer())
    assert api.sent == []
    assert events == []
    assert timer_state.settled(memo, {"resourceVersion": "13"})


def test_two_conflicts_send_nothing_more_and_free_the_slot(events: list[str]) -> None:
    since = now_seconds() - 5
    api = ScriptedApi(
        reads=[pending("11", since), pending("12", since)],
        patches=[Conflict("changed"), Conflict("changed again")],
    )
    pacer = new_pacer()
    tick(pending("10", since), api, {}, pacer)
    assert [patch["metadata"]["resourceVersion"] for patch in api.sent] == ["11", "12"]
    assert events == []
    assert pacer.in_flight() == 0


def test_a_read_that_fails_counts_as_a_failed_restart_and_frees_the_slot(
    events: list[str],
) -> None:
    api = ScriptedApi(reads=[ConnectionError("apiserver away")], patches=[])
    pacer = new_pacer()
    before = count("failed")
    with pytest.raises(ConnectionError):
        tick(pending("10", now_seconds() - 5), api, {}, pacer)
    assert count("failed") == before + 1
    assert pacer.in_flight() == 0
    assert events == []


def test_what_a_tick_decides_on_the_event_loop_is_posted_from_a_thread(
    events: list[str],
) -> None:
    """A paused Deployment's deferral is decided on the loop; the Event path refuses a
    post there, so it reaching the API shows it went through a thread hop (once)."""
    body = pending("10", now_seconds() - 5)
    body["spec"]["paused"] = True
    api = ScriptedApi(reads=[], patches=[])
    memo: dict[str, Any] = {}
    tick(body, api, memo, new_pacer())
    tick(body, api, memo, new_pacer())
    assert api.sent == []
    assert events == ["RestartDeferred"]
