"""The CSINotServed Warning: once per run, however many streams find the driver's kinds not
served, on the operator's own Pod as the downward API names it; none outside a pod."""

from __future__ import annotations

from typing import Any

from restarter.cluster.csi_watching import NotServed
from restarter.model.reasons import CSI_NOT_SERVED
from restarter.services.events import own_pod


class Recorded:
    def __init__(self) -> None:
        self.posted: list[tuple[dict[str, Any], str, str]] = []

    def post(self, obj: dict[str, Any], *, reason: Any, message: str) -> None:
        self.posted.append((obj, reason.name, message))


ENV = {"POD_NAME": "restarter-5f6d-abcde", "POD_NAMESPACE": "ops", "POD_UID": "0d1e-2f"}


def test_own_pod_is_named_by_the_downward_apis_variables() -> None:
    assert own_pod(ENV) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restarter-5f6d-abcde", "namespace": "ops", "uid": "0d1e-2f"},
    }


def test_outside_a_pod_there_is_no_own_pod() -> None:
    assert own_pod({}) is None
    assert own_pod({"POD_NAME": "x"}) is None  # no namespace to post in


def test_said_once_per_run_on_the_own_pod() -> None:
    events = Recorded()
    notice = NotServed(events, own_pod(ENV))  # type: ignore[arg-type]
    notice.tell()
    notice.tell()  # a second namespace's stream
    [(obj, reason, message)] = events.posted
    assert obj["kind"] == "Pod" and obj["metadata"]["name"] == "restarter-5f6d-abcde"
    assert reason == CSI_NOT_SERVED.name == "CSINotServed"
    assert CSI_NOT_SERVED.type == "Warning"
    assert "carries on with Secrets and ConfigMaps" in message
    assert "as soon as the CRDs are installed, without a restart" in message


def test_outside_a_pod_nothing_is_posted() -> None:
    events = Recorded()
    NotServed(events, None).tell()  # type: ignore[arg-type]
    assert events.posted == []
