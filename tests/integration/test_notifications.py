"""Notifications through apprise to a real HTTP receiver on loopback (``json://``): a held
restart and then the restart itself, each one message for the namespace, naming the
workload and never a Secret value."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes
import pytest

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, env_from_secret, secret, window_open_now
from tests.integration.test_operator_restarts import (
    baseline,
    change_data,
    replica_sets,
    rollout_finished,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]
VALUE = "n0t-in-any-notification"


class Receiver:
    """An HTTP server on 127.0.0.1 keeping every JSON body posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    running.thread.start()
    yield running
    running.server.shutdown()
    running.server.server_close()


def titled(receiver: Receiver, words: str) -> dict[str, Any] | None:
    return next((body for body in receiver.bodies if words in body.get("title", "")), None)


def test_a_held_restart_and_the_restart_are_notified_per_namespace_without_values(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    receiver: Receiver,
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    for name in ("web", "api"):
        apps.create_namespaced_deployment(namespace, deployment(name, env=[env_from_secret("db")]))
        rollout_finished(cluster, namespace, name)
    core.patch_namespace(namespace, {"metadata": {"annotations": {keys.HOLD: "freeze"}}})
    env = {"RESTARTER_NOTIFY_URLS": receiver.url, "RESTARTER_NOTIFY_BATCH": "3s"}
    operator(env=env)
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", VALUE)

    held = wait_for(lambda: titled(receiver, "2 held"), 60, message="the held notification")
    assert held["title"] == f"restarter in {namespace}: 2 held"
    assert held["type"] == "warning"
    for name in ("web", "api"):
        assert f"Deployment/{name}: RestartHeld: restart due but held by" in held["message"]

    core.patch_namespace(namespace, {"metadata": {"annotations": {keys.HOLD: None}}})
    for name in ("web", "api"):
        wait_for(lambda n=name: len(replica_sets(apps, namespace, n)) == 2, 30, message=name)
    done = wait_for(lambda: titled(receiver, "2 restarted"), 60, message="the restart notification")
    assert done["title"] == f"restarter in {namespace}: 2 restarted"
    assert "Deployment/api: Restarted: restarted in window" in done["message"]
    assert len(receiver.bodies) == 2  # one message per batch, not one per Event
    assert not any(VALUE in json.dumps(body) for body in receiver.bodies)
