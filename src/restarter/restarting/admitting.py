"""Admission: which pending workloads kopf's timers hold, and when they get them.

A stamp writes only the marks, unless its window is already open. A marked workload enters
kopf's view (its label-selected watch, a timer, kopf's copy of its body, our finalizer)
when the pending label is set, and that happens here: when its window opens, and while
fewer than ``limit`` workloads hold the label. Until then it waits in ``Admissions``, a
table of (resourceVersion, due instant) per workload: a few hundred bytes where kopf would
keep the whole body, a task and a finalizer, ticking every interval for nothing. A stamp
sent while its window is open takes a place first (``reserve``) and carries the label
itself: one request where a stamp and an admission would be two.

The table is fed by restarter's own workload streams (every body they see), and the
``Admitter`` thread sets the label, conditional on the version the due instant was read
from. A timer that finds its window not open hands the workload back (``ticking``): the
label and finalizer go, the marks stay, and the streams bring it back here.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from restarter.model import timer_admission
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.model.references import WorkloadKey
from restarter.services import metrics
from restarter.services.kube.errors import ApiError, Conflict
from restarter.services.kube.patching import Patcher

log = logging.getLogger(__name__)

#: Seconds the admitter sleeps when nothing is due sooner (a due entry wakes it).
ADMIT_PERIOD = 1.0
#: Seconds before a workload whose label could not be set is tried again.
ADMIT_RETRY = 5.0
#: Label requests in flight at once (below connecting.POOL_SIZE connections), as for stamps.
ADMIT_CONCURRENCY = 16
#: Seconds stopping waits for a label request in flight.
STOP_TIMEOUT = 15.0


class Admissions:
    """Pending workloads that wait for their window (key → version and due instant), and
    those that hold the pending label (at most ``limit`` once admission is the only way in).
    Thread-safe: the streams' threads write it, the admitter takes from it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._waiting: dict[WorkloadKey, tuple[str, float]] = {}
        self._queue: list[tuple[float, WorkloadKey, str]] = []  # stale entries skipped on pop
        self._labelled: set[WorkloadKey] = set()
        self._changed = threading.Condition()

    def wait(self, key: WorkloadKey, version: str, due: float) -> None:
        """A workload with marks and no label, seen at ``version``: due at ``due``."""
        with self._changed:
            self._labelled.discard(key)
            if self._waiting.get(key) == (version, due):
                return
            self._waiting[key] = (version, due)
            heapq.heappush(self._queue, (due, key, version))
            self._changed.notify()

    def reserve(self, key: WorkloadKey) -> bool | None:
        """A place for a workload whose stamp hands it to kopf's timer (its window is open
        as it is stamped): True when taken now, False when it holds one already, None when
        no place is free (it is stamped alone, and waits here as any other)."""
        with self._changed:
            if key in self._labelled:
                return False
            if len(self._labelled) >= self.limit:
                return None
            self._labelled.add(key)
            return True

    def unreserve(self, key: WorkloadKey) -> None:
        """A place taken by ``reserve`` whose stamp did not land: free again."""
        with self._changed:
            self._labelled.discard(key)
            self._changed.notify()

    def labelled(self, key: WorkloadKey) -> None:
        """A workload seen with marks and the label: kopf's timer holds it."""
        with self._changed:
            self._waiting.pop(key, None)
            self._labelled.add(key)

    def forget(self, key: WorkloadKey) -> None:
        """A workload without marks (restarted, cleared) or deleted."""
        with self._changed:
            self._waiting.pop(key, None)
            if key in self._labelled:
                self._labelled.discard(key)
                self._changed.notify()  # a place is free

    def take_due(self, now: float) -> list[tuple[WorkloadKey, str]]:
        """The workloads to label now, earliest due first, as many as there are places;
        each counts as labelled from here on."""
        taken: list[tuple[WorkloadKey, str]] = []
        with self._changed:
            while self._queue and len(self._labelled) < self.limit:
                due, key, version = self._queue[0]
                if self._waiting.get(key) != (version, due):
                    heapq.heappop(self._queue)  # superseded by a newer sight, or gone
                    continue
                if due > now:
                    break
                heapq.heappop(self._queue)
                del self._waiting[key]
                self._labelled.add(key)
                taken.append((key, version))
        return taken

    def refused(self, key: WorkloadKey, version: str, retry_at: float | None) -> None:
        """The label was not set: the place is free again; a retry at ``retry_at`` unless
        the workload changed (its newer sight is already here, or on its way)."""
        with self._changed:
            self._labelled.discard(key)
            if retry_at is not None and key not in self._waiting:
                self._waiting[key] = (version, retry_at)
                heapq.heappush(self._queue, (retry_at, key, version))

    def sleep(self, now: float, stopping: threading.Event) -> None:
        """Until the earliest entry is due, a place frees or an entry is added; at most
        ``ADMIT_PERIOD``."""
        with self._changed:
            if stopping.is_set():
                return
            timeout = ADMIT_PERIOD
            if self._queue and len(self._labelled) < self.limit:
                timeout = min(timeout, max(0.0, self._queue[0][0] - now))
            if timeout > 0:
                self._changed.wait(timeout)

    def wake(self) -> None:
        """End a ``sleep`` now (the admitter is stopping)."""
        with self._changed:
            self._changed.notify_all()

    def counts(self) -> tuple[int, int]:
        """(waiting for their window, holding the label)."""
        with self._changed:
            return len(self._waiting), len(self._labelled)


class Admitter:
    """A daemon thread: sets the pending label (and finalizer) on workloads whose window
    opened, as places free."""

    def __init__(
        self, api: Patcher, admissions: Admissions, clock: Callable[[], float] = time.time
    ) -> None:
        self.api, self.admissions, self.clock = api, admissions, clock
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="admitter", daemon=True)
        self._pool = ThreadPoolExecutor(ADMIT_CONCURRENCY, thread_name_prefix="admit")

    def start(self) -> Admitter:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, and wait for a label being sent: the finalizers released on exit must
        include the one it adds."""
        self.stopping.set()
        self.admissions.wake()
        if self._thread.is_alive():
            self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.admit_once()
            except Exception as error:  # the admitter must outlive any one failure
                log.warning(f"admission: {type(error).__name__}: {error}")
            self.admissions.sleep(self.clock(), self.stopping)

    def admit_once(self) -> int:
        """Label every workload due now that has a place, several requests at a time; the
        number labelled."""
        taken = self.admissions.take_due(self.clock())
        labelled = sum(self._pool.map(lambda item: self._admit(*item), taken))
        waiting, holding = self.admissions.counts()
        metrics.WAITING.set(waiting)
        metrics.ADMITTED.set(holding)
        return labelled

    def _admit(self, key: WorkloadKey, version: str) -> int:
        if self.stopping.is_set():
            self.admissions.refused(key, version, self.clock())
            return 0
        plural, namespace, name = key
        patch = timer_admission.admit_patch({"resourceVersion": version}, KINDS[plural])
        try:
            sent = self.api.patch_workload(plural, namespace, name, patch)
        except Conflict:
            # Changed since: the stream brings its newer body, which is decided again.
            self.admissions.refused(key, version, None)
            return 0
        except ApiError as error:
            log.warning(
                f"could not hand {WORKLOAD_KINDS[plural]} {namespace}/{name} to its timer: "
                f"{error.describe()}; trying again in {ADMIT_RETRY:g}s"
            )
            self.admissions.refused(key, version, self.clock() + ADMIT_RETRY)
            return 0
        if sent is None:  # deleted
            self.admissions.forget(key)
            return 0
        return 1
