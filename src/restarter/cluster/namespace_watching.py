"""Which namespaces restarter acts in, and their holds, kept current from a list and watch
of Namespaces.

With a namespace selector (``--namespace-selector``) restarter runs cluster-wide but acts
only in the namespaces whose labels match it. This stream lists and watches every
Namespace (they are few and small), asks the selector of each, and tells the scope's
owner of each namespace that starts or stops matching (``Follower``). Without a selector
the scope includes every namespace: in cluster mode the stream runs only to keep the
holds.

Either way it keeps each Namespace's ``restarter.io/hold`` (``NamespaceHolds``), so a due
restart asks the hold of its Namespace without a request of its own.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from restarter.cluster.list_watching import PAGE_SIZE, WATCH_TIMEOUT, ListWatch
from restarter.model import keys
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


class NamespaceHolds:
    """Each Namespace's ``restarter.io/hold`` as the namespace stream last saw it (only
    those that carry one); thread-safe. ``known`` is False until the stream has listed,
    and while it lists again after a broken watch: askers then read the Namespace."""

    def __init__(self) -> None:
        self.synced = threading.Event()
        self._holds: dict[str, str] = {}
        self._lock = threading.Lock()

    def known(self) -> bool:
        return self.synced.is_set()

    def hold(self, namespace: str) -> str | None:
        with self._lock:
            return self._holds.get(namespace)

    def count(self) -> int:
        """How many Namespaces carry a hold (a method, not ``len``: an empty table must
        not be falsy where one is passed on)."""
        with self._lock:
            return len(self._holds)

    def replace(self, holds: dict[str, str]) -> None:
        with self._lock:
            self._holds = holds

    def seen(self, namespace: str, hold: str | None) -> None:
        with self._lock:
            if hold is None:
                self._holds.pop(namespace, None)
            else:
                self._holds[namespace] = hold


class NamespaceStream(ListWatch):
    """Every Namespace: each one's labels against the selector, the follower told of news,
    and its hold kept. No selector: every namespace matches and no follower is told."""

    def __init__(
        self,
        api: Watcher,
        selector: NamespaceSelector | None,
        follower: Follower | None,
        stopping: threading.Event,
        holds: NamespaceHolds | None = None,
    ) -> None:
        super().__init__("namespaces", None, stopping, self._listed_once)
        self.api, self.selector, self.follower = api, selector, follower
        self.holds = holds if holds is not None else NamespaceHolds()
        # In sync exactly when the holds are current: the stream's own event.
        self.synced = self.holds.synced
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
        listing["", metadata["name"]] = (self._matches(metadata), _hold(metadata))

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        self.holds.replace(
            {name: hold for (_, name), (_, hold) in listing.items() if hold is not None}
        )
        if self.selector is None:
            return f" ({self.holds.count()} with a hold)"
        now = {name for (_, name), (matches, _) in listing.items() if matches}
        starting = not self.listed.is_set()
        for name in sorted(self.matching - now):
            self._leave(name)
        for name in sorted(now - self.matching):
            self._enter(name, starting)
        return f" ({len(now)} match {self.selector.text!r}: {', '.join(sorted(now)) or 'none'})"

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        name = metadata.get("name", "")
        self.holds.seen(name, None if kind == "DELETED" else _hold(metadata))
        if self.selector is None:
            return
        if kind != "DELETED" and self._matches(metadata):
            if name not in self.matching:
                self._enter(name, False)
        elif name in self.matching:
            self._leave(name)

    def _matches(self, metadata: dict[str, Any]) -> bool:
        # A namespace being deleted is left at once: its workloads go with it.
        if "deletionTimestamp" in metadata:
            return False
        return self.selector is None or self.selector.matches(metadata.get("labels"))

    def _enter(self, name: str, starting: bool) -> None:
        assert self.selector is not None and self.follower is not None
        log.info(f"namespace {name} matches {self.selector.text!r}: watching it")
        self.matching.add(name)
        self.follower.entered(name, starting)

    def _leave(self, name: str) -> None:
        assert self.selector is not None and self.follower is not None
        log.info(f"namespace {name} no longer matches {self.selector.text!r}: leaving it")
        self.matching.discard(name)
        self.follower.left(name)


def _hold(metadata: dict[str, Any]) -> str | None:
    return (metadata.get("annotations") or {}).get(keys.HOLD)


class NamespaceWatcher:
    """The namespace stream in a daemon thread (no selector: only for the holds)."""

    def __init__(
        self,
        api: Watcher,
        selector: NamespaceSelector | None,
        follower: Follower | None,
        holds: NamespaceHolds | None = None,
    ) -> None:
        self.stopping = threading.Event()
        self.stream = NamespaceStream(api, selector, follower, self.stopping, holds)

    def start(self) -> NamespaceWatcher:
        threading.Thread(target=self.stream.run, name="watch-namespaces", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
