"""A watch on the benchmark's Deployments that timestamps every change of interest.

Latencies are measured here, on the harness's side, for every operator alike: the time a
change to a Secret was sent, and the time the apiserver delivered the Deployment carrying
the operator's answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes

from bench.workload import NAMESPACE
from restarter.model import keys

#: Annotation prefixes recorded from each Deployment event.
RECORDED_PREFIXES = (keys.PENDING_MARK + "/", "naive.bench/")
#: Key under which the pod template's restartedAt is recorded.
RESTARTED_AT = "restartedAt"
#: Pod-template annotation Reloader writes with ``--reload-strategy annotations``: JSON
#: naming the Secret and the hash of the data it acted on (``common.ReloadSource``).
RELOADER_ANNOTATION = "reloader.stakater.com/last-reloaded-from"
#: Key under which that annotation is recorded.
RELOADED_FROM = "lastReloadedFrom"

Marks = Mapping[str, str]
Predicate = Callable[[Marks], bool]


@dataclass(frozen=True)
class Sighting:
    at: float
    """Wall-clock seconds when the harness received the event."""
    marks: Marks


class DeploymentWatcher:
    """Runs one watch in a daemon thread; ``wait`` answers "when did each one show X?".

    Only changes of the recorded marks are kept, in arrival order.
    """

    def __init__(
        self, client: kubernetes.client.ApiClient, namespace: str | None = NAMESPACE
    ) -> None:
        """``namespace`` None: every namespace, each Deployment named ``namespace/name``."""
        self._apps = kubernetes.client.AppsV1Api(client)
        self._namespace = namespace
        self._last: dict[str, Marks] = {}
        self._lagging: set[str] = set()
        """Deployments whose generation the deployment controller has not observed yet."""
        self._sightings: list[tuple[str, Sighting]] = []
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)

    def start(self) -> DeploymentWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True

    def forget(self) -> None:
        """Drop the recorded sightings (between runs)."""
        with self._changed:
            self._sightings = []

    def wait(
        self, names: Iterable[str], predicate: Predicate, since: float, timeout: float
    ) -> dict[str, float]:
        """For each name, the first time at or after ``since`` its marks satisfied the
        predicate; names still missing at the timeout are left out."""
        return self.wait_each(dict.fromkeys(names, predicate), since, timeout)

    def wait_each(
        self,
        predicates: Mapping[str, Predicate],
        since: float,
        timeout: float,
        stall: float | None = None,
    ) -> dict[str, float]:
        """``wait`` with a predicate per name; with ``stall``, it also gives up once no
        name has newly satisfied its predicate for that many seconds (an operator that
        works slowly but steadily gets the whole ``timeout``)."""
        outstanding = dict(predicates)
        found: dict[str, float] = {}
        position = 0
        deadline = time.monotonic() + timeout
        progressed = time.monotonic()
        with self._changed:
            while True:
                sightings = self._sightings
                for name, sighting in sightings[position:]:
                    predicate = outstanding.get(name)
                    if predicate and sighting.at >= since and predicate(sighting.marks):
                        found[name] = sighting.at
                        del outstanding[name]
                        progressed = time.monotonic()
                position = len(sightings)
                now = time.monotonic()
                remaining = deadline - now
                stalled = stall is not None and now - progressed > stall
                if not outstanding or remaining <= 0 or stalled:
                    return found
                self._changed.wait(min(remaining, 1.0))

    def history(self, since: float) -> dict[str, list[Marks]]:
        """Per Deployment, its recorded marks seen at or after ``since``, in order (each
        entry differs from the one before)."""
        seen: dict[str, list[Marks]] = {}
        with self._changed:
            for name, sighting in self._sightings:
                if sighting.at >= since:
                    seen.setdefault(name, []).append(sighting.marks)
        return seen

    def settled(self, names: Iterable[str]) -> bool:
        """Every one of ``names`` seen, and none awaiting the deployment controller."""
        with self._changed:
            return not self._lagging and all(name in self._last for name in names)

    # -- the watch ----------------------------------------------------------------------

    def _run(self) -> None:
        resource_version = None
        while not self._stopping:
            try:
                if resource_version is None:
                    resource_version = self._list()
                resource_version = self._watch(resource_version)
            except Exception:  # the watch expired or the connection dropped: re-list
                resource_version = None
                time.sleep(0.5)

    def _list(self) -> str:
        token, resource_version = None, ""
        while True:  # paged: a single answer for 10 000 realistic bodies is 100 MB
            response = self._lister(limit=1000, _continue=token, _preload_content=False)
            listing = json.loads(response.data)
            for item in listing.get("items") or []:
                self._record(item)
            resource_version = resource_version or str(listing["metadata"]["resourceVersion"])
            token = listing["metadata"].get("continue")
            if not token:
                return resource_version

    def _lister(self, **kwargs: Any) -> Any:
        if self._namespace is None:
            return self._apps.list_deployment_for_all_namespaces(**kwargs)
        return self._apps.list_namespaced_deployment(self._namespace, **kwargs)

    def _watch(self, resource_version: str) -> str:
        response = self._lister(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=600,
            _preload_content=False,
        )
        buffer = b""
        try:
            for chunk in response.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(event["object"].get("message"))
                    resource_version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(event["object"])
                    elif event["type"] == "DELETED":
                        self._forget(event["object"])
                if self._stopping:
                    break
        finally:
            response.release_conn()
        return resource_version

    def _key(self, metadata: dict[str, Any]) -> str:
        name = str(metadata["name"])
        return name if self._namespace is not None else f"{metadata['namespace']}/{name}"

    def _forget(self, deployment: dict[str, Any]) -> None:
        name = self._key(deployment["metadata"])
        with self._changed:
            self._last.pop(name, None)
            self._lagging.discard(name)

    def _record(self, deployment: dict[str, Any]) -> None:
        at = time.time()
        annotations = deployment["metadata"].get("annotations") or {}
        marks = {k: v for k, v in annotations.items() if k.startswith(RECORDED_PREFIXES)}
        template = deployment["spec"]["template"]["metadata"].get("annotations") or {}
        if keys.KUBECTL_RESTARTED_AT in template:
            marks[RESTARTED_AT] = template[keys.KUBECTL_RESTARTED_AT]
        if RELOADER_ANNOTATION in template:
            marks[RELOADED_FROM] = template[RELOADER_ANNOTATION]
        metadata = deployment["metadata"]
        name = self._key(metadata)
        observed = deployment.get("status", {}).get("observedGeneration")
        with self._changed:
            if observed == metadata.get("generation"):
                self._lagging.discard(name)
            else:
                self._lagging.add(name)
            if self._last.get(name) != marks:
                self._last[name] = marks
                self._sightings.append((name, Sighting(at, marks)))
                self._changed.notify_all()
