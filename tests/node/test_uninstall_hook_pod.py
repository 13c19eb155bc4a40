"""``helm uninstall`` runs the pre-delete hook Job as a real pod from the image; a workload
that was pending then carries no finalizer and can be deleted."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
import urllib3

from restarter.model import keys
from tests.conftest import wait_for
from tests.integration.test_operator_lifecycle_and_bad_input import (
    holds_finalizer,
    paused_dependent,
)
from tests.integration.test_operator_restarts import baseline, change_data, pending
from tests.node.conftest import Release

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api


def _watch_hook_pods(core: Core, namespace: str, seen: list[Any], stop: threading.Event) -> None:
    """Record every state of the hook's pods (helm deletes the Job once it succeeded),
    until told to stop; the watch ending early (the namespace going) ends it too."""
    watch = kubernetes.watch.Watch()
    with contextlib.suppress(
        kubernetes.client.exceptions.ApiException, urllib3.exceptions.HTTPError
    ):
        for event in watch.stream(
            core.list_namespaced_pod,
            namespace,
            label_selector="app.kubernetes.io/component=uninstall-hook",
            timeout_seconds=240,
        ):
            seen.append(event["object"])
            if stop.is_set():
                watch.stop()


def test_helm_uninstall_runs_the_hook_as_a_real_pod_then_a_pending_workload_deletes(
    install: Callable[..., Release], core: Core, apps: Apps, namespace: str
) -> None:
    release = install([namespace])
    paused_dependent(core, apps, namespace)
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: pending(apps, namespace, "web"), 30, message="pending marks")
    wait_for(lambda: holds_finalizer(apps, namespace, "web"), 30, message="its timer's finalizer")

    seen: list[Any] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=_watch_hook_pods, args=(core, release.namespace, seen, stop), daemon=True
    )
    watcher.start()
    try:
        result = release.uninstall("--wait", "--timeout=4m")
    finally:
        stop.set()
    assert result.returncode == 0, result.stderr
    watcher.join(30)

    succeeded = [pod for pod in seen if pod.status.phase == "Succeeded"]
    assert succeeded, [(pod.metadata.name, pod.status.phase) for pod in seen]
    hook = succeeded[-1]
    assert hook.spec.node_name == "real-node"
    terminated = hook.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 0
    assert hook.status.container_statuses[0].image.startswith("localhost/restarter:")

    web = apps.read_namespaced_deployment("web", namespace)
    assert keys.FINALIZER not in (web.metadata.finalizers or [])
    assert pending(apps, namespace, "web")  # the marks stay
    apps.delete_namespaced_deployment("web", namespace)

    def gone() -> bool:
        try:
            apps.read_namespaced_deployment("web", namespace)
        except kubernetes.client.exceptions.ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, 30, message="the deployment deleted")
