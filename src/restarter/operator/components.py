"""What every handler shares, built once per operator run: the cluster views, the flows'
shared state, and the threads that keep them (``Components``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping
from typing import Any

from restarter.cluster.csi_watching import NotServed, PodStatuses, PodStatusStream
from restarter.cluster.list_watching import run_in_thread
from restarter.cluster.namespace_watching import NamespaceHolds, NamespaceScope, NamespaceWatcher
from restarter.cluster.reference_map import ReferenceMap
from restarter.cluster.seen_marks import SeenMarks
from restarter.cluster.source_watching import SourceWatcher
from restarter.cluster.workload_watching import ScopedInspector, WorkloadWatcher
from restarter.model.kinds import ROLLOUTS
from restarter.model.references import SECRET_PROVIDER_CLASS
from restarter.operator.late_kinds import LateKind
from restarter.operator.trimming import Trimmer
from restarter.restarting.admitting import Admissions, Admitter
from restarter.restarting.blocking import Blockers, HoldBlocker, gate_blockers
from restarter.restarting.breaker import Breaker
from restarter.restarting.checking import LABELLED_CONCURRENCY, ObjectLog, SourceChecks
from restarter.restarting.csi_checking import ClassChecks
from restarter.restarting.finalizer_release import FinalizerReleaser, ReleaseFailed
from restarter.restarting.judging_waits import JudgingWaits
from restarter.restarting.observing import PacerSweeper, WorkloadObserver
from restarter.restarting.pacing import Pacer
from restarter.restarting.rollout_groups import RolloutGroups
from restarter.restarting.scoping import ScopeFollower
from restarter.restarting.source_context import SourceContext, SourceTurns
from restarter.restarting.timer_state import TimerContext
from restarter.services.events import Events, own_pod
from restarter.services.kube.api import Api
from restarter.services.notifications import Notifier
from restarter.services.settings import Settings

#: The log of the source flow (restarter watches sources itself, kopf does not).
SOURCES_LOG = logging.getLogger("restarter.sources")

#: Its log: namespaces entering and leaving the namespace selector's scope.
log = logging.getLogger(__name__)

#: Seconds start-up waits for the first listing of every workload stream before kopf
#: starts watching anyway (its source handlers then wait for the listing themselves).
STARTUP_SYNC_TIMEOUT = 300.0


def blockers(
    settings: Settings,
    api: Api,
    groups: RolloutGroups,
    events: Events,
    watched: NamespaceHolds | None = None,
) -> Blockers:
    """What keeps a due restart back, asked in order: holds on it, its Namespace (as the
    namespace stream keeps it) or the operator; the gates; the circuit breaker of its
    changes' waves. A new gate is one more entry here."""
    return Blockers(
        [
            HoldBlocker(api, settings.hold, watched),
            *gate_blockers(api, settings.gates),
            Breaker(
                api,
                settings.rollout_timeout.total_seconds(),
                settings.halt_expiry or None,
                groups=groups,
                events=events,
            ),
        ]
    )


