"""A Namespace's hold comes from the namespace stream while it is in sync, with no read of
the Namespace; the Namespace is read only while the stream has not listed (or lists
again). (tests/integration/test_namespace_selector.py holds a restart by a watched
namespace's hold on the real API server.)"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from restarter.cluster.namespace_watching import NamespaceStream
from restarter.model import keys
from restarter.operator.components import Components
from restarter.restarting.blocking import HoldBlocker
from restarter.services import settings as settings_module
from restarter.services.kube.api import Api
from tests.unit.test_namespace_scope_following import SELECTOR, Follower, listing

NOW = dt.datetime(2026, 12, 7, 3, 0, tzinfo=dt.UTC)


def namespace(name: str, hold: str | None = None, team: str = "payments") -> dict[str, Any]:
    annotations = {keys.HOLD: hold} if hold is not None else {}
    return {"metadata": {"name": name, "labels": {"team": team}, "annotations": annotations}}


class Reads:
    """A reader that counts its reads of Namespaces."""

    def __init__(self, holds: dict[str, str]) -> None:
        self.holds, self.reads = holds, 0

    def read_namespace(self, name: str) -> dict[str, Any]:
        self.reads += 1
        return namespace(name, self.holds.get(name))


def workload(namespace_name: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": namespace_name, "annotations": {}}}


def test_holds_follow_the_listing_and_the_watch_without_a_read() -> None:
    stream = NamespaceStream(None, SELECTOR, Follower(), threading.Event())  # type: ignore[arg-type]
    reads = Reads({})
    blocker = HoldBlocker(reads, watched=stream.holds)  # type: ignore[arg-type]
    listing(stream, namespace("shop", "freeze"), namespace("web"))
    held = blocker.blocks(workload("shop"), NOW)
    assert held is not None and held.reason == "freeze" and held.name == "shop"
    assert blocker.blocks(workload("web"), NOW) is None

    stream.take_event("MODIFIED", namespace("shop"))
    stream.take_event("MODIFIED", namespace("web", "migration"))
    assert blocker.blocks(workload("shop"), NOW) is None
    held = blocker.blocks(workload("web"), NOW)
    assert held is not None and held.reason == "migration"
    stream.take_event("DELETED", namespace("web", "migration"))
    assert blocker.blocks(workload("web"), NOW) is None
    assert reads.reads == 0


def test_a_hold_counts_in_a_namespace_outside_the_selector_and_without_one() -> None:
    """Holds are kept for every Namespace; with no selector the stream tells no follower."""
    stream = NamespaceStream(None, None, None, threading.Event())  # type: ignore[arg-type]
    listing(stream, namespace("shop", "freeze", team="other"))
    stream.take_event("ADDED", namespace("new", "new freeze", team="other"))
    assert stream.holds.hold("shop") == "freeze"
    assert stream.holds.hold("new") == "new freeze"


def test_until_the_stream_is_in_sync_the_namespace_is_read() -> None:
    stream = NamespaceStream(None, SELECTOR, Follower(), threading.Event())  # type: ignore[arg-type]
    reads = Reads({"shop": "freeze"})
    blocker = HoldBlocker(reads, watched=stream.holds)  # type: ignore[arg-type]
    held = blocker.blocks(workload("shop"), NOW)
    assert held is not None and held.reason == "freeze"
    assert reads.reads == 1
    listing(stream, namespace("shop"))
    assert blocker.blocks(workload("shop"), NOW) is None
    stream.synced.clear()  # the watch broke: read again (the hold set meanwhile counts)
    assert blocker.blocks(workload("other"), NOW) is None
    assert reads.reads == 2


def test_the_operator_asks_the_holds_its_namespace_stream_keeps() -> None:
    """Wired as the operator runs (cluster mode, with and without a selector): the hold
    blocker reads the very holds the namespace stream writes."""
    for flags in ([], ["--namespace-selector", "team=payments"]):
        settings = settings_module.build(flags)
        parts = Components(settings, Api(None), None, lambda _: None)  # type: ignore[arg-type]
        assert parts.namespaces is not None
        holds = parts.namespaces.stream.holds
        [blocker] = [b for b in parts.blockers.blockers if isinstance(b, HoldBlocker)]
        assert blocker.watched is holds
        listing(parts.namespaces.stream, namespace("shop", "freeze"))
        held = blocker.blocks(workload("shop"), NOW)
        assert held is not None and held.reason == "freeze"
