"""The real node's only way out of its network namespace: TCP listeners inside the
namespace, each forwarding to the apiserver on the host's loopback.

``python -m restarter_cluster.netns_proxy --netns /run/netns/N --to 127.0.0.1:6443
--listen 127.0.0.1:6443 --listen 10.0.0.1:443`` opens each listener inside N (by
setns on the one thread that creates them, then back), and connects out from the host's
namespace. Bytes pass through untouched: TLS stays end to end, between the apiserver and
the kubelet or pod.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@contextmanager
def inside(netns_path: str) -> Iterator[None]:
    """Run the block with this thread in the network namespace at ``netns_path``."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(netns_path, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def listen_inside(netns_path: str, addresses: list[tuple[str, int]]) -> list[socket.socket]:
    """Listening sockets bound inside the namespace; they stay there after setns back."""
    sockets = []
    with inside(netns_path):
        for host, port in addresses:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(128)
            listener.setblocking(False)
            sockets.append(listener)
    return sockets


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(listeners: list[socket.socket], target: tuple[str, int]) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    servers = [await asyncio.start_server(forward, sock=listener) for listener in listeners]
    print("listening", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netns_proxy", description=__doc__)
    parser.add_argument("--netns", required=True, help="path of the network namespace")
    parser.add_argument("--to", required=True, type=_address, help="host:port to forward to")
    parser.add_argument(
        "--listen", required=True, action="append", type=_address, help="host:port inside"
    )
    args = parser.parse_args(argv)
    listeners = listen_inside(args.netns, args.listen)
    asyncio.run(serve(listeners, args.to))
    return 0


if __name__ == "__main__":
    sys.exit(main())
