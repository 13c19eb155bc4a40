"""Connecting to the API server: a client from in-cluster credentials or a kubeconfig,
with restarter's connection pool, socket options and no hidden retries; and closing the
idle connections a request without an answer left suspect."""

from __future__ import annotations

import contextlib
import queue
import socket
import weakref

import kubernetes
import urllib3

#: The client every verb's module takes: the kubernetes package's, configured here.
Client = kubernetes.client.ApiClient

#: Seconds to open a connection (TCP and TLS): milliseconds to a live apiserver.
CONNECT_TIMEOUT = 5.0
#: TCP keepalive and user timeout on every connection to the apiserver (watches included).
#: An idle connection is probed after KEEPALIVE_IDLE seconds: well inside the idle cut-offs
#: on the way (kube-apiserver's 90 s, cloud load balancers' 4 to 6 min, NAT tables), so none
#: of them drops it for idleness. A peer that stopped answering is given up after
#: KEEPALIVE_INTERVAL * KEEPALIVE_PROBES more seconds (30 s in all): a watch on a dead
#: connection fails and is opened again instead of waiting out its read timeout (minutes).
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES = 15, 5, 3
#: Bytes sent and not acknowledged for this long (a dead route while a request goes out)
#: fail the connection; with keepalive on, Linux also ends the probing by it. A busy
#: apiserver still acknowledges what it receives, so a merely queued request never trips it.
USER_TIMEOUT_MS = 30_000
#: HTTP connections kept open: one per kopf worker thread (main.py, max_workers) and the
#: stamping pool, so parallel requests reuse connections instead of new TLS handshakes.
POOL_SIZE = 24


def load_client(kubeconfig: str | None = None, context: str | None = None) -> Client:
    """In-cluster credentials when running in a pod, else the user's kubeconfig. A kubeconfig
    or context asked for (a command's ``--kubeconfig``, ``--context``) is used even in a pod,
    and one that cannot be read raises KubeconfigError."""
    if kubeconfig is not None or context is not None:
        try:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context
            )
        except (kubernetes.config.ConfigException, OSError, ValueError) as error:
            raise KubeconfigError(str(error)) from None
        return client_for(kubernetes.client.Configuration.get_default_copy())
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    return client_for(kubernetes.client.Configuration.get_default_copy())


class KubeconfigError(RuntimeError):
    """The kubeconfig cannot be read; the message names it."""


def client_from_kubeconfig(path: str | None, context: str | None = None) -> tuple[Client, str]:
    """A client of the kubeconfig's ``context``, else its current one (``path``, else
    ``KUBECONFIG`` or ``~/.kube/config``), and that context's namespace (``default`` when it
    names none)."""
    try:
        contexts, current = kubernetes.config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path
        )
        if context is not None:
            current = next((entry for entry in contexts if entry.get("name") == context), None)
            if current is None:
                raise KubeconfigError(f"it has no context {context!r}")
        client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, persist_config=False
        )
    except (kubernetes.config.ConfigException, OSError, ValueError) as error:
        raise KubeconfigError(str(error)) from None
    namespace = ((current or {}).get("context") or {}).get("namespace") or "default"
    return client, namespace


def client_for(configuration: kubernetes.client.Configuration) -> Client:
    """A client of ``configuration``'s apiserver with restarter's pool, sockets and retries."""
    configuration.connection_pool_maxsize = POOL_SIZE
    configuration.socket_options = socket_options()
    # urllib3's own retries (3 by default) would try an idempotent GET again on the next
    # pooled connection, dead as well, silently and before ``retrying`` could close them:
    # every retry is ``retrying``'s, logged and on a fresh connection.
    configuration.retries = False
    client = Client(configuration)
    _POOLS.add(client.rest_client.pool_manager)
    return client


def socket_options() -> list[tuple[int, int, int]]:
    """urllib3's defaults (no Nagle) plus keepalive and the user timeout, where defined."""
    options = list(urllib3.connection.HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
    ):
        if hasattr(socket, name):  # Linux has all four; a developer's macOS may not
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


#: The connection pools of the clients ``client_for`` made.
_POOLS: weakref.WeakSet[urllib3.PoolManager] = weakref.WeakSet()


def close_idle_connections() -> None:
    """Close every connection waiting in the pools; the next requests open new ones.

    Called when a request got no answer: the connections idle beside it went through the
    same event (a forwarder or load balancer that lost them, an apiserver gone) and a
    retry that took the next one would wait out its timeout again. A new connection costs
    one TLS handshake; connections in use (watches, requests in flight) are left alone.
    """
    for manager in list(_POOLS):
        for key in list(manager.pools.keys()):
            pool = manager.pools.get(key)
            idle = getattr(pool, "pool", None)  # its LIFO queue of connections (None: closed)
            if idle is None:
                continue
            taken = []
            with contextlib.suppress(queue.Empty):
                while True:
                    taken.append(idle.get(block=False))
            for connection in taken:
                if connection is not None:
                    connection.close()
                # An empty slot: the pool opens a connection when it hands it out.
                with contextlib.suppress(queue.Full):
                    idle.put(None, block=False)
