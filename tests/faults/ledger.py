"""The fault tests' own record of what happened to Deployments, and where figures go.

A ``Ledger`` watches every Deployment of a namespace through its own client and keeps
each distinct ``restartedAt`` value and each pending mark it ever showed. Its watch
resumes from the last resourceVersion after any failure (an apiserver that is down, a
dropped connection) and lists again after a 410, so it outlives the faults it observes.
A test can arm it to run an action (kill the operator, stop the apiserver) when it has
seen a given number of stamps or restarts: kill points come from the watch, not sleeps.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.watch.watch import iter_resp_lines

from restarter.model import keys

#: Progress kinds a ledger counts: a new pending mark value, a new restartedAt value.
STAMP, RESTART = "stamp", "restart"


@dataclass
class Trigger:
    """Run ``action`` once the ledger has seen ``count`` more events of ``kinds``."""

    count: int
    kinds: frozenset[str]
    action: Callable[[], None]
    names: Callable[[str], bool] = lambda _: True
    seen: int = 0
    fired: threading.Event = field(default_factory=threading.Event)


class Ledger:
    """Every restartedAt and pending mark each Deployment of a namespace ever showed."""

    def __init__(self, api_client: kubernetes.client.ApiClient, namespace: str) -> None:
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.namespace = namespace
        self.restarted_at: dict[str, list[str]] = defaultdict(list)
        self.marks: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self.stamps = 0
        self.restarts = 0
        self.reconnects = 0
        self.last_error = ""
        self._lock = threading.Lock()
        self._trigger: Trigger | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ledger")

    def __enter__(self) -> Ledger:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()

    def arm(
        self,
        count: int,
        action: Callable[[], None],
        kinds: tuple[str, ...] = (STAMP, RESTART),
        names: Callable[[str], bool] = lambda _: True,
    ) -> threading.Event:
        """Run ``action`` (in its own thread) after ``count`` more events; 0 runs it now."""
        trigger = Trigger(count, frozenset(kinds), action, names)
        with self._lock:
            self._trigger = trigger
            if count == 0:
                self._fire(trigger)
        return trigger.fired

    def _fire(self, trigger: Trigger) -> None:
        self._trigger = None

        def run() -> None:
            trigger.action()
            trigger.fired.set()

        threading.Thread(target=run, daemon=True, name="ledger-trigger").start()

    def restarts_of(self, name: str) -> list[str]:
        with self._lock:
            return list(self.restarted_at[name])

    def marked(self, name: str, pending_key: str) -> bool:
        """Whether ``name`` ever carried the pending mark ``pending_key``."""
        with self._lock:
            return any(key == pending_key for key, _ in self.marks[name])

    def _record(self, body: dict[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        name = metadata.get("name", "")
        template = ((body.get("spec") or {}).get("template") or {}).get("metadata") or {}
        restarted_at = (template.get("annotations") or {}).get(keys.KUBECTL_RESTARTED_AT)
        marks = {
            (key, value)
            for key, value in (metadata.get("annotations") or {}).items()
            if key.startswith(keys.PENDING_MARK + "/")
        }
        with self._lock:
            events = []
            if restarted_at and restarted_at not in self.restarted_at[name]:
                self.restarted_at[name].append(restarted_at)
                self.restarts += 1
                events.append(RESTART)
            new_marks = marks - self.marks[name]
            if new_marks:
                self.marks[name] |= new_marks
                self.stamps += len(new_marks)
                events.extend(STAMP for _ in new_marks)
            trigger = self._trigger
            if trigger and trigger.names(name):
                trigger.seen += sum(1 for kind in events if kind in trigger.kinds)
                if trigger.seen >= trigger.count:
                    self._fire(trigger)

    def _run(self) -> None:
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    listing = self.apps.list_namespaced_deployment(
                        self.namespace, _preload_content=False
                    )
                    parsed = json.loads(listing.data)
                    for item in parsed.get("items") or []:
                        self._record(item)
                    resource_version = parsed["metadata"]["resourceVersion"]
                response = self.apps.list_namespaced_deployment(
                    self.namespace,
                    watch=True,
                    resource_version=resource_version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=60,
                    _preload_content=False,
                    _request_timeout=(5, 90),
                )
                try:
                    for line in iter_resp_lines(response):
                        if not line:
                            continue
                        event = json.loads(line)
                        body = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            # 410: the history is gone, list again; anything else: retry.
                            if body.get("code") == 410:
                                resource_version = None
                            break
                        resource_version = body["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._record(body)
                        if self._stop.is_set():
                            return
                finally:
                    response.release_conn()
            except kubernetes.client.exceptions.ApiException as error:
                self.reconnects += 1
                if error.status == 410:
                    resource_version = None
                else:
                    time.sleep(0.3)
            except Exception as error:  # the apiserver is down or the connection dropped
                self.last_error = repr(error)
                self.reconnects += 1
                time.sleep(0.3)


def eventually(predicate: Callable[[], Any], timeout: float) -> bool:
    """Whether ``predicate`` came true within ``timeout`` seconds (polled each second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1.0)
    return False


def report(fault: str, figures: dict[str, Any]) -> None:
    """Print one line of figures (seen with ``pytest -s``) and append it, as JSON, to the
    file named by ``$RESTARTER_FAULTS_REPORT`` when set."""
    line = json.dumps({"fault": fault, **figures}, sort_keys=True)
    print(f"\nFAULT {line}", file=sys.stderr)
    target = os.environ.get("RESTARTER_FAULTS_REPORT")
    if target:
        with Path(target).open("a") as out:
            out.write(line + "\n")


def seed_from_env(name: str = "RESTARTER_FAULT_SEED") -> int:
    """The seed in ``$RESTARTER_FAULT_SEED``, else a fresh one; printed either way."""
    value = os.environ.get(name)
    seed = int(value) if value else int.from_bytes(os.urandom(4), "big")
    print(f"\n{name}={seed}", file=sys.stderr)
    return seed


def restarts_without_replica_set(
    apps: kubernetes.client.AppsV1Api, namespace: str, restarts: Mapping[str, Iterable[str]]
) -> dict[str, str]:
    """Per Deployment, its latest restartedAt if no ReplicaSet carries it (yet): the last
    restart rolled out. Earlier ones need not have a ReplicaSet of their own: the
    deployment controller works from the latest template, so a restart superseded before
    kube-controller-manager synced the Deployment (replicas 0, restarts seconds apart, a
    controller busy with a thousand rollouts) never gets one; the ledger saw each on the
    Deployment itself."""
    rolled: dict[str, set[str]] = defaultdict(set)
    for replica_set in apps.list_namespaced_replica_set(namespace).items:
        owner = replica_set.metadata.owner_references[0].name
        template = replica_set.spec.template.metadata.annotations or {}
        if keys.KUBECTL_RESTARTED_AT in template:
            rolled[owner].add(template[keys.KUBECTL_RESTARTED_AT])
    latest = {name: max(values) for name, values in restarts.items() if values}
    return {name: value for name, value in latest.items() if value not in rolled[name]}
