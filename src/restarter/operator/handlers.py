"""The kopf handlers: each a decorator, a docstring and a call into a flow."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from restarter.model import keys
from restarter.model.kinds import APPS_KINDS, KINDS
from restarter.model.references import SOURCE_KINDS
from restarter.operator.components import Components
from restarter.restarting.stamping import check_source
from restarter.restarting.ticking import restart_when_due
from restarter.restarting.timer_state import timer_wanted
from restarter.services.kube.api import Api
from restarter.services.settings import Settings

#: Source kind → the kopf resource plural watched for it.
SOURCE_RESOURCES = {"secret": "secrets", "configmap": "configmaps"}

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

    @kopf.on.startup(registry=registry, id="watch_unlabelled_sources")
    async def watch_unlabelled_sources(**_: Any) -> None:
        """Start the metadata watch of sources and the checks of unlabelled sources that
        workloads opted in for (what the workload streams find wanted waits for them)."""
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
        """Start the streams that keep the reference map; wait for their first listing.

        kopf starts watching only after its startup handlers, so the labelled sources
        arrive when their dependents are known, and are handled at once instead of
        thousands of them waiting in memory together.
        """
        parts.start_streams(logger)

    for plural in APPS_KINDS:
        _register_workload(registry, plural, parts)

    for kind in SOURCE_KINDS:
        _register_source(registry, kind, parts)

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


def _register_source(registry: kopf.OperatorRegistry, kind: str, parts: Components) -> None:
    scope = parts.scope

    @kopf.on.event(
        "v1",
        SOURCE_RESOURCES[kind],
        registry=registry,
        id=f"{kind}_event",
        labels={keys.RESTART_AT_LABEL: kopf.PRESENT},
        when=lambda namespace, **_: scope.includes(namespace),
    )
    async def source_event(event: Any, body: Any, logger: Any, **_: Any) -> None:
        """A labelled source was listed, added or modified: compare its checksum."""
        if event.get("type") == "DELETED":
            return
        await check_source(parts.source_context(kind, logger), body)
