"""Restarts held while a change's first wave is judged, waiting together.

The circuit breaker lifts a judging hold by itself, once the first wave's verdict is
written; a due restart it holds asks again rather than waiting for its next tick. A change
of 10 000 dependents must not ask 10 000 times every poll: of the restarts held by one
source's judging, one (the asker) asks again every poll, and the others wait until it
leaves, having seen the hold lift or given up; then each asks once. Everything here runs
on the event loop: no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

#: What a judging hold waits for: (namespace, the source, ``Kind/name``).
JudgingKey = tuple[str, str]


@dataclass
class _Asker:
    owner: object
    left: asyncio.Event = field(default_factory=asyncio.Event)


class JudgingWaits:
    """Who asks again for each source being judged, and who waits for it."""

    def __init__(self) -> None:
        self._askers: dict[JudgingKey, _Asker] = {}
        self._asking: dict[object, JudgingKey] = {}  # owner → the key it asks for

    def asks(self, key: JudgingKey, owner: object) -> bool:
        """True when ``owner`` is (or now becomes) the one that asks again for ``key``; an
        owner asks for one key at a time (a restart held by another source now)."""
        asker = self._askers.get(key)
        if asker is not None:
            return asker.owner is owner
        self.leave(owner)
        self._askers[key] = _Asker(owner)
        self._asking[owner] = key
        return True

    async def wait(self, key: JudgingKey, timeout: float) -> None:
        """Until the asker for ``key`` leaves, or ``timeout`` seconds."""
        asker = self._askers.get(key)
        if asker is None or timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asker.left.wait(), timeout)

    def leave(self, owner: object) -> None:
        """``owner`` asks no more: those waiting for it ask for themselves. Every held tick
        leaves when it ends, so this looks up the one key it asked for, not every key."""
        key = self._asking.pop(owner, None)
        if key is not None:
            self._askers.pop(key).left.set()

    def __len__(self) -> int:
        return len(self._askers)