class Components:
    """The parts of one operator run. ``register_kind(plural)`` registers the timer of a
    workload kind served after start-up (Rollouts, once their CRD is installed)."""

    def __init__(
        self,
        settings: Settings,
        api: Api,
        insights: Any | None,
        register_kind: Callable[[str], None],
    ) -> None:
        self.settings, self.api = settings, api
        # Every Event restarter posts, from the calling thread (never the event loop).
        self.events = Events(api)
        self.checksums: dict[tuple[str, str, str], str] = {}
        self.turns = SourceTurns()
        self.reference_map = ReferenceMap()
        # A due workload that stops asking for a slot for over two ticks leaves the queue.
        self.pacer = Pacer(settings.pacing, stale_after=2.5 * settings.timer_interval)
        self.seen = SeenMarks()
        # Sources sharing a rollout group, seen by the source flow, judged by the breaker.
        self.groups = RolloutGroups()
        # Namespaces' holds, kept by the namespace stream (cluster mode only: in exact
        # namespaces the chart grants a read of each, no list).
        self.holds = NamespaceHolds() if not settings.namespaces else None
        self.blockers = blockers(settings, api, self.groups, self.events, self.holds)
        self.waits = JudgingWaits()
        # Notifications of the Events the Event path posts (their URLs carry tokens).
        self.notifier = None
        if settings.notify_urls:
            self.notifier = Notifier(settings.notify_urls, settings.notify_batch.total_seconds())
        # Pending workloads reach kopf's timers when their window opens, a bounded number
        # at once.
        self.admissions = admissions = Admissions(settings.max_timers)
        self.admitter = Admitter(api, admissions)
        self.trimmer = Trimmer()
        observer = WorkloadObserver(api, self.pacer, self.seen, admissions, settings)
        selector = settings.selector
        # The namespaces that match the selector (all, without one): kopf's handlers, the
        # source checks and the workload observer act only there. The workload streams
        # watch every namespace (one per kind), whatever the selector matches.
        self.scope = NamespaceScope(selector)
        scopes: tuple[str | None, ...] = settings.namespaces or (None,)
        scoped = ScopedInspector(observer, self.scope.includes) if selector else None
        self.rollouts = LateKind(ROLLOUTS, insights, lambda: register_kind(ROLLOUTS))
        self.watcher = WorkloadWatcher(
            api,
            self.reference_map,
            scopes,
            scoped or observer,
            self.events,
            settings.reloader_annotations,
            on_rollouts_served=self.rollouts.served if settings.rollouts else None,
            scoped=scoped,
        )
        self.sweeper = PacerSweeper(self.events, self.pacer)
        self._source_checks(settings, api)
        self._csi(settings, api, scopes)

    def _csi(self, settings: Settings, api: Api, scopes: tuple[str | None, ...]) -> None:
        """With ``--csi``: the CSI driver's reports, and the checks of the classes they name."""
        self.csi_streams: list[PodStatusStream] = []
        self.class_checks: ClassChecks | None = None
        if not settings.csi:
            return
        statuses = PodStatuses()
        self.class_checks = ClassChecks(statuses, self._class_context, self.watcher.in_sync)
        stopping = self.class_checks.stopping
        # Said once per run, on the operator's own Pod, however many namespaces it watches.
        not_served = NotServed(self.events, own_pod())
        self.csi_streams = [
            PodStatusStream(api, statuses, scope, stopping, self._class_changed, not_served)
            for scope in scopes
        ]

    def _class_changed(self, namespace: str, name: str) -> None:
        if self.class_checks is not None and self.scope.includes(namespace):
            self.class_checks.submit(namespace, name)

    def _class_context(self, namespace: str, name: str) -> SourceContext:
        return self.source_context(SECRET_PROVIDER_CLASS, ObjectLog(SOURCES_LOG, namespace, name))

    def _source_checks(self, settings: Settings, api: Api) -> None:
        """The checks of sources, labelled or opted in for, and the Namespaces followed by
        label."""
        self.checks = SourceChecks(self.checked_context)
        self.labelled_checks = SourceChecks(
            self.checked_context, LABELLED_CONCURRENCY, labelled=True
        )
        self.sources = SourceWatcher(
            api,
            self.reference_map,
            settings.namespaces,
            self._check_in_scope,
            self._check_labelled_in_scope,
        )
        follower = ScopeFollower(
            api, self.scope, self.watcher, self.labelled_checks.submit, self._release_in
        )
        selector = settings.selector
        self.namespaces: NamespaceWatcher | None = None
        if self.holds is not None:
            self.namespaces = NamespaceWatcher(
                api, selector, follower if selector else None, self.holds
            )

    # -- contexts of the flows ------------------------------------------------------------

    def source_context(self, kind: str, logger: Any) -> SourceContext:
        """What one check of a source needs; ``logger`` names the object on each line
        (``checked_context``: restarter's own log, as kopf's per-object loggers do)."""
        return SourceContext(
            kind=kind,
            settings=self.settings,
            api=self.api,
            reference_map=self.reference_map,
            in_sync=self.watcher.in_sync,
            checksums=self.checksums,
            logger=logger,
            events=self.events,
            turns=self.turns,
            groups=self.groups,
            admissions=self.admissions,
            wrote=self.sources.versions.wrote,
        )

    def checked_context(self, kind: str, namespace: str, name: str) -> SourceContext:
        log = ObjectLog(SOURCES_LOG, namespace, name)
        return self.source_context(kind, log)

    def timer_context(
        self, plural: str, memo: MutableMapping[str, Any], logger: Any
    ) -> TimerContext:
        return TimerContext(
            plural=plural,
            settings=self.settings,
            api=self.api,
            pacer=self.pacer,
            seen=self.seen,
            memo=memo,
            logger=logger,
            events=self.events,
            blockers=self.blockers,
            waits=self.waits,
        )

    def _check_in_scope(self, kind: str, namespace: str, name: str) -> None:
        if self.scope.includes(namespace):
            self.checks.submit(kind, namespace, name)

    def _check_labelled_in_scope(self, kind: str, namespace: str, name: str) -> None:
        if self.scope.includes(namespace):
            self.labelled_checks.submit(kind, namespace, name)

    def _release_in(self, namespace: str) -> list[str]:
        return FinalizerReleaser(self.api, (namespace,), log.info).release_all()

    # -- start and stop --------------------------------------------------------------------

    def start_source_checks(self) -> None:
        """In kopf's loop: the checks of the labelled sources and of the unlabelled ones
        that workloads opted in for (the metadata watch that feeds them starts with the
        streams)."""
        self.checks.start()
        self.labelled_checks.start()

    def start_streams(self, logger: Any) -> None:
        """The streams that keep the reference map; wait for their first listing."""
        if self.namespaces is not None:
            self.namespaces.start()
        # With a selector, the scope is known before kopf watches (its filters read it) and
        # before the workload streams list (the observer hears only of namespaces in
        # scope). Without one the stream keeps only holds: nothing waits for it.
        if self.namespaces is not None and self.settings.selector:
            listed = self.namespaces.stream.listed.wait(STARTUP_SYNC_TIMEOUT)
            if not listed:
                logger.warning(
                    f"namespaces not listed after {STARTUP_SYNC_TIMEOUT:g}s; none is acted in "
                    "until they are"
                )
        # Once the scope is known: a labelled source's version seen out of it is not
        # checked (a namespace entering the scope has its labelled sources checked then).
        self.sources.start()
        self.watcher.start()
        if self.class_checks is not None:
            self.class_checks.start()
            for stream in self.csi_streams:
                run_in_thread(stream)
        self.sweeper.start()
        self.admitter.start()
        self.trimmer.start()
        if self.notifier is not None:
            self.events.listen(self.notifier.told)
            self.notifier.start()
        if not self.watcher.in_sync.wait(STARTUP_SYNC_TIMEOUT):
            logger.warning(
                f"workloads not listed after {STARTUP_SYNC_TIMEOUT:g}s; changes of sources "
                "wait until they are"
            )

    def stop(self, logger: Any) -> None:
        """Stop every thread, then free the pending workloads (their marks stay)."""
        if self.namespaces is not None:
            self.namespaces.stop()
        self.watcher.stop()
        if self.class_checks is not None:
            self.class_checks.stop()
        self.sources.stop()
        self.sweeper.stop()
        self.admitter.stop()
        self.trimmer.stop()
        if self.notifier is not None:
            self.events.unlisten(self.notifier.told)
            self.notifier.stop()
        try:
            released = FinalizerReleaser(
                self.api, self.settings.namespaces, logger.debug
            ).release_all()
        except ReleaseFailed as error:
            logger.error(f"could not release the finalizer of pending workloads: {error}")
            return
        if released:
            logger.info(f"released the finalizer of {len(released)} pending workload(s)")

    def share_loop(self) -> None:
        """The late kinds register their timers from kopf's loop."""
        self.rollouts.loop = asyncio.get_running_loop()
