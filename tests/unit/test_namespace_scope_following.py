"""The namespace stream tells its follower of each namespace entering and leaving the
selector's scope, and a workload stream stopped for a leaving namespace changes the
reference map no more. (tests/integration/test_namespace_selector.py proves the whole
against the real API server.)"""

from __future__ import annotations

import threading
from typing import Any

from restarter.cluster.namespace_watching import NamespaceScope, NamespaceStream
from restarter.cluster.reference_map import ReferenceMap
from restarter.cluster.workload_watching import WorkloadWatcher
from restarter.model.namespaces import parse_selector
from restarter.services.events import Events
from tests.unit.test_workload_stream_resync import Quiet, deployment

SELECTOR = parse_selector("team=payments")


class Follower:
    def __init__(self) -> None:
        self.told: list[str] = []

    def entered(self, namespace: str, starting: bool) -> None:
        self.told.append(f"{'start' if starting else 'enter'} {namespace}")

    def left(self, namespace: str) -> None:
        self.told.append(f"leave {namespace}")


def namespace(name: str, team: str | None = None, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"team": team} if team else {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return {"metadata": metadata}


def listing(stream: NamespaceStream, *namespaces: dict[str, Any]) -> None:
    taken: dict[tuple[str, str], Any] = {}
    for item in namespaces:
        stream.take(item, taken)
    stream.took_listing(taken)
    stream.synced.set()
    stream.on_sync()


def test_the_first_listing_starts_the_matching_namespaces_and_events_move_them() -> None:
    follower = Follower()
    stream = NamespaceStream(None, SELECTOR, follower, threading.Event())  # type: ignore[arg-type]
    listing(stream, namespace("shop", "payments"), namespace("web", "other"), namespace("x"))
    assert follower.told == ["start shop"]
    assert stream.listed.is_set()

    stream.take_event("MODIFIED", namespace("web", "payments"))
    stream.take_event("MODIFIED", namespace("web", "payments"))  # no news: nothing told
    stream.take_event("MODIFIED", namespace("shop", None))
    stream.take_event("ADDED", namespace("new", "payments"))
    stream.take_event("MODIFIED", namespace("new", "payments", deleting=True))
    stream.take_event("DELETED", namespace("web", "payments"))
    assert follower.told == [
        "start shop",
        "enter web",
        "leave shop",
        "enter new",
        "leave new",
        "leave web",
    ]


def test_a_relisting_moves_what_changed_while_the_watch_was_down() -> None:
    follower = Follower()
    stream = NamespaceStream(None, SELECTOR, follower, threading.Event())  # type: ignore[arg-type]
    listing(stream, namespace("shop", "payments"), namespace("web"))
    listing(stream, namespace("shop"), namespace("web", "payments"))
    assert follower.told == ["start shop", "leave shop", "enter web"]


def test_without_a_selector_the_scope_includes_every_namespace() -> None:
    assert NamespaceScope().includes("anything")
    scope = NamespaceScope(SELECTOR)
    assert not scope.includes("shop")
    scope.add("shop")
    assert scope.includes("shop") and not scope.includes("web")
    scope.discard("shop")
    assert not scope.includes("shop")


def test_a_namespace_left_is_dropped_from_the_map_and_its_stream_adds_nothing_after() -> None:
    reference_map = ReferenceMap()
    watcher = WorkloadWatcher(None, reference_map, (), Quiet(), Events(None))  # type: ignore[arg-type]
    assert watcher.streams == []
    in_sync_then: list[bool] = []
    watcher.watch_namespace("shop", lambda: in_sync_then.append(watcher.in_sync.is_set()))
    # Sources wait until the new streams have listed, from before the scope includes it.
    assert in_sync_then == [False] and not watcher.in_sync.is_set()
    stream = next(s for s in watcher.streams if s.plural == "deployments")
    stream.take_event("ADDED", deployment("web", "db", "1"))
    assert reference_map.dependents("shop", "secret", "db") == [("deployments", "web")]

    watcher.unwatch_namespace("shop")
    assert reference_map.dependents("shop", "secret", "db") == []
    assert watcher.streams == [] and watcher.in_sync.is_set()
    # What the stopped stream still had in flight (its watch ends later) is not kept.
    stream.take_event("MODIFIED", deployment("web", "db", "2"))
    stream.took_listing({("shop", "api"): frozenset()})
    assert reference_map.dependents("shop", "secret", "db") == []
    assert len(reference_map) == 0
