"""A request on a pooled connection that died silently costs the first attempt's timeout
once: its retry goes out on a new connection, and the connections idle beside it are
closed. Real sockets: a local HTTP server behind the tests' forwarder, whose ``stall()``
leaves every open connection silently dead."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes
import pytest
import urllib3

from restarter.services.kube import connecting, requesting
from restarter.services.kube.api import Api
from tests.integration.proxy import CuttableProxy


class _ConfigMaps(BaseHTTPRequestHandler):
    """Answers every GET with a ConfigMap after a short pause, keeping the connection."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # http.server calls it by this name
        time.sleep(0.2)  # parallel requests overlap: each holds a connection of its own
        body = json.dumps({"kind": "ConfigMap", "metadata": {"name": "y"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def proxied() -> Iterator[tuple[CuttableProxy, Api]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ConfigMaps)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = CuttableProxy(server.server_address[1])
    configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{proxy.port}")
    yield proxy, Api(connecting.client_for(configuration))
    proxy.close()
    server.shutdown()


def test_a_stalled_pool_costs_one_timeout_and_the_retry_opens_a_new_connection(
    proxied: tuple[CuttableProxy, Api],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy, api = proxied
    monkeypatch.setattr(requesting, "FIRST_TIMEOUT", (5.0, 1.0))  # the test's seconds
    _read_in_parallel(api, 4)
    assert proxy.accepted == 4  # four connections wait in the pool
    assert proxy.stall() == 4
    with caplog.at_level(logging.WARNING, logger="restarter.services.kube.requesting"):
        assert api.read_source("configmap", "x", "y") == {
            "kind": "ConfigMap",
            "metadata": {"name": "y"},
        }
        # Requests in parallel take every pooled connection there is: none is dead.
        _read_in_parallel(api, 4)
    # One attempt went to a dead connection; every later request to a live one.
    [warning] = [record.getMessage() for record in caplog.records]
    assert warning.startswith("get: no answer (ReadTimeoutError"), warning
    assert proxy.swallowed == 1
    assert proxy.accepted == 4 + 1 + 3  # the retry's, then three more for the parallel four


def _read_in_parallel(api: Api, count: int) -> None:
    readers = [
        threading.Thread(target=api.read_source, args=("configmap", "x", "y")) for _ in range(count)
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()


def test_the_first_attempt_is_short_and_retries_wait_out_queueing() -> None:
    timeouts: list[requesting.Timeout] = []

    def call(timeout: requesting.Timeout) -> str:
        timeouts.append(timeout)
        if len(timeouts) < 3:
            raise urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out.")  # type: ignore[arg-type]
        return "answered"

    assert requesting.retrying_timed(call, "patch") == "answered"
    assert timeouts == [
        requesting.FIRST_TIMEOUT,
        requesting.REQUEST_TIMEOUT,
        requesting.REQUEST_TIMEOUT,
    ]
    # Under API Priority and Fairness a request may wait 15 s in a queue before a 429.
    assert requesting.FIRST_TIMEOUT[1] < 15 < requesting.REQUEST_TIMEOUT[1]


def test_connections_carry_keepalive_and_the_user_timeout(
    proxied: tuple[CuttableProxy, Api],
) -> None:
    _, api = proxied
    api.read_source("configmap", "x", "y")
    manager = api.client.rest_client.pool_manager
    [key] = list(manager.pools.keys())
    connection = manager.pools[key].pool.get(block=False)
    sock = connection.sock
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == connecting.KEEPALIVE_IDLE
    assert (
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == connecting.KEEPALIVE_INTERVAL
    )
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == connecting.KEEPALIVE_PROBES
    assert (
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == connecting.USER_TIMEOUT_MS
    )
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
