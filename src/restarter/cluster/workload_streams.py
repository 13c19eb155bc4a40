"""Each workload kind's stream: a paged list, then a watch (``list_watching``), kept in the
reference map, with each body shown to the inspector.

Rollouts are streamed only once their CRD is served (asked every ``DISCOVERY_INTERVAL``);
until then their stream is in sync with nothing to know. A Rollout with
``spec.workloadRef`` uses the pod template of the Deployment it names.
Nothing here decides a restart: the map only answers "who uses this source".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from restarter.cluster.list_watching import PAGE_SIZE, WATCH_TIMEOUT, ListWatch, describe
from restarter.cluster.reference_map import ReferenceMap, uses_of
from restarter.model import reasons
from restarter.model.kinds import ROLLOUTS, WORKLOAD_KINDS, api_version
from restarter.model.optin import OptIn, invalid_entries_message
from restarter.model.references import rollout_workload_ref, with_template
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.kube.watching import WatchStream

log = logging.getLogger(__name__)

#: Seconds between two questions whether Rollouts are served (their CRD installed).
DISCOVERY_INTERVAL = 10.0


class Inspector(Protocol):
    """Told of every workload body the streams see, and of what disappears."""

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        """A listed or watched workload that still exists."""

    def deleted(self, plural: str, namespace: str, name: str) -> None: ...

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        """A complete listing: (namespace, name) of every workload of the kind there."""


class Stream(ListWatch):
    """One workload kind in one namespace (None: all), kept in the reference map."""

    def __init__(
        self,
        *,
        api: Api,
        reference_map: ReferenceMap,
        plural: str,
        namespace: str | None,
        inspect: Inspector,
        stopping: threading.Event,
        on_sync: Callable[[], None],
        events: Events,
        reloader: bool = False,
    ) -> None:
        super().__init__(plural, namespace, stopping, on_sync)
        self.api, self.reference_map, self.plural = api, reference_map, plural
        self.inspect, self.reloader = inspect, reloader
        self.events = events
        self._optins: dict[tuple[str, str], OptIn] = {}
        # Reloader reload list entries that are no expression, as last said per workload.
        self._invalid: dict[tuple[str, str], tuple[tuple[str, str, str], ...]] = {}
        # Held while the map takes what arrived, and by stop(): once stop() returns,
        # this stream changes the map no more (its namespace's entries can be dropped).
        self._applying = threading.Lock()

    def stop(self) -> None:
        """Stop, for good: from now on nothing it lists or watches reaches the map."""
        with self._applying:
            self.stopping.set()

    def list_page(self, token: str | None) -> dict[str, Any]:
        return self.api.list_page(self.plural, self.namespace, token, PAGE_SIZE)

    def open_watch(self, resource_version: str) -> WatchStream:
        return self.api.watch(self.plural, self.namespace, resource_version, WATCH_TIMEOUT)

    def template_source(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body whose pod template the workload runs: its own."""
        return body

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        metadata = item["metadata"]
        refs, optin = uses_of(self.template_source(item), self.reloader)
        listing[metadata["namespace"], metadata["name"]] = refs
        if optin is not None:
            self._optins[metadata["namespace"], metadata["name"]] = optin
        self._say_invalid(item, optin)
        self.inspect.observe(self.plural, item)

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        optins, self._optins = self._optins, {}
        with self._applying:
            if self.stopping.is_set():
                return " (stopped: not kept)"
            change = self.reference_map.replace(self.plural, self.namespace, listing, optins)
            self.inspect.listed(self.plural, self.namespace, set(listing))
        if self.lists:
            return f" (relisted: {len(change.gained)} gained, {len(change.lost)} lost references)"
        return ""

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        refs, optin = uses_of(
            body if kind == "DELETED" else self.template_source(body), self.reloader
        )
        with self._applying:
            if self.stopping.is_set():
                return
            self.reference_map.apply(
                kind, self.plural, metadata["namespace"], metadata["name"], refs, optin
            )
        self._say_invalid(body, None if kind == "DELETED" else optin)
        if kind == "DELETED":
            self.inspect.deleted(self.plural, metadata["namespace"], metadata["name"])
        else:
            self.inspect.observe(self.plural, body)

    def _say_invalid(self, body: dict[str, Any], optin: OptIn | None) -> None:
        """Reload list entries that are no regular expression are skipped: say so once per
        workload (a Warning Event on it and a log line), again when its entries change."""
        metadata = body.get("metadata") or {}
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        invalid = optin.invalid if optin is not None else ()
        if self._invalid.get(key, ()) == invalid:
            return
        if not invalid:
            self._invalid.pop(key, None)
            return
        self._invalid[key] = invalid
        assert optin is not None
        message = invalid_entries_message(optin)
        log.warning(f"{WORKLOAD_KINDS[self.plural]} {key[0]}/{key[1]}: {message}")
        workload = {
            **body,
            "apiVersion": api_version(self.plural),
            "kind": WORKLOAD_KINDS[self.plural],
        }
        # The watch outlives a failed Event: the Event path logs it.
        self.events.post(workload, reason=reasons.INVALID_RELOAD_ENTRY, message=message)


class ServedAsked:
    """Whether Rollouts are served, asked of discovery at most once per
    ``DISCOVERY_INTERVAL`` however many namespaces' streams ask; once served, for good."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._served = False
        self._asked_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if self._served or (
                self._asked_at is not None and now - self._asked_at < DISCOVERY_INTERVAL
            ):
                return self._served
            self._asked_at = now
            self._served = self.api.served(ROLLOUTS)
            return self._served

    @property
    def known(self) -> bool:
        """Served, as last asked (asks nothing)."""
        with self._lock:
            return self._served


class RolloutStream(Stream):
    """Rollouts in one namespace (None: all): nothing is listed or watched until the API
    server serves them; then ``on_served`` is called once and the stream runs as any other."""

    def __init__(
        self, *, on_served: Callable[[], None], served: Callable[[], bool], **stream: Any
    ) -> None:
        super().__init__(**stream)
        self.on_served, self.served = on_served, served

    def run(self) -> None:
        # No Rollout exists while the kind is not served: nothing to wait for.
        self._synced(True)
        said = False
        while not self.stopping.is_set():
            try:
                if self.served():
                    break
            except Exception as error:  # asked again later
                log.warning(f"could not ask whether Rollouts are served: {describe(error)}")
            if not said:
                said = True
                log.info(
                    "Rollouts (argoproj.io/v1alpha1) are not served: not watched; asking "
                    f"again every {DISCOVERY_INTERVAL:g}s"
                )
            if self.stopping.wait(DISCOVERY_INTERVAL):
                return
        else:
            return
        log.info(f"Rollouts are served: listing and watching them in {self.scope}")
        # Until listed, a change waits rather than miss a Rollout that uses its source.
        self._synced(False)
        self.on_served()
        super().run()

    def template_source(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Rollout with ``spec.workloadRef`` runs the pod template of that Deployment."""
        deployment = rollout_workload_ref(body)
        if deployment is None:
            return body
        namespace = (body.get("metadata") or {}).get("namespace", "")
        return with_template(body, self.api.read_workload("deployments", namespace, deployment))
