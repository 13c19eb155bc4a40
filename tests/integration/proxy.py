"""A TCP forwarder in front of the apiserver whose connections a test can cut."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableProxy:
    """127.0.0.1:<port> → the apiserver; ``cut()`` drops every connection and refuses new
    ones until ``restore()``, as a network partition or an apiserver restart would."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._refusing = False
        self.cuts = 0
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
                self._open.update((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

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
