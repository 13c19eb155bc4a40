"""What every step of the source flow needs: ``SourceContext``, made per source event, and
``SourceTurns``, which lets one check of a source run at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from restarter.cluster.reference_map import ReferenceMap
from restarter.model import (
    keys,
)
from restarter.restarting.admitting import Admissions
from restarter.restarting.rollout_groups import RolloutGroups
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.settings import Settings


class SourceTurns:
    """One check of a source at a time, whichever path brought it (kopf's event, or the
    source checks' queue): the second then finds the change recorded, and stamps nothing.
    Used in kopf's event loop only."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, key: tuple[str, str, str]) -> AsyncIterator[None]:
        lock, waiting = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, waiting + 1)
        try:
            async with lock:
                yield
        finally:
            lock, waiting = self._locks[key]
            if waiting == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, waiting - 1)


@dataclass(frozen=True, kw_only=True)
class SourceContext:
    """What every step of one source event needs; the source's handler makes one per event.

    The flow reads ``kind``, ``settings``, ``api``, ``reference_map`` and ``in_sync``, and
    changes ``checksums`` (and, through ``api``, the source and its dependents).
    """

    kind: str
    """``secret`` or ``configmap``."""

    settings: Settings
    api: Api

    reference_map: ReferenceMap
    """Who uses which source, kept by restarter's own workload streams."""

    in_sync: threading.Event
    """Set while every workload stream has listed: the map then lacks no user."""

    checksums: MutableMapping[tuple[str, str, str], str]
    """(kind, namespace, name) → the checksum recorded on the source in this run; shared
    by every source handler."""

    logger: logging.Logger | logging.LoggerAdapter[Any]
    """kopf's logger of this source (restarter's own for a source kopf does not watch)."""

    events: Events
    """The one Event path (posted from the flow's thread, never from the event loop)."""

    turns: SourceTurns | None = None
    """Shared by every path that checks sources, so that one source is checked at a time."""

    groups: RolloutGroups | None = None
    """The rollout groups' members and their wave records, shared with the breaker."""

    wrote: Callable[[tuple[str, str, str], str], None] | None = None
    """Told each resourceVersion the flow itself wrote on a source ((kind, namespace,
    name), version), so that its echo on the sources' watch is not read again."""

    admissions: Admissions | None = None
    """The places at kopf's timers: a stamp sent while its window is open takes one and
    hands its workload over itself (None: every stamp leaves that to the admitter)."""

    def watched(self, source: Mapping[str, Any]) -> bool:
        """True while a change of the source can restart something: it is labelled, or a
        workload that opted in may ask for it."""
        metadata = source["metadata"]
        if keys.RESTART_AT_LABEL in (metadata.get("labels") or {}):
            return True
        return self.reference_map.wants(metadata["namespace"], self.kind, metadata["name"])
