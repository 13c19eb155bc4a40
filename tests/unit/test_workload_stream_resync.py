"""A workload stream is in sync only when its map is current.

A scripted API stands in for the apiserver's list and watch (the cluster test in
tests/integration/test_reference_map_on_cluster.py proves the same against a real one):
here the order of calls is fixed, so the race a real cut only sometimes shows is
reproduced every time.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from restarter.cluster import list_watching
from restarter.cluster.reference_map import ReferenceMap
from restarter.cluster.workload_streams import Stream
from restarter.services.events import Events
from restarter.services.kube.watching import WatchStream

NAMESPACE = "shop"


def deployment(name: str, secret: str | None, resource_version: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app"}
    if secret:
        container["envFrom"] = [{"secretRef": {"name": secret}}]
    return {
        "metadata": {"namespace": NAMESPACE, "name": name, "resourceVersion": resource_version},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


class Response:
    """A streaming watch response: lines of JSON events, then the end of the stream."""

    def __init__(self, events: list[dict[str, Any]], error: Exception | None) -> None:
        self.lines = [json.dumps(event).encode() + b"\n" for event in events]
        self.error = error

    def stream(self, *_: Any, **__: Any) -> Any:
        yield from self.lines
        if self.error:
            raise self.error

    def release_conn(self) -> None:
        pass


class ScriptedApi:
    """Lists return ``state``; each watch plays the next script entry: the events it
    delivers after connecting, the failure that ends it (None: the server ends it on
    time), and what changes in the cluster while it is down."""

    def __init__(self) -> None:
        self.state: dict[str, dict[str, Any]] = {}
        self.revision = 1
        self.calls: list[str] = []
        self.script: list[tuple[list[dict[str, Any]], Exception | None, Callable[[], None]]] = []
        self.stopping = threading.Event()

    def list_page(self, plural: str, namespace: Any, token: Any, limit: int) -> dict[str, Any]:
        self.calls.append("list")
        return {
            "items": list(self.state.values()),
            "metadata": {"resourceVersion": str(self.revision)},
        }

    def watch(
        self, plural: str, namespace: Any, resource_version: str, timeout: int
    ) -> WatchStream:
        self.calls.append(f"watch from {resource_version}")
        if not self.script:
            self.stopping.set()
            return WatchStream(Response([], None))
        events, error, meanwhile = self.script.pop(0)
        meanwhile()
        return WatchStream(Response(events, error))


class Quiet:
    def observe(self, plural: str, body: dict[str, Any]) -> None:
        pass

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        pass

    def listed(self, plural: str, namespace: Any, present: set[tuple[str, str]]) -> None:
        pass


def run_stream(
    api: ScriptedApi, reference_map: ReferenceMap, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[bool, list[tuple[str, str]]]]:
    """Run one stream to the end of the script; at each report of its sync state, whether
    it was in sync and what the map said of the users of the Secret ``db``."""
    monkeypatch.setattr(list_watching, "RETRY_DELAY", 0.0)
    seen: list[tuple[bool, list[tuple[str, str]]]] = []

    def on_sync() -> None:
        seen.append((stream.synced.is_set(), reference_map.dependents(NAMESPACE, "secret", "db")))

    stream = Stream(
        api=api,  # type: ignore[arg-type]
        reference_map=reference_map,
        plural="deployments",
        namespace=NAMESPACE,
        inspect=Quiet(),
        stopping=api.stopping,
        on_sync=on_sync,
        events=Events(api),  # type: ignore[arg-type]
    )
    stream.run()
    return seen


def test_after_a_failed_watch_the_stream_lists_before_it_counts_as_in_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = ScriptedApi()
    api.state["web"] = deployment("web", None, "1")

    def web_starts_using_db() -> None:
        api.revision = 2
        api.state["web"] = deployment("web", "db", "2")

    # The first watch is cut; meanwhile web starts using db. A resumed watch would deliver
    # that only after connecting, and a change handled in between would miss web.
    api.script.append(([], ConnectionResetError("cut"), web_starts_using_db))
    reference_map = ReferenceMap()

    seen = run_stream(api, reference_map, monkeypatch)

    assert api.calls == ["list", "watch from 1", "list", "watch from 2"]
    after_the_cut = seen[seen.index((False, [])) + 1 :]
    assert after_the_cut, seen
    assert all(users == [("deployments", "web")] for synced, users in after_the_cut if synced)


def test_a_watch_the_server_ends_on_time_resumes_without_listing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = ScriptedApi()
    api.state["web"] = deployment("web", "db", "1")
    stops_using_db = {"type": "MODIFIED", "object": deployment("web", None, "5")}
    api.script.append(([stops_using_db], None, lambda: None))
    reference_map = ReferenceMap()

    run_stream(api, reference_map, monkeypatch)

    assert api.calls == ["list", "watch from 1", "watch from 5"]
    assert reference_map.dependents(NAMESPACE, "secret", "db") == []
