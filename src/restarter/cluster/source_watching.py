"""Noticing that a source changed, without holding every Secret or ConfigMap.

Labelled sources, and those that a workload opted in for (``restarter.io/restart-at``, or
Reloader's annotations), restart workloads when they change. This watches the metadata of
every Secret and ConfigMap (names, labels, annotations, resourceVersion: never data) and
keeps the resourceVersion of only the labelled sources and of the unlabelled ones the
reference map says are wanted. A new resourceVersion of one of them is handed on to be
read and compared (``check``, ``check_labelled``): one source at a time, so the operator
holds no more source bodies than the checks in flight, whatever their number and size.
Any other update costs a dictionary lookup. A source that becomes wanted (a workload opts
in, or starts using it) is checked at once, so its first change after that is not taken
for a first sight.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from restarter.cluster.list_watching import (
    PAGE_SIZE,
    WATCH_TIMEOUT,
    ListWatch,
    describe,
    run_in_thread,
)
from restarter.cluster.reference_map import ReferenceMap
from restarter.model import keys
from restarter.model.references import SOURCE_KINDS
from restarter.services.kube.watching import Watcher, WatchStream

log = logging.getLogger(__name__)

#: (kind, namespace, name) of a source to read and compare.
Check = Callable[[str, str, str], None]


def labelled(metadata: dict[str, Any]) -> bool:
    """Labelled sources restart their readers whoever opted in: each version is checked."""
    return keys.RESTART_AT_LABEL in (metadata.get("labels") or {})


class Versions:
    """The resourceVersion last handed on of each labelled source and of each wanted
    unlabelled one; thread-safe."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], str] = {}
        self._labelled: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    def labelled(self, key: tuple[str, str, str], version: str) -> bool:
        """Record ``version`` of a labelled source; True when it is new (to be checked)."""
        with self._lock:
            self._seen.pop(key, None)
            if self._labelled.get(key) == version:
                return False
            self._labelled[(key[0], sys.intern(key[1]), sys.intern(key[2]))] = version
            return True

    def wrote(self, key: tuple[str, str, str], version: str) -> None:
        """restarter wrote ``version`` of a followed source itself (a checksum, a change's
        id): its watch event is an echo, and asks for no check. Any other version still
        does, an earlier one delivered after this included."""
        with self._lock:
            if key in self._labelled:
                self._labelled[key] = version
            elif key in self._seen:
                self._seen[key] = version

    def is_labelled(self, key: tuple[str, str, str]) -> bool:
        with self._lock:
            return key in self._labelled

    def update(self, key: tuple[str, str, str], version: str) -> bool:
        """Record ``version`` of an unlabelled source; True when it is new (to be checked)."""
        with self._lock:
            self._labelled.pop(key, None)
            if self._seen.get(key) == version:
                return False
            self._seen[key] = version
            return True

    def forget(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._seen.pop(key, None)
            self._labelled.pop(key, None)

    def labelled_count(self) -> int:
        with self._lock:
            return len(self._labelled)

    def __len__(self) -> int:
        """Unlabelled sources followed."""
        with self._lock:
            return len(self._seen)


class SourceStream(ListWatch):
    """The metadata of one source kind in one namespace (None: all)."""

    def __init__(
        self,
        api: Watcher,
        reference_map: ReferenceMap,
        kind: str,
        namespace: str | None,
        versions: Versions,
        check: Check,
        stopping: threading.Event,
        on_sync: Callable[[], None],
        check_labelled: Check | None = None,
    ) -> None:
        super().__init__(f"{SOURCE_KINDS[kind]} metadata", namespace, stopping, on_sync)
        self.api, self.reference_map, self.kind = api, reference_map, kind
        self.versions, self.check = versions, check
        self.check_labelled = check_labelled

    def list_page(self, token: str | None) -> dict[str, Any]:
        return self.api.list_source_metadata(self.kind, self.namespace, token, PAGE_SIZE)

    def open_watch(self, resource_version: str) -> WatchStream:
        return self.api.watch_source_metadata(
            self.kind, self.namespace, resource_version, WATCH_TIMEOUT
        )

    def _see(self, metadata: dict[str, Any]) -> None:
        namespace, name = metadata["namespace"], metadata["name"]
        key = (self.kind, namespace, name)
        version = str(metadata.get("resourceVersion", ""))
        if labelled(metadata):
            if self.versions.labelled(key, version) and self.check_labelled is not None:
                self.check_labelled(self.kind, namespace, name)
            return
        if not self.reference_map.wants(namespace, self.kind, name):
            self.versions.forget(key)
            return
        if self.versions.update(key, version):
            self.check(self.kind, namespace, name)

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        # Only a count is kept of the listing: nothing of an unwanted source stays.
        listing[item["metadata"]["namespace"], item["metadata"]["name"]] = None
        self._see(item["metadata"])

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        followed = self.versions.labelled_count()
        return (
            f" (of every kind; {followed} labelled and {len(self.versions)} unlabelled "
            "sources followed, for labels and opt-ins)"
        )

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        if kind == "DELETED":
            self.versions.forget((self.kind, metadata["namespace"], metadata["name"]))
            return
        self._see(metadata)


class SourceWatcher:
    """Both source kinds in every watched namespace, each in a daemon thread. ``check``
    reads and compares a wanted unlabelled source, ``check_labelled`` a labelled one."""

    def __init__(
        self,
        api: Watcher,
        reference_map: ReferenceMap,
        namespaces: tuple[str, ...],
        check: Check,
        check_labelled: Check | None = None,
    ) -> None:
        self.api, self.reference_map, self.check = api, reference_map, check
        self.check_labelled = check_labelled
        self.stopping = threading.Event()
        self.versions = Versions()
        scopes: tuple[str | None, ...] = namespaces or (None,)
        self.streams = [self._stream(kind, scope) for kind in SOURCE_KINDS for scope in scopes]
        reference_map.on_wanted = self.wanted

    def wanted(self, namespace: str, kind: str | None, name: str | None) -> None:
        """The reference map's news: a source became wanted (check it), or any source of a
        namespace may have (list that namespace's metadata again)."""
        if kind is not None and kind not in SOURCE_KINDS:
            return  # a SecretProviderClass: its changes come from the CSI driver's reports
        if kind is not None and name is not None:
            # A labelled source is checked on each version: its next change reaches the
            # source flow anyway.
            if not self.versions.is_labelled((kind, namespace, name)):
                self.check(kind, namespace, name)
            return
        threading.Thread(
            target=self._recheck, args=(namespace,), name=f"recheck-{namespace}", daemon=True
        ).start()

    def _recheck(self, namespace: str) -> None:
        for kind in SOURCE_KINDS:
            stream = self._stream(kind, namespace)
            try:
                stream.list_all()
            except Exception as error:  # the watch's next listing catches up
                log.warning(f"could not list {kind}s in {namespace} again: {describe(error)}")

    def _stream(self, kind: str, scope: str | None) -> SourceStream:
        return SourceStream(
            self.api,
            self.reference_map,
            kind,
            scope,
            self.versions,
            self.check,
            self.stopping,
            _no_sync,
            self.check_labelled,
        )

    def start(self) -> SourceWatcher:
        for stream in self.streams:
            run_in_thread(stream)
        return self

    def stop(self) -> None:
        self.stopping.set()


def _no_sync() -> None:
    """Source streams gate nothing: a change waits for the workload streams only."""
