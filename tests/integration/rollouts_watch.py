"""The pacing tests' own watch of Deployments: restarts seen and rollouts in flight, with the
``rollouts`` fixture (tests/integration/conftest.py) that starts it."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import kubernetes

from restarter.model import keys
from restarter.model.kinds import progress
from restarter.model.progress import Progress


class Rollouts:
    """The test's own watch: each Deployment's restartedAt values and restart-ts, and the
    most restarts by restarter whose rollout was incomplete (kubectl's rules) at once,
    counting a rollout until it completes or its rollout timeout passes."""

    def __init__(
        self, api_client: kubernetes.client.ApiClient, namespace: str, timeout: float
    ) -> None:
        self.api_client, self.namespace, self.timeout = api_client, namespace, timeout
        self.restarted_at: dict[str, set[str]] = defaultdict(set)
        self.restart_ts: dict[str, set[int]] = defaultdict(set)
        self.incomplete: dict[str, int] = {}  # name → restart-ts
        self.completed: dict[str, set[int]] = defaultdict(set)
        self.max_in_flight = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Rollouts:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()

    def _run(self) -> None:
        apps = kubernetes.client.AppsV1Api(self.api_client)
        watch = kubernetes.watch.Watch()
        for event in watch.stream(
            apps.list_namespaced_deployment, self.namespace, timeout_seconds=900
        ):
            body = self.api_client.sanitize_for_serialization(event["object"])
            name = body["metadata"]["name"]
            template = (body["spec"]["template"].get("metadata") or {}).get("annotations") or {}
            restart_ts = (body["metadata"].get("annotations") or {}).get(keys.RESTART_TS)
            with self._lock:
                if keys.KUBECTL_RESTARTED_AT in template:
                    self.restarted_at[name].add(template[keys.KUBECTL_RESTARTED_AT])
                # A rollout counts until it first completes (as kubectl rollout status
                # waits); a later dip in availability is not the restart's rollout.
                if restart_ts and int(restart_ts) not in self.completed[name]:
                    self.restart_ts[name].add(int(restart_ts))
                    if progress("deployments", body) is Progress.COMPLETE:
                        self.incomplete.pop(name, None)
                        self.completed[name].add(int(restart_ts))
                    else:
                        self.incomplete[name] = int(restart_ts)
                now = time.time()
                holding = [ts for ts in self.incomplete.values() if now - ts < self.timeout]
                self.max_in_flight = max(self.max_in_flight, len(holding))
            if self._stop.is_set():
                watch.stop()

    def restarted(self) -> set[str]:
        with self._lock:
            return set(self.restarted_at)

    def starts(self) -> list[int]:
        with self._lock:
            return sorted(ts for values in self.restart_ts.values() for ts in values)
