"""The bodies kopf hands the pending timer after a restart, played on the real apiserver
with the operator's own timer flow.

kopf's label-selected watch reports a workload DELETED once a restart removes the
pending label, with an echo body: the marks as they were before the restart, the
restart's resourceVersion. kopf gives that body to the timer, and keeps the object's
memo until it sees that event. Two things can go wrong:

- the restart's answer was lost (the apiserver went away after applying it): the tick
  failed, its memo knows nothing, kopf tries again on the echo. A patch conditional on
  the echo's version would apply: a second restart. What is sent is decided on a fresh
  read, which shows no marks.
- kopf's watch was reconnecting when the restart happened, so it never saw the DELETED:
  its next listing shows the workload stamped once more for the same change (a fan-out
  resumed after the failure), with the same memo. That body must be decided (the
  satisfied mark dropped), not skipped as released forever.

The echo is taken from a label-selected watch like kopf's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import kopf
import kubernetes
import pytest
from kopf._core.engines import posting  # the Event queue kopf gives its handlers

from restarter.cluster.seen_marks import SeenMarks
from restarter.model import keys
from restarter.model.restart_decisions import decide_restart
from restarter.model.stamps import stamp_patch
from restarter.model.timer_admission import admit_patch
from restarter.model.windows import WindowRequest
from restarter.restarting.pacing import Pacer
from restarter.restarting.ticking import restart_when_due
from restarter.restarting.timer_state import timer_wanted
from restarter.services.kube.api import Api
from restarter.services.kube.errors import Conflict
from restarter.services.settings import Settings
from tests.conftest import wait_for
from tests.faults.test_sigkill_fan_out import replica_sets_per_owner
from tests.integration.factories import deployment
from tests.unit.test_timer_acts_on_fresh_reads import deployments_timer

Apps = kubernetes.client.AppsV1Api

HOUR = dt.timedelta(hours=1)
SETTINGS = Settings(timezone="UTC", window_length=HOUR)
CHANGE = "812"  # the change id the resumed fan-out stamps again
log = logging.getLogger(__name__)


class LabelSelectedWatch:
    """Events of the namespace's Deployments carrying the pending label, as kopf's timer
    watch selects them."""

    def __init__(self, apps: Apps, namespace: str) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.changed = threading.Condition()
        self._watch = kubernetes.watch.Watch()
        self._stopping = threading.Event()
        thread = threading.Thread(target=self._run, args=(apps, namespace), daemon=True)
        thread.start()

    def _run(self, apps: Apps, namespace: str) -> None:
        stream = self._watch.stream(
            apps.list_namespaced_deployment,
            namespace,
            label_selector=keys.PENDING_LABEL,
            timeout_seconds=120,
        )
        try:
            for event in stream:
                with self.changed:
                    body = apps.api_client.sanitize_for_serialization(event["object"])
                    self.events.append((event["type"], body))
                    self.changed.notify_all()
        except Exception:
            if not self._stopping.is_set():
                raise

    def added(self, timeout: float) -> None:
        """Wait until the watch delivered the stamped body (so it sees it leave too)."""
        with self.changed:
            found = self.changed.wait_for(
                lambda: any(kind == "ADDED" for kind, _ in self.events), timeout
            )
            assert found, f"no ADDED event in {timeout}s"

    def deleted(self, timeout: float) -> dict[str, Any]:
        with self.changed:
            found = self.changed.wait_for(
                lambda: any(kind == "DELETED" for kind, _ in self.events), timeout
            )
            assert found, f"no DELETED event in {timeout}s: {[kind for kind, _ in self.events]}"
            return next(body for kind, body in self.events if kind == "DELETED")

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()


@pytest.fixture
def selected(apps: Apps, namespace: str) -> Iterator[LabelSelectedWatch]:
    watch = LabelSelectedWatch(apps, namespace)
    yield watch
    watch.stop()


def tick(
    body: dict[str, Any], api: Api, memo: dict[str, Any], seen: SeenMarks | None = None
) -> list[Any]:
    """One tick of the operator's timer flow on ``body``; the Events it posted: those it
    handed to kopf's queue, then those it created in the API itself (``Restarted``).
    ``seen``: what the operator's own streams saw (nothing: every body is read again)."""
    seen = seen or SeenMarks()
    queue: posting.K8sEventQueue = asyncio.Queue()
    core = kubernetes.client.CoreV1Api(api.client)
    metadata = body["metadata"]
    about = f"involvedObject.name={metadata['name']}"
    before = {
        event.metadata.name
        for event in core.list_namespaced_event(metadata["namespace"], field_selector=about).items
    }

    async def run() -> None:
        posting.settings_var.set(kopf.OperatorSettings())
        posting.event_queue_var.set(queue)
        posting.event_queue_loop_var.set(asyncio.get_running_loop())
        pacer = Pacer(SETTINGS.pacing, stale_after=2.5 * SETTINGS.timer_interval)
        await restart_when_due(deployments_timer(api, pacer, seen, memo), body)

    asyncio.run(run())
    events: list[Any] = []
    while not queue.empty():
        events.append(queue.get_nowait())
    created = core.list_namespaced_event(metadata["namespace"], field_selector=about).items
    events += [
        event
        for event in created
        if event.metadata.name not in before and event.reporting_component == "restarter"
    ]
    return events


