"""The apiserver's own rate for the requests restarter sends, from a bare Python loop.

The same local control plane, the same watchers running, 16 threads of the kubernetes
client (as restarter's stamps and restarts use): what restarter's stamp throughput and
window restarts per second are compared with.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes

from bench.workload import NAMESPACE

THREADS = 16
#: Annotation the loop's metadata PATCH writes (restarter's marks are annotations too).
ANNOTATION = "bench.restarter.io/rate"
#: Pod-template annotation the loop's restart PATCH writes.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def measure(client: kubernetes.client.ApiClient, names: list[str]) -> dict[str, float]:
    """Requests per second over ``names``: metadata PATCH alone, PATCH plus an Event
    (a stamp and its RestartScheduled), and a pod-template PATCH (a restart)."""
    apps = kubernetes.client.AppsV1Api(client)
    core = kubernetes.client.CoreV1Api(client)
    token = str(int(time.time()))

    def metadata(name: str, suffix: str) -> Any:
        patch = {"metadata": {"annotations": {ANNOTATION: f"{token}-{suffix}"}}}
        return apps.patch_namespaced_deployment(name, NAMESPACE, patch)

    def with_event(name: str) -> None:
        body = metadata(name, "event")
        now = dt.datetime.now(dt.UTC)
        core.create_namespaced_event(
            NAMESPACE,
            {
                "metadata": {"generateName": f"{name}."},
                "involvedObject": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "namespace": NAMESPACE,
                    "uid": body.metadata.uid,
                },
                "type": "Normal",
                "reason": "BenchRate",
                "message": "the apiserver's own rate",
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "source": {"component": "bench"},
            },
        )

    def restart(name: str) -> None:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
        apps.patch_namespaced_deployment(name, NAMESPACE, patch)

    return {
        "metadata_patch_per_s": _rate(lambda name: metadata(name, "alone"), names),
        "patch_and_event_per_s": _rate(with_event, names),
        "restart_patch_per_s": _rate(restart, names),
        "threads": THREADS,
        "requests_each": len(names),
    }


def _rate(request: Callable[[str], Any], names: list[str]) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(request, names))
    return len(names) / (time.monotonic() - started)
