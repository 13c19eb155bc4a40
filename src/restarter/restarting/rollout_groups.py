"""Rollout groups: which sources share a ``restarter.io/rollout-group``, and the wave record
each carries, as restarter last saw it.

Fed by every source restarter checks (kopf's events of labelled sources, the checks of
opted-in ones: at start-up, every source) and by the breaker's own reads and writes, so
an operator that restarts knows its groups again once it has listed its sources. Only a
source that carries a wave record of a group is kept: a few names and a short string each.
Thread-safe: the source handlers and the timers' threads call in concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from restarter.model import waves
from restarter.model.waves import SourceKey, WaveRecord


class RolloutGroups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: dict[str, dict[SourceKey, WaveRecord]] = {}
        self._group_of: dict[SourceKey, str] = {}

    def observe(self, kind: str, metadata: Mapping[str, Any]) -> None:
        """A source as an event showed it: its record kept unless the one known is newer.
        An event may be older than the record restarter just wrote (kopf's queue), so an
        event never removes one: only the breaker's fresh reads do (``record``)."""
        key = (metadata.get("namespace", ""), kind, metadata.get("name", ""))
        seen = waves.read_record(metadata.get("annotations"))
        if seen is None or not seen.group:
            return
        with self._lock:
            known = self._members.get(self._group_of.get(key, ""), {}).get(key)
        if known is not None and _newer(known, seen):
            return
        self.record(key, seen)

    def record(self, key: SourceKey, record: WaveRecord | None) -> None:
        """The wave record of a source as restarter read or wrote it (None: none)."""
        with self._lock:
            previous = self._group_of.pop(key, None)
            if previous is not None:
                self._members.get(previous, {}).pop(key, None)
            if record is not None and record.group:
                self._group_of[key] = record.group
                self._members.setdefault(record.group, {})[key] = record

    def members(self, group: str) -> dict[SourceKey, WaveRecord]:
        with self._lock:
            return dict(self._members.get(group, {}))


def _newer(known: WaveRecord, seen: WaveRecord) -> bool:
    """True when ``known`` is a later state of the source than ``seen``: a later record,
    or the same one judged."""
    if (known.since or 0) != (seen.since or 0):
        return (known.since or 0) > (seen.since or 0)
    return bool(known.state) and not seen.state
