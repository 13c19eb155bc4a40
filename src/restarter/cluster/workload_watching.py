"""Keeping the reference map current: every workload kind's stream
(``workload_streams``) in every watched namespace, each in a daemon thread.

One thread per (kind, namespace) stream; under a namespace selector one per kind, for
every namespace, with the inspector told only of the namespaces in scope.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from restarter.cluster.list_watching import PAGE_SIZE, describe, run_in_thread
from restarter.cluster.reference_map import ReferenceMap
from restarter.cluster.workload_streams import Inspector, RolloutStream, ServedAsked, Stream
from restarter.model.kinds import APPS_KINDS, KINDS, ROLLOUTS, WORKLOAD_KINDS
from restarter.services.events import Events
from restarter.services.kube.api import Api

log = logging.getLogger(__name__)


class ScopedInspector:
    """Cluster-wide streams under a namespace selector: the inspector is told only of the
    workloads of namespaces in scope (``includes``), and forgets a namespace's workloads
    when it leaves. The reference map keeps every namespace's references (one stream per
    kind, not one per kind and namespace: a thousand matching namespaces would otherwise
    hold three thousand threads and watches); what acts on a workload asks the scope."""

    def __init__(self, inner: Inspector, includes: Callable[[str], bool]) -> None:
        self.inner, self.includes = inner, includes
        self._known: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        if self.includes(namespace):
            with self._lock:
                self._known.setdefault(namespace, set()).add((plural, name))
            self.inner.observe(plural, body)
        else:
            self.deleted(plural, namespace, name)

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        with self._lock:
            known = self._known.get(namespace)
            if known is None or (plural, name) not in known:
                return
            known.discard((plural, name))
            if not known:
                del self._known[namespace]
        self.inner.deleted(plural, namespace, name)

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        inside = {key for key in present if self.includes(key[0])}
        with self._lock:
            for known in self._known.values():
                known.difference_update([key for key in known if key[0] == plural])
            for known_namespace, name in inside:
                self._known.setdefault(known_namespace, set()).add((plural, name))
            for empty in [ns for ns, known in self._known.items() if not known]:
                del self._known[empty]
        self.inner.listed(plural, namespace, inside)

    def leave(self, namespace: str) -> None:
        """The namespace left the scope: its workloads are forgotten."""
        with self._lock:
            known = self._known.pop(namespace, set())
        for plural, name in known:
            self.inner.deleted(plural, namespace, name)


class WorkloadWatcher:
    """Every workload kind in every watched namespace, each in a daemon thread.

    ``scopes`` are the namespaces watched (None: all of them). Under a namespace selector
    (``scoped``) the streams are cluster-wide, and ``watch_namespace`` and
    ``unwatch_namespace`` tell the scoped inspector of the namespaces that match.
    """

    def __init__(
        self,
        api: Api,
        reference_map: ReferenceMap,
        scopes: tuple[str | None, ...],
        inspect: Inspector,
        events: Events,
        reloader: bool = False,
        on_rollouts_served: Callable[[], None] | None = None,
        scoped: ScopedInspector | None = None,
    ) -> None:
        self.api, self.reference_map, self.inspect = api, reference_map, inspect
        self.events = events
        self.scoped = scoped
        self.reloader = reloader
        self.in_sync = threading.Event()
        self.on_rollouts_served = on_rollouts_served
        self.rollouts_served = ServedAsked(api)
        self.streams: list[Stream] = []
        self._lock = threading.Lock()
        self._started = False
        for scope in scopes:
            self._add(scope)

    def _add(self, namespace: str | None) -> list[Stream]:
        streams: list[Stream] = []
        for plural in WORKLOAD_KINDS:
            arguments: dict[str, Any] = {
                "api": self.api,
                "reference_map": self.reference_map,
                "plural": plural,
                "namespace": namespace,
                "inspect": self.inspect,
                "stopping": threading.Event(),
                "on_sync": self._update,
                "events": self.events,
                "reloader": self.reloader,
            }
            if KINDS[plural].built_in:
                streams.append(Stream(**arguments))
            elif self.on_rollouts_served is not None:
                streams.append(
                    RolloutStream(
                        **arguments, on_served=self.on_rollouts_served, served=self.rollouts_served
                    )
                )
        with self._lock:
            self.streams += streams
        return streams

    def kinds(self) -> tuple[str, ...]:
        """The workload kinds there are to act on: Rollouts when wanted and served (asked
        of discovery at most once per interval)."""
        if self.on_rollouts_served is None:
            return APPS_KINDS
        try:
            served = self.rollouts_served()
        except Exception as error:  # as last known; the streams ask again
            log.warning(f"could not ask whether Rollouts are served: {describe(error)}")
            served = self.rollouts_served.known
        return (*APPS_KINDS, ROLLOUTS) if served else APPS_KINDS

    def _update(self) -> None:
        """in_sync: every stream has listed and none is between a failure and its retry."""
        with self._lock:
            synced = all(stream.synced.is_set() for stream in self.streams)
        if synced:
            self.in_sync.set()
        else:
            self.in_sync.clear()

    def start(self) -> WorkloadWatcher:
        with self._lock:
            self._started = True
            streams = list(self.streams)
        for stream in streams:
            run_in_thread(stream)
        self._update()
        return self

    def watch_namespace(self, namespace: str, before_start: Callable[[], None]) -> None:
        """A namespace came into scope: list and watch its workloads. Until they are
        listed, in_sync is clear, so no change of a source is handled without them;
        ``before_start`` runs once it is clear, before the first listing.

        Under a namespace selector the cluster-wide streams hold its workloads already:
        ``before_start`` (which puts it in scope) runs at once, and once the streams run,
        one listing of each kind there tells the inspector of its workloads."""
        if self.scoped is not None:
            before_start()
            with self._lock:
                started = self._started
            if started:
                self._inspect_listing(namespace)
            return
        with self._lock:
            if any(stream.namespace == namespace for stream in self.streams):
                return
        streams = self._add(namespace)
        self._update()
        before_start()
        with self._lock:
            started = self._started
        if started:
            for stream in streams:
                run_in_thread(stream)

    def unwatch_namespace(self, namespace: str) -> None:
        """A namespace left the scope: stop its streams and drop its workloads from the map
        (under a namespace selector: the inspector forgets them; the map keeps them)."""
        if self.scoped is not None:
            self.scoped.leave(namespace)
            return
        with self._lock:
            leaving = [stream for stream in self.streams if stream.namespace == namespace]
            self.streams = [stream for stream in self.streams if stream not in leaving]
        for stream in leaving:
            stream.stop()
            self.reference_map.replace(stream.plural, namespace, {})
            self.inspect.listed(stream.plural, namespace, set())
        self._update()

    def _inspect_listing(self, namespace: str) -> None:
        """Every workload of the namespace, page by page, to the inspector."""
        for plural in self.kinds():
            token: str | None = None
            while True:
                page = self.api.list_page(plural, namespace, token, PAGE_SIZE)
                for item in page.get("items") or []:
                    self.inspect.observe(plural, item)
                token = page["metadata"].get("continue")
                if not token:
                    break

    def stop(self) -> None:
        """Ask every stream to stop; a watch blocked on the network ends with the process."""
        with self._lock:
            self._started = False
            streams = list(self.streams)
        for stream in streams:
            stream.stopping.set()
