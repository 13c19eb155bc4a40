"""The kopf handlers: each a decorator, a docstring and a call into a flow."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf
import kubernetes

from restarter.cluster.namespace_watching import NamespaceScope, NamespaceWatcher
from restarter.cluster.reference_map import ReferenceMap
from restarter.cluster.seen_marks import SeenMarks
from restarter.cluster.source_watching import SourceWatcher
from restarter.cluster.workload_watching import WorkloadWatcher
from restarter.commands.release_finalizers import FinalizerReleaser, ReleaseFailed
from restarter.model import keys
from restarter.model.references import (
    APPS_KINDS,
    ROLLOUTS,
    SOURCE_KINDS,
    WORKLOAD_APIS,
)
from restarter.restarting import posting
from restarter.restarting.admitting import Admissions, Admitter
from restarter.restarting.checking import SourceChecks
from restarter.restarting.gating import Gates
from restarter.restarting.holding import HoldReader
from restarter.restarting.notifying import Notifier
from restarter.restarting.observing import PacerSweeper, WorkloadObserver
from restarter.restarting.pacing import Pacer
from restarter.restarting.scoping import ScopeFollower
from restarter.restarting.stamping import SourceContext, SourceTurns, check_source
from restarter.restarting.ticking import TimerContext, restart_when_due, timer_wanted
from restarter.runtime.kube import Api
from restarter.runtime.late_kinds import LateKind
from restarter.runtime.settings import Settings
from restarter.runtime.trimming import Trimmer

#: The log of sources kopf does not watch (unlabelled ones that workloads opted in for).
SOURCES_LOG = logging.getLogger("restarter.sources")

#: The log of namespaces entering and leaving the namespace selector's scope.
NAMESPACES_LOG = logging.getLogger("restarter.namespaces")

#: Source kind → the kopf resource plural watched for it.
SOURCE_RESOURCES = {"secret": "secrets", "configmap": "configmaps"}


#: Seconds at most before a timer tick that failed is tried again.
TIMER_BACKOFF = 10.0
#: Seconds start-up waits for the first listing of every workload stream before kopf
#: starts watching anyway (its source handlers then wait for the listing themselves).
STARTUP_SYNC_TIMEOUT = 300.0


def build_registry(
    settings: Settings, api: Api, insights: Any | None = None
) -> kopf.OperatorRegistry:
    """Register every handler with the decorator arguments the settings give.

    ``insights`` is kopf's view of the resources it serves (the one ``kopf.run`` gets):
    when Rollouts become served, their timer is registered and the kind added to it.
    """
    registry = kopf.OperatorRegistry()
    seen_checksums: dict[tuple[str, str, str], str] = {}
    turns = SourceTurns()
    reference_map = ReferenceMap()
    # A due workload that stops asking for a slot for over two ticks leaves the queue.
    pacer = Pacer(settings.pacing, stale_after=2.5 * settings.timer_interval)
    seen = SeenMarks()
    gates = Gates(api, settings.gates) if settings.gates.enabled else None
    holds = HoldReader(api, settings.hold, gates)
    notifier = None
    if settings.notify_urls:
        notifier = Notifier(settings.notify_urls, settings.notify_batch.total_seconds())
        posting.listen(notifier.told)
    # Pending workloads reach kopf's timers when their window opens, a bounded number at once.
    admissions = Admissions(settings.max_timers)
    admitter = Admitter(api, admissions)
    trimmer = Trimmer()
    observer = WorkloadObserver(api, pacer, seen, admissions, settings)
    selector = settings.selector
    # The namespaces that match the selector (all, without one): kopf's handlers and the
    # source checks act only there, and the workload streams watch only those.
    scope = NamespaceScope(selector)
    scopes: tuple[str | None, ...] = () if selector else (settings.namespaces or (None,))
    rollouts = LateKind(
        ROLLOUTS,
        insights,
        lambda: _register_workload(registry, ROLLOUTS, settings, api, pacer, seen, scope, holds),
    )
    watcher = WorkloadWatcher(
        api,
        reference_map,
        scopes,
        observer,
        settings.reloader_annotations,
        on_rollouts_served=rollouts.served if settings.rollouts else None,
    )
    sweeper = PacerSweeper(api, pacer)

    def source_context(
        kind: str, logger: Any, poster: posting.Poster = posting.KOPF
    ) -> SourceContext:
        """What one check of a source needs: kopf's per-object logger and Event queue in
        its handlers, restarter's own log and the API outside them."""
        return SourceContext(
            kind,
            settings,
            api,
            reference_map,
            watcher.in_sync,
            seen_checksums,
            logger,
            poster,
            turns,
        )

    def unlabelled_context(kind: str) -> SourceContext:
        return source_context(kind, SOURCES_LOG, posting.ApiPoster(api))

    checks = SourceChecks(unlabelled_context)
    entering_checks = SourceChecks(unlabelled_context, labelled=True)

    def check_in_scope(kind: str, namespace: str, name: str) -> None:
        if scope.includes(namespace):
            checks.submit(kind, namespace, name)

    sources = SourceWatcher(api, reference_map, settings.namespaces, check_in_scope)
    apps = kubernetes.client.AppsV1Api(api.client)

    def release_in(namespace: str) -> list[str]:
        return FinalizerReleaser(apps, (namespace,), NAMESPACES_LOG.info).release_all()

    follower = ScopeFollower(api, scope, watcher, entering_checks.submit, release_in)
    namespaces = NamespaceWatcher(api, selector, follower) if selector else None

    @kopf.on.startup(registry=registry, id="watch_unlabelled_sources")
    async def watch_unlabelled_sources(**_: Any) -> None:
        """Start the metadata watch of sources and the checks of unlabelled sources that
        workloads opted in for (what the workload streams find wanted waits for them)."""
        checks.start()
        entering_checks.start()
        sources.start()

    @kopf.on.startup(registry=registry, id="share_threads")
    async def share_threads(settings: kopf.OperatorSettings, **_: Any) -> None:
        """The async handlers' blocking calls (asyncio.to_thread) run in kopf's pool of
        handler threads (main.py sizes it) instead of asyncio's default of CPUs + 4."""
        executor = settings.execution.executor
        assert isinstance(executor, ThreadPoolExecutor)
        asyncio.get_running_loop().set_default_executor(executor)
        rollouts.loop = asyncio.get_running_loop()

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
        watcher.start()
        if namespaces is not None:
            # The scope is known before kopf watches: its filters read it.
            namespaces.start()
            if not namespaces.stream.listed.wait(STARTUP_SYNC_TIMEOUT):
                logger.warning(
                    f"namespaces not listed after {STARTUP_SYNC_TIMEOUT:g}s; none is acted in "
                    "until they are"
                )
        sweeper.start()
        admitter.start()
        trimmer.start()
        if notifier is not None:
            notifier.start()
        if not watcher.in_sync.wait(STARTUP_SYNC_TIMEOUT):
            logger.warning(
                f"workloads not listed after {STARTUP_SYNC_TIMEOUT:g}s; changes of sources "
                "wait until they are"
            )

    for plural in APPS_KINDS:
        _register_workload(registry, plural, settings, api, pacer, seen, scope, holds)

    for kind in SOURCE_KINDS:
        _register_source(registry, kind, source_context, scope)

    @kopf.on.cleanup(registry=registry, id="release_finalizers")
    def release_finalizers(logger: Any, **_: Any) -> None:
        """On exit, let pending workloads be deleted while no operator runs.

        Their marks stay; the next start re-adds the finalizer with the timer.
        """
        if namespaces is not None:
            namespaces.stop()
        watcher.stop()
        sources.stop()
        sweeper.stop()
        admitter.stop()
        trimmer.stop()
        if notifier is not None:
            notifier.stop()
        try:
            released = FinalizerReleaser(apps, settings.namespaces, logger.debug).release_all()
        except ReleaseFailed as error:
            logger.error(f"could not release the finalizer of pending workloads: {error}")
            return
        if released:
            logger.info(f"released the finalizer of {len(released)} pending workload(s)")

    return registry


def _register_workload(
    registry: kopf.OperatorRegistry,
    plural: str,
    settings: Settings,
    api: Api,
    pacer: Pacer,
    seen: SeenMarks,
    scope: NamespaceScope,
    holds: HoldReader,
) -> None:
    group, version = WORKLOAD_APIS[plural]

    @kopf.timer(
        group,
        version,
        plural,
        id=f"pending_restart_{plural}",
        registry=registry,
        interval=settings.timer_interval,
        # A failed tick (the apiserver away) is tried again soon, not after kopf's 60 s.
        backoff=min(settings.timer_interval, TIMER_BACKOFF),
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
        timer = TimerContext(plural, settings, api, pacer, seen, memo, logger, holds)
        await restart_when_due(timer, body)


def _register_source(
    registry: kopf.OperatorRegistry,
    kind: str,
    context_for: Callable[[str, Any], SourceContext],
    scope: NamespaceScope,
) -> None:
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
        context = context_for(kind, logger)
        await check_source(context, body)
