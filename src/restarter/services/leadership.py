"""Two replicas, one acting: a ``coordination.k8s.io`` Lease, held through the Kubernetes
client's own leader election (the Lease lock client-go uses, same fields and rules).

A replica blocks before kopf starts until it holds the Lease, answering its liveness
probe meanwhile; it then renews the Lease every ``RETRY_PERIOD`` seconds. A replica that
cannot renew within ``RENEW_DEADLINE`` exits at once (a standby takes over after
``LEASE_DURATION``), so two replicas never act together: the renew deadline is shorter
than the time the other waits before taking over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from restarter.services import metrics

#: Seconds a standby waits, after the holder's last renewal it saw, before taking over.
LEASE_DURATION = 15
#: Seconds the holder keeps trying to renew before it gives up and exits.
RENEW_DEADLINE = 10
#: Seconds between attempts to acquire or renew.
RETRY_PERIOD = 2

log = logging.getLogger(__name__)


def identity() -> str:
    """The pod's name in a cluster (``POD_NAME``), else host name and a random suffix."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def _lost() -> None:
    log.error("lost the Lease (could not renew it in time); exiting so that one replica acts")
    logging.shutdown()
    os._exit(1)


class _Healthy(BaseHTTPRequestHandler):
    path_served = "/healthz"

    def do_GET(self) -> None:
        ok = self.path.split("?")[0] == self.path_served
        self.send_response(200 if ok else 404)
        self.end_headers()
        if ok:
            self.wfile.write(b"standby\n")

    def log_message(self, format: str, *args: object) -> None:
        return  # probes every 30 s need no log line


def _standby_health(endpoint: str | None) -> ThreadingHTTPServer | None:
    """While waiting, the liveness endpoint answers 200, so the probe does not kill a
    healthy standby; it is closed before kopf opens its own on the same port."""
    if not endpoint:
        return None
    url = urlsplit(endpoint)
    handler = type("Healthy", (_Healthy,), {"path_served": url.path or "/healthz"})
    server = ThreadingHTTPServer((url.hostname or "0.0.0.0", url.port or 80), handler)
    threading.Thread(target=server.serve_forever, name="standby-health", daemon=True).start()
    return server


def lead(namespace: str, name: str, liveness_endpoint: str | None) -> None:
    """Block until this replica holds the Lease; keep renewing it in a daemon thread."""
    me = identity()
    config = electionconfig.Config(  # type: ignore[no-untyped-call]
        LeaseLock(name, namespace, me),  # type: ignore[no-untyped-call]
        lease_duration=LEASE_DURATION,
        renew_deadline=RENEW_DEADLINE,
        retry_period=RETRY_PERIOD,
        onstarted_leading=lambda: None,
        onstopped_leading=_lost,
    )
    election = leaderelection.LeaderElection(config)  # type: ignore[no-untyped-call]
    metrics.LEADER.set(0)
    log.info(f"standby as {me}: waiting for Lease {namespace}/{name}")
    health = _standby_health(liveness_endpoint)
    try:
        election.acquire()  # type: ignore[no-untyped-call]
    finally:
        if health is not None:
            health.shutdown()
            health.server_close()
    log.info(f"acting as {me}: holding Lease {namespace}/{name}")
    metrics.LEADER.set(1)

    def renew() -> None:
        election.renew_loop()  # type: ignore[no-untyped-call]
        _lost()

    threading.Thread(target=renew, name="lease-renew", daemon=True).start()
