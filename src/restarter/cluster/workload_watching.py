"""Keeping the reference map current: a paged list, then a watch, of each workload kind.

One thread per (kind, namespace) stream; under a namespace selector one per kind, for
every namespace. A list is consistent (served by etcd at one
revision) and paged; if its continue token expires mid-way (410), it starts again, so
start-up never stops on a long list. A watch the server ends on time resumes from the
last resourceVersion seen (bookmarks keep it fresh); a watch that fails (410, a lost
connection, an error) makes the stream list again, and the map follows that listing
(deleted workloads dropped, none invented). A stream is in sync only once its map is
current: after a listing, or while an unbroken watch runs.
Rollouts are streamed only once their CRD is served (asked every ``DISCOVERY_INTERVAL``);
until then their stream is in sync with nothing to know. A Rollout with
``spec.workloadRef`` uses the pod template of the Deployment it names.
Nothing here decides a restart: the map only answers "who uses this source".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from restarter.cluster.reference_map import ReferenceMap, uses_of
from restarter.model import bodies, reasons
from restarter.model.kinds import APPS_KINDS, KINDS, ROLLOUTS, WORKLOAD_KINDS, api_version
from restarter.model.optin import OptIn, invalid_entries_message
from restarter.model.references import rollout_workload_ref, with_template
from restarter.services.events import Direct
from restarter.services.kube import Api, ApiError, stream_lines

log = logging.getLogger(__name__)

#: Workloads per list page: about 2 MB of JSON for typical Deployments.
PAGE_SIZE = 500
#: Seconds a watch request stays open before the server ends it and we resume.
WATCH_TIMEOUT = 300
#: Seconds between two questions whether Rollouts are served (their CRD installed).
DISCOVERY_INTERVAL = 10.0
#: Seconds to wait after a failed list or watch, doubling up to the maximum.
RETRY_DELAY, MAX_RETRY_DELAY = 1.0, 30.0


class Inspector(Protocol):
    """Told of every workload body the streams see, and of what disappears."""

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        """A listed or watched workload that still exists."""

    def deleted(self, plural: str, namespace: str, name: str) -> None: ...

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        """A complete listing: (namespace, name) of every workload of the kind there."""


class Gone(Exception):
    """The watch's resourceVersion is older than the server keeps: list again."""


