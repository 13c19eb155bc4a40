"""The source flow's entry: the source watcher (a thread) hands on (kind, namespace, name)
of a source whose resourceVersion is new; here, in kopf's event loop, each is read once and
goes through ``check_source``. One queue for the unlabelled sources that a workload opted
in for, one (``labelled``) for the labelled sources, theirs or those of a namespace that
came into the namespace selector's scope. A queue holds names, never bodies: the sources
in memory at once are at most the checks running (``concurrency``), whatever the number
and size of those waiting."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from restarter.cluster.source_watching import labelled
from restarter.restarting.source_context import SourceContext
from restarter.restarting.stamping import SYNC_POLL, check_source

log = logging.getLogger("restarter.sources")


class ObjectLog(logging.LoggerAdapter[logging.Logger]):
    """A log whose every line names its object first, as kopf's own do (``[ns/name]``): a
    grep for the object's name finds what restarter did with it, whichever path checked it."""

    def __init__(self, logger: logging.Logger, namespace: str, name: str) -> None:
        super().__init__(logger, {"object": f"{namespace}/{name}"})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        return f"[{self.extra['object'] if self.extra else ''}] {msg}", kwargs


#: Sources read and compared at once, at most.
CHECK_CONCURRENCY = 4
#: The same for labelled sources: all of a trust bundle's copies change in the same
#: second; each check waits mostly on the API (its stamps), so more run at once.
LABELLED_CONCURRENCY = 16


class SourceChecks:
    """A queue of sources to check, each queued once however often it is handed on.

    ``context_for(kind, namespace, name)`` makes the context of one check (its log names
    the source: ``ObjectLog``)."""

    def __init__(
        self,
        context_for: Callable[[str, str, str], SourceContext],
        concurrency: int = CHECK_CONCURRENCY,
        labelled: bool = False,
    ) -> None:
        self.context_for = context_for
        self.labelled = labelled
        self.concurrency = concurrency
        self._queued: set[tuple[str, str, str]] = set()
        self._running: set[tuple[str, str, str]] = set()
        self._again: set[tuple[str, str, str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, str, str]] | None = None
        self._early: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """In kopf's loop: the workers that check what is queued (and was, before)."""
        self._queue = asyncio.Queue()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            early, self._early = self._early, []
        for key in early:
            self._put(key)
        self.tasks = [asyncio.create_task(self._work()) for _ in range(self.concurrency)]

    def submit(self, kind: str, namespace: str, name: str) -> None:
        """From any thread: check this source soon."""
        with self._lock:
            if self._loop is None:
                self._early.append((kind, namespace, name))
                return
            loop = self._loop
        loop.call_soon_threadsafe(self._put, (kind, namespace, name))

    def _put(self, key: tuple[str, str, str]) -> None:
        assert self._queue is not None
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            key = await self._queue.get()
            # Unqueued before the read: a change after it is queued (and read) again.
            self._queued.discard(key)
            if key in self._running:
                # One check of a source at a time (its stamps and record are one flow):
                # the new version is read once this check ends.
                self._again.add(key)
                continue
            self._running.add(key)
            try:
                await self.check(*key)
            except Exception as error:  # one source must not stop the others
                log.error(f"could not check {key[0]} {key[1]}/{key[2]}: {error!r}")
                await asyncio.sleep(1.0)
                self._again.add(key)
            finally:
                self._running.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._put(key)

    async def check(self, kind: str, namespace: str, name: str) -> None:
        context = self.context_for(kind, namespace, name)
        # The flow waits for the reference map: read only then, so no body waits with it.
        while not context.in_sync.is_set():
            await asyncio.sleep(SYNC_POLL)
        source = await asyncio.to_thread(context.api.read_source, kind, namespace, name)
        if source is None or labelled(source["metadata"]) is not self.labelled:
            return  # gone, or the other queue's (labelled or unlabelled since it was queued)
        if not context.watched(source):
            return  # no longer wanted
        await check_source(context, source)
