"""A TCP forwarder in front of the apiserver whose connections a test can cut or stall."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableProxy:
    """127.0.0.1:<port> → the apiserver.

    ``cut()`` drops every connection and refuses new ones until ``restore()``, as a
    network partition or an apiserver restart would. ``stall()`` makes every connection
    open at that moment silently dead for what the client sends next, as a load balancer
    that forgot an idle connection leaves it: the client's socket stays open and takes its
    bytes, none reach the apiserver, nothing answers them, and no close ever comes (not
    even when the apiserver ends its side). A reply already on its way keeps flowing, so
    a watch that is streaming keeps streaming: a connection carrying traffic stays known
    to the balancer; the ones idle in a client's pool are the ones it forgets. New
    connections pass.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        #: Client sockets of the connections open at the last ``stall()``.
        self._stalled: set[socket.socket] = set()
        self._clients: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._refusing = False
        self.cuts = 0
        #: Connections accepted, and chunks a stalled connection swallowed.
        self.accepted = 0
        self.swallowed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self.accepted += 1
                self._open.update((client, upstream))
                self._clients.add(client)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, target, client), daemon=True
                ).start()

    def _pump(self, source: socket.socket, target: socket.socket, client: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                if source is client and self._is_stalled(client):
                    with self._lock:
                        self.swallowed += 1
                    continue
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            if source is client or not self._is_stalled(client):
                for sock in (source, target):
                    self._close(sock)
            else:
                # The apiserver ended a stalled connection: its client hears nothing.
                self._close(source)

    def _is_stalled(self, client: socket.socket) -> bool:
        with self._lock:
            return client in self._stalled

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
            self._clients.discard(sock)
            self._stalled.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def stall(self) -> int:
        """Make every connection open now silently dead; how many there were."""
        with self._lock:
            self._stalled |= self._clients
            return len(self._clients)

    def cut(self) -> None:
        with self._lock:
            self._refusing = True
            self.cuts += 1
            victims = list(self._open)
        for sock in victims:
            self._close(sock)

    def restore(self) -> None:
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self.cut()
        self._listener.close()
