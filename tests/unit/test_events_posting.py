"""The one Event path: one request per Event from the calling thread, a failure handled as
the call asks (logged and counted, or raised), the listeners told of every Event, and
never a request from the event loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from restarter.model import reasons
from restarter.services import events
from restarter.services.kube.errors import NoAnswer

WORKLOAD = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"namespace": "ns", "name": "web", "uid": "u-1"},
}


class Poster:
    """Records each Event asked for; raises ``failure`` instead when set."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.created: list[tuple[str, str, str, str]] = []

    def create_event(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        if self.failure is not None:
            raise self.failure
        self.created.append((obj["metadata"]["name"], type, reason, message))


def failed(reason: reasons.Reason) -> float:
    labels = {"reason": reason.name}
    return REGISTRY.get_sample_value("restarter_events_failed_total", labels) or 0.0


def told_to(path: events.Events) -> list[tuple[str, str]]:
    told: list[tuple[str, str]] = []
    path.listen(lambda obj, reason, message: told.append((reason.name, message)))
    return told


def test_an_event_is_created_with_the_reasons_type_and_the_listeners_are_told() -> None:
    poster = Poster()
    path = events.Events(poster)  # type: ignore[arg-type]
    told = told_to(path)
    path.post(WORKLOAD, reason=reasons.RESTART_HELD.as_warning(), message="held")
    assert poster.created == [("web", "Warning", "RestartHeld", "held")]
    assert told == [("RestartHeld", "held")]


def test_a_failure_is_logged_and_counted_by_default_and_the_listeners_still_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = events.Events(Poster(NoAnswer(reason="ConnectionResetError")))  # type: ignore[arg-type]
    told = told_to(path)
    before = failed(reasons.RESTARTED)
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        path.post(WORKLOAD, reason=reasons.RESTARTED, message="the message")
    assert failed(reasons.RESTARTED) == before + 1
    assert (
        "the Restarted Event on Deployment ns/web was not posted: no answer "
        "(ConnectionResetError)" in caplog.text
    )
    assert "the message" not in caplog.text
    assert told == [("Restarted", "the message")]


def test_a_failure_is_raised_when_the_call_asks() -> None:
    path = events.Events(Poster(NoAnswer(reason="ConnectionResetError")))  # type: ignore[arg-type]
    before = failed(reasons.RESTART_SCHEDULED)
    with pytest.raises(NoAnswer):
        path.post(WORKLOAD, reason=reasons.RESTART_SCHEDULED, message="m", on_failure=events.RAISE)
    assert failed(reasons.RESTART_SCHEDULED) == before + 1


def test_a_post_from_the_event_loop_is_refused_and_one_from_a_thread_is_not() -> None:
    poster = Poster()
    path = events.Events(poster)  # type: ignore[arg-type]

    async def from_the_loop() -> None:
        with pytest.raises(RuntimeError, match="event loop"):
            path.post(WORKLOAD, reason=reasons.RESTARTED, message="on the loop")
        await asyncio.to_thread(path.post, WORKLOAD, reason=reasons.RESTARTED, message="hop")

    asyncio.run(from_the_loop())
    assert [message for *_, message in poster.created] == ["hop"]


def test_a_listener_is_told_once_and_not_after_it_stops_listening() -> None:
    path = events.Events(Poster())  # type: ignore[arg-type]
    told: list[str] = []

    def listener(obj: Any, reason: reasons.Reason, message: str) -> None:
        told.append(message)

    path.listen(listener)
    path.listen(listener)
    path.post(WORKLOAD, reason=reasons.RESTARTED, message="one")
    path.unlisten(listener)
    path.post(WORKLOAD, reason=reasons.RESTARTED, message="two")
    assert told == ["one"]