def tick_until_it_acts(
    body: dict[str, Any], api: Api, memo: dict[str, Any], tries: int = 10
) -> list[Any]:
    """Ticks on ``body`` until one posts an Event, as kopf ticks again an interval later
    after a tick that conflicted twice: a stamp changes a Deployment's annotations, which
    bumps its generation, and the deployment controller's writes that follow can race the
    tick's conditional patch."""
    for _ in range(tries):
        events = tick(body, api, memo)
        if events:
            return events
        time.sleep(0.5)
    return []


def stamp(apps: Apps, namespace: str, name: str) -> dict[str, Any]:
    """Stamped for ``now`` and admitted to its timer, as the operator does it: the marks,
    then the label and finalizer at the version that shows them."""
    request = WindowRequest(at="now", timezone="UTC", length=HOUR)
    patch = stamp_patch("secret", "db", dt.datetime.now(dt.UTC), request, CHANGE)
    apps.patch_namespaced_deployment(name, namespace, patch)
    for _ in range(5):  # the deployment controller may write status in between
        with contextlib.suppress(kubernetes.client.exceptions.ApiException):
            admit = admit_patch(read(apps, namespace, name)["metadata"])
            apps.patch_namespaced_deployment(name, namespace, admit)
            return read(apps, namespace, name)
    pytest.fail("the admission conflicted 5 times")


def restart_behind_the_timers_back(api: Api, apps: Apps, namespace: str, name: str) -> None:
    """The restart a tick sent, applied as the operator sends it (read, decide, patch
    conditional on the read), with its answer kept from the timer."""
    for _ in range(5):  # the deployment controller may write status in between
        body = read(apps, namespace, name)
        decision = decide_restart(body, SETTINGS, dt.datetime.now(dt.UTC))
        with contextlib.suppress(Conflict):
            assert api.patch_workload("deployments", namespace, name, decision.patch)
            return
    pytest.fail("the restart conflicted 5 times")


def read(apps: Apps, namespace: str, name: str) -> dict[str, Any]:
    body = apps.read_namespaced_deployment(name, namespace)
    return dict(apps.api_client.sanitize_for_serialization(body))


def restarted_at(body: dict[str, Any]) -> str | None:
    template = body["spec"]["template"]["metadata"]
    return (template.get("annotations") or {}).get(keys.KUBECTL_RESTARTED_AT)


def marks(body: dict[str, Any]) -> list[str]:
    return sorted(
        key
        for key in body["metadata"].get("annotations") or {}
        if key.startswith(keys.MARK_PREFIXES)
    )


