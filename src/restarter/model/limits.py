"""The pacing limits (settings ``--max-in-flight``, ``--max-per-minute``,
``--rollout-timeout``) and how many restarts they let start now."""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds a start counts against the per-minute limit.
MINUTE = 60.0


@dataclass(frozen=True)
class Limits:
    max_in_flight: int = 0
    """Restarts whose rollout is not complete, at most; 0: no limit."""

    max_per_minute: int = 0
    """Restarts started in any 60 s, at most; 0: no limit."""

    rollout_timeout: float = 600.0
    """Seconds after which an incomplete rollout stops holding its slot (with a Warning)."""


def free_starts(in_flight: int, started: int, limits: Limits) -> int | None:
    """How many restarts may start now; None when no limit applies."""
    free: list[int] = []
    if limits.max_in_flight:
        free.append(limits.max_in_flight - in_flight)
    if limits.max_per_minute:
        free.append(limits.max_per_minute - started)
    return max(0, min(free)) if free else None
