"""A workload kind kopf is told about late: one whose CRD may be installed after start."""

from __future__ import annotations

import asyncio
import logging
import threading
import typing
from collections.abc import Callable
from typing import Any

import kopf

from restarter.model.kinds import WORKLOAD_APIS, WORKLOAD_KINDS

log = logging.getLogger(__name__)


def kopf_insights() -> Any:
    """A new value for ``kopf.run(insights=...)``: kopf's view of the resources it serves,
    which ``LateKind`` adds a kind to. kopf exports no name for its type, so the type is
    read from ``kopf.run``'s own signature rather than imported from kopf's private modules."""
    hint = typing.get_type_hints(kopf.run)["insights"]
    (insights_type,) = (each for each in typing.get_args(hint) if each is not type(None))
    return insights_type()


class LateKind:
    """A workload kind served only when its CRD is installed (Rollouts): its timer is
    registered, and kopf told to watch it, the first time restarter's stream finds it
    served, at start-up or later. Until then kopf neither watches it nor warns about it.

    kopf runs with cluster scanning off (no RBAC on CRDs), so it looks for resources only
    once, at start; a kind that appears later (or while that first look runs) is added to
    its insights (the resources it serves) once that look is over, and its orchestrator
    starts a watch stream for it.
    """

    def __init__(self, plural: str, insights: Any | None, register: Callable[[], None]) -> None:
        self.plural, self.insights, self.register = plural, insights, register
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._registered = False

    def served(self) -> None:
        """Called from a stream's thread; only the first call does anything."""
        with self._lock:
            if self._registered:
                return
            self._registered = True
            self.register()
        if self.insights is not None and self.loop is not None:
            # Not waited for: at start-up this runs inside kopf's start-up activities, and
            # kopf's first scan (which _watch waits for) comes only after them.
            added = asyncio.run_coroutine_threadsafe(self._watch(), self.loop)
            added.add_done_callback(self._report)

    def _report(self, added: Any) -> None:
        if not added.cancelled() and added.exception() is not None:  # the operator stopping
            log.warning(f"could not start watching {self.plural}: {added.exception()!r}")

    async def _watch(self) -> None:
        group, version = WORKLOAD_APIS[self.plural]
        resource = kopf.Resource(
            group,
            version,
            self.plural,
            kind=WORKLOAD_KINDS[self.plural],
            singular=WORKLOAD_KINDS[self.plural].lower(),
            namespaced=True,
            preferred=True,
            verbs=frozenset({"get", "list", "watch", "patch"}),
        )
        insights = self.insights
        assert insights is not None
        # kopf's first scan replaces the watched resources with what it found for the
        # groups its handlers had when it began: added before it ends, the kind was dropped
        # again (kopf then warned it unresolved and never watched it).
        await insights.ready_resources.wait()
        async with insights.revised:
            insights.watched_resources.add(resource)
            insights.revised.notify_all()