def test_a_workload_stamped_again_after_its_restart_is_cleared_not_left_pending(
    api_client: kubernetes.client.ApiClient,
    apps: Apps,
    namespace: str,
    selected: LabelSelectedWatch,
) -> None:
    api = Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=1))
    wait_for(lambda: replica_sets_per_owner(apps, namespace)["web"] == 1, 30, message="first RS")
    memo: dict[str, Any] = {}  # kopf's memo of the object: kept until it sees DELETED

    # The tick that restarts it.
    pending = stamp(apps, namespace, "web")
    selected.added(timeout=30)
    assert timer_wanted(pending["metadata"].get("annotations"), pending["metadata"], memo)
    events = tick_until_it_acts(pending, api, memo)
    after_restart = read(apps, namespace, "web")
    first_restart = restarted_at(after_restart)
    assert first_restart is not None, after_restart["metadata"]
    assert [event.reason for event in events] == ["Restarted"]
    assert marks(after_restart) == []

    # Its DELETED echo: the marks as they were before the restart, the restart's version.
    # Skipped, and a tick on it (one already scheduled) sends nothing.
    echo = selected.deleted(timeout=30)
    assert marks(echo), "the echo shows the marks as they were before the restart"
    assert not timer_wanted(echo["metadata"].get("annotations"), echo["metadata"], memo)
    assert tick(echo, api, memo) == []
    assert restarted_at(read(apps, namespace, "web")) == first_restart

    # kopf missed that DELETED (its watch was reconnecting); the fan-out resumed after the
    # failure stamps the same change again; kopf's relisting shows this body, same memo.
    again = stamp(apps, namespace, "web")
    annotations = again["metadata"].get("annotations")
    assert timer_wanted(annotations, again["metadata"], memo), "the timer would stop for good"
    events = tick_until_it_acts(again, api, memo)
    cleared = read(apps, namespace, "web")
    assert [event.reason for event in events] == ["RestartSkipped"]
    assert marks(cleared) == []
    assert keys.PENDING_LABEL not in (cleared["metadata"].get("labels") or {})
    assert keys.FINALIZER not in (cleared["metadata"].get("finalizers") or [])
    assert restarted_at(cleared) == first_restart, "restarted once for the one change"
    wait_for(lambda: replica_sets_per_owner(apps, namespace)["web"] == 2, 30, message="2nd RS")
    assert replica_sets_per_owner(apps, namespace)["web"] == 2


def test_the_echo_of_a_restart_whose_answer_was_lost_restarts_nothing(
    api_client: kubernetes.client.ApiClient,
    apps: Apps,
    namespace: str,
    selected: LabelSelectedWatch,
) -> None:
    """The apiserver applied a restart and went away before answering: the tick failed,
    its memo knows nothing, and kopf tries it again on the body it has by then, the
    DELETED echo of that restart (marks shown, the restart's resourceVersion)."""
    api = Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=1))
    wait_for(lambda: replica_sets_per_owner(apps, namespace)["web"] == 1, 30, message="first RS")
    stamp(apps, namespace, "web")
    selected.added(timeout=30)
    restart_behind_the_timers_back(api, apps, namespace, "web")
    first_restart = restarted_at(read(apps, namespace, "web"))
    assert first_restart is not None

    echo = selected.deleted(timeout=30)
    assert marks(echo)
    memo: dict[str, Any] = {}
    # The tick tried again finds the restart it sent: reported once, not sent again.
    assert [event.reason for event in tick(echo, api, memo)] == ["Restarted"]
    assert restarted_at(read(apps, namespace, "web")) == first_restart, "restarted twice"
    assert tick(echo, api, memo) == []
    # Known released now: kopf's filter stops the timer on the echo.
    assert not timer_wanted(echo["metadata"].get("annotations"), echo["metadata"], memo)
    wait_for(lambda: replica_sets_per_owner(apps, namespace)["web"] == 2, 30, message="2nd RS")