class ListWatch:
    """One resource in one namespace (None: all): a paged list, then a watch, forever.

    Subclasses say what to list and watch (``list_page``, ``open_watch``) and what to do
    with what arrives (``take``, ``took_listing``, ``take_event``).
    """

    def __init__(
        self,
        resource: str,
        namespace: str | None,
        stopping: threading.Event,
        on_sync: Callable[[], None],
    ) -> None:
        self.resource, self.namespace = resource, namespace
        self.stopping, self.on_sync = stopping, on_sync
        self.synced = threading.Event()
        self.lists = 0
        self.scope = namespace or "all namespaces"

    def list_page(self, token: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def open_watch(self, resource_version: str) -> Any:
        raise NotImplementedError

    def take(self, item: dict[str, Any], listing: dict[tuple[str, str], Any]) -> None:
        """One listed object, into ``listing`` ((namespace, name) → what is kept of it)."""
        raise NotImplementedError

    def took_listing(self, listing: dict[tuple[str, str], Any]) -> str:
        """A complete listing arrived; what to add to its log line."""
        raise NotImplementedError

    def take_event(self, kind: str, body: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED or DELETED)."""
        raise NotImplementedError

    def decode_event(self, line: str) -> dict[str, Any]:
        """One line of the watch as plain dicts: only the fields restarter reads become
        objects (model/bodies.py)."""
        return bodies.decode_watch_event(line)

    def run(self) -> None:
        resource_version: str | None = None
        delay = RETRY_DELAY
        while not self.stopping.is_set():
            try:
                if resource_version is None:
                    resource_version = self.list_all()
                    self._synced(True)
                resource_version = self.watch_from(resource_version)
                delay = RETRY_DELAY
            except Gone:
                # Until the new listing lands, changes wait rather than miss a new user.
                self._synced(False)
                log.info(f"{self.resource} in {self.scope}: watch history expired; listing again")
                resource_version = None
            except Exception as error:  # the stream must outlive any one failure
                self._synced(False)
                log.warning(
                    f"{self.resource} in {self.scope}: {_describe(error)}; listing in {delay:g}s"
                )
                # A resumed watch would be in sync on connecting but deliver what changed
                # during the failure only afterwards: a change handled in between would miss
                # a workload that started using its source meanwhile. A listing is current.
                resource_version = None
                if self.stopping.wait(delay):
                    return
                delay = min(delay * 2, MAX_RETRY_DELAY)

    def _synced(self, value: bool) -> None:
        if value:
            self.synced.set()
        else:
            self.synced.clear()
        self.on_sync()

    def list_all(self) -> str:
        """A complete listing taken; the resourceVersion to watch from."""
        while True:
            try:
                listed, resource_version = self._pages()
            except ApiError as error:
                if error.status != 410:
                    raise
                log.info(f"{self.resource} in {self.scope}: list expired mid-way; listing again")
                continue
            noted = self.took_listing(listed)
            self.lists += 1
            log.info(f"listed {len(listed)} {self.resource} in {self.scope}{noted}")
            return resource_version

    def _pages(self) -> tuple[dict[tuple[str, str], Any], str]:
        listed: dict[tuple[str, str], Any] = {}
        token: str | None = None
        while True:
            page = self.list_page(token)
            for item in page.get("items") or []:
                self.take(item, listed)
            token = page["metadata"].get("continue")
            if not token:
                return listed, str(page["metadata"]["resourceVersion"])

    def watch_from(self, resource_version: str) -> str:
        """Take watch events until the server ends the watch; the last version seen."""
        try:
            response = self.open_watch(resource_version)
        except ApiError as error:
            if error.status == 410:
                raise Gone() from None
            raise
        try:
            # In sync already: a watch starts only after a listing or an unbroken watch.
            for event in _events(response, self.decode_event):
                kind, body = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if body.get("code") == 410:
                        raise Gone()
                    raise RuntimeError(f"watch error {body.get('code')}: {body.get('reason')}")
                metadata = body.get("metadata") or {}
                resource_version = str(metadata.get("resourceVersion", resource_version))
                if kind == "BOOKMARK":
                    continue
                self.take_event(str(kind), body)
                if self.stopping.is_set():
                    break
        finally:
            response.release_conn()
        return resource_version


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
        reloader: bool = False,
    ) -> None:
        super().__init__(plural, namespace, stopping, on_sync)
        self.api, self.reference_map, self.plural = api, reference_map, plural
        self.inspect, self.reloader = inspect, reloader
        self.events = Direct(api)
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

    def open_watch(self, resource_version: str) -> Any:
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
        try:
            self.events.post(workload, reason=reasons.INVALID_RELOAD_ENTRY, message=message)
        except Exception as error:  # the watch must outlive one failed Event
            log.warning(f"{WORKLOAD_KINDS[self.plural]} {key[0]}/{key[1]}: no Event: {error}")


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
                log.warning(f"could not ask whether Rollouts are served: {_describe(error)}")
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


def _events(response: Any, decode: Callable[[str], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for line in stream_lines(response):
        if line:
            yield decode(line)


def _describe(error: Exception) -> str:
    if isinstance(error, ApiError):
        return f"API error {error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


class ScopedInspector:
    """Cluster-wide streams under a namespace selector: the inspector is told only of the
    workloads of namespaces in scope (``includes``), and forgets a namespace's workloads
    when it leaves. The reference map keeps every namespace's references (one stream per
    kind, not one per kind and namespace: a thousand matching namespaces would otherwise
    hold three thousand threads and watches); what acts on a workload asks the scope."""

    def __init__(self, inner: Inspector, includes: Callable[[str], bool]) -> None:
        self.inner, self.includes = inner, includes
        self._known: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def observe(self, plural: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        if self.includes(namespace):
            with self._lock:
                self._known.setdefault(namespace, set()).add((plural, name))
            self.inner.observe(plural, body)
        else:
            self.deleted(plural, namespace, name)

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        with self._lock:
            known = self._known.get(namespace)
            if known is None or (plural, name) not in known:
                return
            known.discard((plural, name))
            if not known:
                del self._known[namespace]
        self.inner.deleted(plural, namespace, name)

    def listed(self, plural: str, namespace: str | None, present: set[tuple[str, str]]) -> None:
        inside = {key for key in present if self.includes(key[0])}
        with self._lock:
            for known in self._known.values():
                known.difference_update([key for key in known if key[0] == plural])
            for known_namespace, name in inside:
                self._known.setdefault(known_namespace, set()).add((plural, name))
            for empty in [ns for ns, known in self._known.items() if not known]:
                del self._known[empty]
        self.inner.listed(plural, namespace, inside)

    def leave(self, namespace: str) -> None:
        """The namespace left the scope: its workloads are forgotten."""
        with self._lock:
            known = self._known.pop(namespace, set())
        for plural, name in known:
            self.inner.deleted(plural, namespace, name)


class WorkloadWatcher:
    """Every workload kind in every watched namespace, each in a daemon thread.

    ``scopes`` are the namespaces watched (None: all of them). Under a namespace selector
    (``scoped``) the streams are cluster-wide, and ``watch_namespace`` and
    ``unwatch_namespace`` tell the scoped inspector of the namespaces that match.
    """

    def __init__(
        self,
        api: Api,
        reference_map: ReferenceMap,
        scopes: tuple[str | None, ...],
        inspect: Inspector,
        reloader: bool = False,
        on_rollouts_served: Callable[[], None] | None = None,
        scoped: ScopedInspector | None = None,
    ) -> None:
        self.api, self.reference_map, self.inspect = api, reference_map, inspect
        self.scoped = scoped
        self.reloader = reloader
        self.in_sync = threading.Event()
        self.on_rollouts_served = on_rollouts_served
        self.rollouts_served = ServedAsked(api)
        self.streams: list[Stream] = []
        self._lock = threading.Lock()
        self._started = False
        for scope in scopes:
            self._add(scope)

    def _add(self, namespace: str | None) -> list[Stream]:
        streams: list[Stream] = []
        for plural in WORKLOAD_KINDS:
            arguments: dict[str, Any] = {
                "api": self.api,
                "reference_map": self.reference_map,
                "plural": plural,
                "namespace": namespace,
                "inspect": self.inspect,
                "stopping": threading.Event(),
                "on_sync": self._update,
                "reloader": self.reloader,
            }
            if KINDS[plural].built_in:
                streams.append(Stream(**arguments))
            elif self.on_rollouts_served is not None:
                streams.append(
                    RolloutStream(
                        **arguments, on_served=self.on_rollouts_served, served=self.rollouts_served
                    )
                )
        with self._lock:
            self.streams += streams
        return streams

    def kinds(self) -> tuple[str, ...]:
        """The workload kinds there are to act on: Rollouts when wanted and served (asked
        of discovery at most once per interval)."""
        if self.on_rollouts_served is None:
            return APPS_KINDS
        try:
            served = self.rollouts_served()
        except Exception as error:  # as last known; the streams ask again
            log.warning(f"could not ask whether Rollouts are served: {_describe(error)}")
            served = self.rollouts_served.known
        return (*APPS_KINDS, ROLLOUTS) if served else APPS_KINDS

    def _update(self) -> None:
        """in_sync: every stream has listed and none is between a failure and its retry."""
        with self._lock:
            synced = all(stream.synced.is_set() for stream in self.streams)
        if synced:
            self.in_sync.set()
        else:
            self.in_sync.clear()

    def start(self) -> WorkloadWatcher:
        with self._lock:
            self._started = True
            streams = list(self.streams)
        for stream in streams:
            _run(stream)
        self._update()
        return self

    def watch_namespace(self, namespace: str, before_start: Callable[[], None]) -> None:
        """A namespace came into scope: list and watch its workloads. Until they are
        listed, in_sync is clear, so no change of a source is handled without them;
        ``before_start`` runs once it is clear, before the first listing.

        Under a namespace selector the cluster-wide streams hold its workloads already:
        ``before_start`` (which puts it in scope) runs at once, and once the streams run,
        one listing of each kind there tells the inspector of its workloads."""
        if self.scoped is not None:
            before_start()
            with self._lock:
                started = self._started
            if started:
                self._inspect_listing(namespace)
            return
        with self._lock:
            if any(stream.namespace == namespace for stream in self.streams):
                return
        streams = self._add(namespace)
        self._update()
        before_start()
        with self._lock:
            started = self._started
        if started:
            for stream in streams:
                _run(stream)

    def unwatch_namespace(self, namespace: str) -> None:
        """A namespace left the scope: stop its streams and drop its workloads from the map
        (under a namespace selector: the inspector forgets them; the map keeps them)."""
        if self.scoped is not None:
            self.scoped.leave(namespace)
            return
        with self._lock:
            leaving = [stream for stream in self.streams if stream.namespace == namespace]
            self.streams = [stream for stream in self.streams if stream not in leaving]
        for stream in leaving:
            stream.stop()
            self.reference_map.replace(stream.plural, namespace, {})
            self.inspect.listed(stream.plural, namespace, set())
        self._update()

    def _inspect_listing(self, namespace: str) -> None:
        """Every workload of the namespace, page by page, to the inspector."""
        for plural in self.kinds():
            token: str | None = None
            while True:
                page = self.api.list_page(plural, namespace, token, PAGE_SIZE)
                for item in page.get("items") or []:
                    self.inspect.observe(plural, item)
                token = page["metadata"].get("continue")
                if not token:
                    break

    def stop(self) -> None:
        """Ask every stream to stop; a watch blocked on the network ends with the process."""
        with self._lock:
            self._started = False
            streams = list(self.streams)
        for stream in streams:
            stream.stopping.set()


def _run(stream: ListWatch) -> None:
    threading.Thread(
        target=stream.run, name=f"watch-{stream.resource}-{stream.scope}", daemon=True
    ).start()
