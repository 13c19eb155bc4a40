"""Which namespaces restarter acts in, kept current from a list and watch of Namespaces.

With a namespace selector (``--namespace-selector``) restarter runs cluster-wide but acts
only in the namespaces whose labels match it. This stream lists and watches every
Namespace (they are few and small), asks the selector of each, and tells the scope's
owner of each namespace that starts or stops matching (``Follower``). Without a selector
the scope includes every namespace and nothing here runs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from restarter.cluster.list_watching import PAGE_SIZE, WATCH_TIMEOUT, ListWatch
from restarter.model.namespaces import NamespaceSelector
from restarter.services.kube.watching import Watcher, WatchStream

log = logging.getLogger(__name__)


class Follower(Protocol):
    """Told, in the stream's thread and in order, of each namespace entering or leaving."""

    def entered(self, namespace: str, starting: bool) -> None:
        """``namespace`` now matches; ``starting`` on the operator's first listing."""

    def left(self, namespace: str) -> None: ...


class NamespaceScope:
    """The namespaces restarter acts in now; thread-safe. No selector: every namespace."""

    def __init__(self, selector: NamespaceSelector | None = None) -> None:
        self.selector = selector
        self._matching: set[str] = set()
        self._lock = threading.Lock()

    def includes(self, namespace: str | None) -> bool:
        if self.selector is None:
            return True
        with self._lock:
            return namespace in self._matching

    def add(self, namespace: str) -> None:
        with self._lock:
            self._matching.add(namespace)

    def discard(self, namespace: str) -> None:
        with self._lock:
            self._matching.discard(namespace)


class NamespaceStream(ListWatch):
    """Every Namespace: each one's labels against the selector, the follower told of news."""

    def __init__(
        self,
        api: Watcher,
        selector: NamespaceSelector,
        follower: Follower,
        stopping: threading.Event,
    ) -> None:
        super().__init__("namespaces", None, stopping, self._listed_once)
        self.api, self.selector, self.follower = api, selector, follower
        self.matching: set[str] = set()
        self.listed = threading.Event()
        """Set once the first listing has been followed: the scope is known."""

    def _listed_once(self) -> None:
        if self.synced.is_set():
            self.listed.set()

    def list_page(self, token: str | None) -> dict[str, Any]:
        return self.api.list_namespaces(token, PAGE_SIZE)

    def open_watch(self, resource_version: str) -> WatchStream:
        return self.api.watch_namespaces(resource_version, WATCH_TIMEOUT)

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        metadata = item["metadata"]
        listing["", metadata["name"]] = self._matches(metadata)

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        now = {name for (_, name), matches in listing.items() if matches}
        starting = not self.listed.is_set()
        for name in sorted(self.matching - now):
            self._leave(name)
        for name in sorted(now - self.matching):
            self._enter(name, starting)
        return f" ({len(now)} match {self.selector.text!r}: {', '.join(sorted(now)) or 'none'})"

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        name = metadata.get("name", "")
        if kind != "DELETED" and self._matches(metadata):
            if name not in self.matching:
                self._enter(name, False)
        elif name in self.matching:
            self._leave(name)

    def _matches(self, metadata: dict[str, Any]) -> bool:
        # A namespace being deleted is left at once: its workloads go with it.
        return "deletionTimestamp" not in metadata and self.selector.matches(metadata.get("labels"))

    def _enter(self, name: str, starting: bool) -> None:
        log.info(f"namespace {name} matches {self.selector.text!r}: watching it")
        self.matching.add(name)
        self.follower.entered(name, starting)

    def _leave(self, name: str) -> None:
        log.info(f"namespace {name} no longer matches {self.selector.text!r}: leaving it")
        self.matching.discard(name)
        self.follower.left(name)


class NamespaceWatcher:
    """The namespace stream in a daemon thread."""

    def __init__(self, api: Watcher, selector: NamespaceSelector, follower: Follower) -> None:
        self.stopping = threading.Event()
        self.stream = NamespaceStream(api, selector, follower, self.stopping)

    def start(self) -> NamespaceWatcher:
        threading.Thread(target=self.stream.run, name="watch-namespaces", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
