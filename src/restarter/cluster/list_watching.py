"""The machinery of every stream that keeps a view current: a paged list, then a watch,
forever, in a daemon thread.

A list is consistent (served by etcd at one revision) and paged; if its continue token
expires mid-way (410), it starts again, so start-up never stops on a long list. A watch the
server ends on time resumes from the last resourceVersion seen (bookmarks keep it fresh); a
watch that fails (410, a lost connection, an error) makes the stream list again, and what
it keeps follows that listing (deleted objects dropped, none invented). A stream is in sync
only once what it keeps is current: after a listing, or while an unbroken watch runs.
What is listed and watched, and what is kept of it, is each subclass's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from restarter.model import bodies
from restarter.services.kube import errors
from restarter.services.kube.errors import ApiError, Expired
from restarter.services.kube.watching import WatchStream

log = logging.getLogger(__name__)

#: Objects per list page: about 2 MB of JSON for typical Deployments.
PAGE_SIZE = 500
#: Seconds a watch request stays open before the server ends it and we resume.
WATCH_TIMEOUT = 300
#: Seconds to wait after a failed list or watch, doubling up to the maximum.
RETRY_DELAY, MAX_RETRY_DELAY = 1.0, 30.0


class ListWatch:
    """One resource in one namespace (None: all): a paged list, then a watch, forever.

    Subclasses say what to list and watch (``list_page``, ``open_watch``) and what to do
    with what arrives (``take``, ``took_listing``, ``take_event``).
    """

    def __init__(
        self,
        resource: str,
        namespace: str | None,
        stopping: threading.Event,
        on_sync: Callable[[], None],
    ) -> None:
        self.resource, self.namespace = resource, namespace
        self.stopping, self.on_sync = stopping, on_sync
        self.synced = threading.Event()
        self.lists = 0
        self.scope = namespace or "all namespaces"

    def list_page(self, token: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def open_watch(self, resource_version: str) -> WatchStream:
        raise NotImplementedError

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        """One listed object, into ``listing`` ((namespace, name) → what is kept of it)."""
        raise NotImplementedError

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        """A complete listing arrived; what to add to its log line."""
        raise NotImplementedError

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED or DELETED)."""
        raise NotImplementedError

    def decode_event(self, line: str) -> dict[str, Any]:
        """One line of the watch as plain dicts: only the fields restarter reads become
        objects (model/bodies.py)."""
        return bodies.decode_watch_event(line)

    def run(self) -> None:
        resource_version: str | None = None
        delay = RETRY_DELAY
        while not self.stopping.is_set():
            try:
                if resource_version is None:
                    resource_version = self.list_all()
                    self._synced(True)
                resource_version = self.watch_from(resource_version)
                delay = RETRY_DELAY
            except Expired:
                # Until the new listing lands, changes wait rather than miss a new user.
                self._synced(False)
                log.info(f"{self.resource} in {self.scope}: watch history expired; listing again")
                resource_version = None
            except Exception as error:  # the stream must outlive any one failure
                self._synced(False)
                log.warning(
                    f"{self.resource} in {self.scope}: {describe(error)}; listing in {delay:g}s"
                )
                # A resumed watch would be in sync on connecting but deliver what changed
                # during the failure only afterwards: a change handled in between would miss
                # a workload that started using its source meanwhile. A listing is current.
                resource_version = None
                if self.stopping.wait(delay):
                    return
                delay = min(delay * 2, MAX_RETRY_DELAY)

    def _synced(self, value: bool) -> None:
        if value:
            self.synced.set()
        else:
            self.synced.clear()
        self.on_sync()

    def list_all(self) -> str:
        """A complete listing taken; the resourceVersion to watch from."""
        while True:
            try:
                listed, resource_version = self._pages()
            except Expired:
                log.info(f"{self.resource} in {self.scope}: list expired mid-way; listing again")
                continue
            noted = self.took_listing(listed)
            self.lists += 1
            log.info(f"listed {len(listed)} {self.resource} in {self.scope}{noted}")
            return resource_version

    def _pages(self) -> tuple[dict[tuple[str, str], Any], str]:
        listed: dict[tuple[str, str], Any] = {}
        token: str | None = None
        while True:
            page = self.list_page(token)
            for item in page.get("items") or []:
                self.take(item, listed)
            token = page["metadata"].get("continue")
            if not token:
                return listed, str(page["metadata"]["resourceVersion"])

    def watch_from(self, resource_version: str) -> str:
        """Take watch events until the server ends the watch; the last version seen."""
        stream = self.open_watch(resource_version)
        try:
            # In sync already: a watch starts only after a listing or an unbroken watch.
            for event in _events(stream, self.decode_event):
                kind, body = event.get("type"), event.get("object") or {}
                if kind == "ERROR":  # its object is a Status: 410 is Expired
                    raise errors.from_status(body)
                metadata = body.get("metadata") or {}
                resource_version = str(metadata.get("resourceVersion", resource_version))
                if kind == "BOOKMARK":
                    continue
                self.take_event(str(kind), body)
                if self.stopping.is_set():
                    break
        finally:
            stream.close()
        return resource_version


def _events(
    stream: WatchStream, decode: Callable[[str], dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    for line in stream.lines():
        if line:
            yield decode(line)


def describe(error: Exception) -> str:
    """A stream's failure in its log line: the API's, as ``describe`` says it; any other
    (a bug, a body that cannot be decoded) by its type and message."""
    if isinstance(error, ApiError):
        return error.describe()
    return f"{type(error).__name__}: {error}"


def run_in_thread(stream: ListWatch) -> None:
    threading.Thread(
        target=stream.run, name=f"watch-{stream.resource}-{stream.scope}", daemon=True
    ).start()
