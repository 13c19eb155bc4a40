"""The kopf handlers: each a decorator, a docstring and a call into a flow."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from restarter.model import keys
from restarter.model.kinds import APPS_KINDS, KINDS
from restarter.operator.components import Components
from restarter.restarting.ticking import restart_when_due
from restarter.restarting.timer_state import timer_wanted
from restarter.services.kube.api import Api
from restarter.services.settings import Settings

#: Seconds at most before a timer tick that failed is tried again.
TIMER_BACKOFF = 10.0


def build_registry(
    settings: Settings, api: Api, insights: Any | None = None
) -> kopf.OperatorRegistry:
    """Register every handler with the decorator arguments the settings give.

    ``insights`` is kopf's view of the resources it serves (the one ``kopf.run`` gets):
    when Rollouts become served, their timer is registered and the kind added to it.
    """
    registry = kopf.OperatorRegistry()
    parts = Components(
        settings, api, insights, lambda plural: _register_workload(registry, plural, parts)
    )

    @kopf.on.startup(registry=registry, id="watch_sources")
    async def watch_sources(**_: Any) -> None:
        """Start the checks of labelled sources and of unlabelled ones that workloads
        opted in for (what the metadata watch of sources and the workload streams hand on
        waits for them). kopf watches no source: its list would hold a whole page of
        bodies, and its queues every body not yet handled."""
        parts.start_source_checks()

    @kopf.on.startup(registry=registry, id="share_threads")
    async def share_threads(settings: kopf.OperatorSettings, **_: Any) -> None:
        """The async handlers' blocking calls (asyncio.to_thread) run in kopf's pool of
        handler threads (main.py sizes it) instead of asyncio's default of CPUs + 4."""
        executor = settings.execution.executor
        assert isinstance(executor, ThreadPoolExecutor)
        asyncio.get_running_loop().set_default_executor(executor)
        parts.share_loop()

    @kopf.on.login(registry=registry, id="login")
    def login(**kwargs: Any) -> Any:
        """kopf's own connection uses the same credentials as the kubernetes client."""
        return kopf.login_via_client(**kwargs)

    @kopf.on.startup(registry=registry, id="watch_workloads")
    def watch_workloads(logger: Any, **_: Any) -> None:
        """Start the Namespace stream, then the metadata watch of sources and the streams
        that keep the reference map; wait for their first listing.

        kopf starts its timers only after its startup handlers; the source checks read a
        source only once the map is in sync, so no body waits in memory for it.
        """
        parts.start_streams(logger)

    for plural in APPS_KINDS:
        _register_workload(registry, plural, parts)

    @kopf.on.cleanup(registry=registry, id="release_finalizers")
    def release_finalizers(logger: Any, **_: Any) -> None:
        """On exit, let pending workloads be deleted while no operator runs.

        Their marks stay; the next start re-adds the finalizer with the timer.
        """
        parts.stop(logger)

    return registry


def _register_workload(registry: kopf.OperatorRegistry, plural: str, parts: Components) -> None:
    kind, scope = KINDS[plural], parts.scope
    interval = parts.settings.timer_interval

    @kopf.timer(
        kind.group,
        kind.version,
        plural,
        id=f"pending_restart_{plural}",
        registry=registry,
        interval=interval,
        # A failed tick (the apiserver away) is tried again soon, not after kopf's 60 s.
        backoff=min(interval, TIMER_BACKOFF),
        labels={keys.PENDING_LABEL: kopf.PRESENT},
        # Out of the namespace selector's scope, kopf stops the timer and drops the
        # finalizer on the workload's next event (restarter sends one on leaving).
        when=lambda annotations, meta, memo, namespace, **_: (
            scope.includes(namespace) and timer_wanted(annotations, meta, memo)
        ),
    )
    async def pending_restart(body: Any, memo: Any, logger: Any, **_: Any) -> None:
        """A workload with pending marks: restart it when its window is open and pacing
        lets it start."""
        if not scope.includes(body["metadata"]["namespace"]):
            return  # its namespace left the scope since kopf last looked
        await restart_when_due(parts.timer_context(plural, memo, logger), body)
