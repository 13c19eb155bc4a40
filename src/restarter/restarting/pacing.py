"""Pacing of restarts: at most K in flight, at most R started per minute, earliest due first.

Every input comes from the cluster, so an operator restart loses and repeats nothing:
a restart is in flight while the workload's ``restarter.io/restart-ts`` is recent (less
than the rollout timeout ago) and its rollout is not complete by the rules of ``kubectl
rollout status`` (``kinds.progress``); restarts started in the last minute are the
restart-ts values of the last 60 s. The watch streams of the reference map feed every
workload body they see to ``observe``. The queue of due workloads is rebuilt by the timers
within one tick: each due workload asks ``try_start`` on its tick; the earliest due go
first (ties by namespace and name), and a workload that stops asking leaves the queue.

Thread-safe: the watch streams and the sweeper (threads) and the timers (on kopf's event
loop, holding the lock only around updates in memory) call in concurrently.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model.kinds import progress
from restarter.model.limits import MINUTE, Limits, free_starts
from restarter.model.pending import last_restart_seconds
from restarter.model.progress import Progress
from restarter.model.references import WorkloadKey, workload_key


@dataclass(frozen=True)
class Stalled:
    """A restart whose rollout stopped holding its slot without completing."""

    key: WorkloadKey
    uid: str
    restarted_at: float
    reason: str


def uid_of(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


class Pacer:
    def __init__(self, limits: Limits, stale_after: float) -> None:
        """``stale_after``: seconds after its last tick a due workload leaves the queue."""
        self.limits = limits
        self.stale_after = stale_after
        self._lock = threading.Lock()
        self._in_flight: dict[WorkloadKey, float] = {}  # key → restart instant (epoch seconds)
        self._starts: dict[WorkloadKey, float] = {}  # key → its latest start within the minute
        self._reserved: set[WorkloadKey] = set()  # allowed to start, patch not answered yet
        self._waiting: dict[WorkloadKey, tuple[float, float]] = {}  # key → (due, last tick)
        self._uids: dict[WorkloadKey, str] = {}  # of the workloads in flight, for their Events
        # Restarts whose rollout completed: a later dip in availability (a node lost, a
        # pod evicted) is not that restart's rollout, and holds no slot.
        self._completed: dict[WorkloadKey, float] = {}
        self._stalled: list[Stalled] = []

    # --- what the cluster shows --------------------------------------------------------

    def observe(self, plural: str, body: Mapping[str, Any], now: float) -> None:
        """A workload as listed or watched."""
        key = workload_key(plural, body)
        restarted = last_restart_seconds((body.get("metadata") or {}).get("annotations"), now)
        state = progress(plural, body)
        with self._lock:
            known = self._in_flight.get(key)
            if restarted is None or (known is not None and restarted < known):
                # Never restarted by us, or a body older than our own restart: the
                # restart's own events will tell.
                if restarted is None:
                    self._in_flight.pop(key, None)
                return
            if now - restarted < MINUTE:
                self._starts[key] = max(restarted, self._starts.get(key, 0.0))
            if self._completed.get(key) == restarted:
                return
            if state is Progress.COMPLETE or now - restarted >= self.limits.rollout_timeout:
                self._in_flight.pop(key, None)
                if now - restarted < self.limits.rollout_timeout:
                    self._completed[key] = restarted
            elif state is Progress.FAILED:
                if self._in_flight.pop(key, None) is not None:
                    self._stalled.append(
                        Stalled(
                            key,
                            uid_of(body),
                            restarted,
                            "rollout failed (ProgressDeadlineExceeded)",
                        )
                    )
            else:
                self._in_flight[key] = restarted
                self._uids[key] = uid_of(body)

    def forget(self, key: WorkloadKey) -> None:
        """A workload deleted."""
        with self._lock:
            self._in_flight.pop(key, None)
            self._waiting.pop(key, None)
            self._completed.pop(key, None)

    # --- what the timers ask -----------------------------------------------------------

    def try_start(self, key: WorkloadKey, due: float, now: float) -> str | None:
        """None: start the restart now (then ``started`` or ``abandoned``); else why not."""
        with self._lock:
            self._prune(now)
            self._waiting[key] = (due, now)
            if key in self._reserved:
                return "its restart is being sent"
            in_flight = len(self._in_flight.keys() | self._reserved)
            started = len(self._starts) + len(self._reserved - self._starts.keys())
            free = free_starts(in_flight, started, self.limits)
            if free is not None:
                if free == 0:
                    return self._why_full(in_flight, started)
                ahead = heapq.nsmallest(
                    free,
                    (
                        (entry_due, waiting)
                        for waiting, (entry_due, _) in self._waiting.items()
                        if waiting not in self._reserved
                    ),
                )
                if (due, key) not in ahead:
                    return f"{len(self._waiting) - 1} other workload(s) due earlier or as early"
            self._waiting.pop(key)
            self._reserved.add(key)
            return None

    def started(self, key: WorkloadKey, uid: str, restarted: float) -> None:
        """The restart was sent; ``restarted``: the restart-ts it wrote."""
        with self._lock:
            self._reserved.discard(key)
            self._starts[key] = restarted
            if self._completed.get(key) == restarted:
                return  # the watch showed its rollout complete before the patch's answer
            self._in_flight[key] = restarted
            self._uids[key] = uid

    def abandoned(self, key: WorkloadKey) -> None:
        """The restart allowed was not sent (the workload changed or is gone)."""
        with self._lock:
            self._reserved.discard(key)

    def withdraw(self, key: WorkloadKey) -> None:
        """The workload is no longer due (its window closed, it was cleared)."""
        with self._lock:
            self._waiting.pop(key, None)

    # --- upkeep ------------------------------------------------------------------------

    def sweep(self, now: float) -> list[Stalled]:
        """Drop what has aged out; the restarts that stopped holding a slot since last time."""
        with self._lock:
            self._prune(now)
            for key, restarted in list(self._in_flight.items()):
                if now - restarted >= self.limits.rollout_timeout:
                    del self._in_flight[key]
                    timeout = self.limits.rollout_timeout
                    self._stalled.append(
                        Stalled(
                            key,
                            self._uids.get(key, ""),
                            restarted,
                            f"rollout not complete {timeout:g}s after the restart",
                        )
                    )
            for key in self._uids.keys() - self._in_flight.keys():
                del self._uids[key]
            for key, restarted in list(self._completed.items()):
                if now - restarted >= self.limits.rollout_timeout:
                    del self._completed[key]
            stalled, self._stalled = self._stalled, []
            return stalled

    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight.keys() | self._reserved)

    def _prune(self, now: float) -> None:
        for key, instant in list(self._starts.items()):
            if now - instant >= MINUTE:
                del self._starts[key]
        for key, (_, ticked) in list(self._waiting.items()):
            if now - ticked > self.stale_after:
                del self._waiting[key]

    def _why_full(self, in_flight: int, started: int) -> str:
        limits = self.limits
        if limits.max_in_flight and in_flight >= limits.max_in_flight:
            return f"{in_flight} restarts in flight (limit {limits.max_in_flight})"
        return f"{started} restarts started in the last minute (limit {limits.max_per_minute})"
