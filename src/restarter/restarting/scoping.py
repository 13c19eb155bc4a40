"""A namespace entering or leaving the namespace selector's scope: what restarter does then.

Entering is like the operator starting there: its workloads (which the cluster-wide
streams keep in the reference map whatever the scope) are listed once for the observer,
its pending workloads get their timers (kopf re-reads its filters only on
an event of the object, so each is given the finalizer its timer would add), and each
labelled source is compared with the checksum recorded on it, so a change made while the
namespace was out of scope is found. Leaving is like the operator stopping there: the
timers stop, the finalizer goes, the marks stay, and nothing there restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from restarter.cluster.namespace_watching import NamespaceScope
from restarter.cluster.workload_watching import WorkloadWatcher
from restarter.model import keys
from restarter.model.references import SOURCE_KINDS
from restarter.services.kube.api import Api

log = logging.getLogger(__name__)


class ScopeFollower:
    """The namespace stream's ``Follower``: keeps the scope, the workload streams, the
    timers and the finalizers in step with the namespaces that match."""

    def __init__(
        self,
        api: Api,
        scope: NamespaceScope,
        watcher: WorkloadWatcher,
        check: Callable[[str, str, str], None],
        release: Callable[[str], list[str]],
    ) -> None:
        """``check`` queues a labelled source to compare; ``release`` removes restarter's
        finalizer from every workload of a namespace, returning what it released."""
        self.api, self.scope, self.watcher = api, scope, watcher
        self.check, self.release = check, release

    def entered(self, namespace: str, starting: bool) -> None:
        # In scope before its workloads are listed for the observer (the map has them).
        self.watcher.watch_namespace(namespace, lambda: self.scope.add(namespace))
        if starting:
            return  # kopf's first listing comes after this, and finds everything
        try:
            held = self._hold_pending(namespace)
            for kind in SOURCE_KINDS:
                for metadata in self.api.labelled_names(kind, namespace, keys.RESTART_AT_LABEL):
                    self.check(kind, namespace, metadata["name"])
        except Exception as error:  # the stream must go on; those found on their next event
            log.error(f"namespace {namespace}: could not pick up its workloads: {error!r}")
            return
        if held:
            log.info(f"namespace {namespace}: {held} pending workload(s) picked up")

    def _hold_pending(self, namespace: str) -> int:
        """Give each pending workload the finalizer: the event makes kopf start its timer."""
        held = 0
        for plural in self.watcher.kinds():
            for metadata in self.api.labelled_names(plural, namespace, keys.PENDING_LABEL):
                if "deletionTimestamp" in metadata:
                    continue
                if keys.FINALIZER in (metadata.get("finalizers") or ()):
                    continue
                patch = {"metadata": {"finalizers": [keys.FINALIZER]}}
                if self.api.patch_workload(plural, namespace, metadata["name"], patch):
                    held += 1
        return held

    def left(self, namespace: str) -> None:
        # The scope first: every timer tick and kopf filter from now on refuses it.
        self.scope.discard(namespace)
        try:
            released = self.release(namespace)
        except Exception as error:  # kopf removes the finalizer on the workload's next event
            log.error(f"namespace {namespace}: could not release the finalizers: {error!r}")
            released = []
        self.watcher.unwatch_namespace(namespace)
        log.info(
            f"namespace {namespace} left: released the finalizer of {len(released)} "
            "pending workload(s); their marks stay"
        )
