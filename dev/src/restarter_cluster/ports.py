"""Listening ports for the local components, chosen below the kernel's ephemeral range.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range
every outgoing connection on the machine takes its local port from. Between choosing such a
port and the component binding it, a client connection (another test worker's kubectl, a
kube-controller-manager's watch) can take it, and the component exits with "address already
in use". Ports below that range are never given to outgoing connections.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Lowest port handed out: above the well-known ports and the usual fixed service ports.
LOWEST = 20000
#: The Linux default start of the ephemeral range, used where /proc does not say.
EPHEMERAL_START = 32768
#: Ports handed out by this process, never handed out twice.
_given: set[int] = set()


def ephemeral_start(range_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_START


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, below the ephemeral range, not yet
    handed out by this process. Another process may still take it before it is bound:
    callers that start components retry on "address already in use"."""
    highest = max(ephemeral_start() - 1, LOWEST + 1000)
    for _ in range(1000):
        port = random.randint(LOWEST, highest)
        if port not in _given and bindable(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free port in {LOWEST}-{highest}")
