"""The local control plane's listening ports stay out of the range outgoing connections use."""

from __future__ import annotations

import socket
from pathlib import Path

from restarter_cluster import ports


def test_ports_are_below_the_ephemeral_range_and_never_given_twice() -> None:
    start = ports.ephemeral_start()
    given = [ports.free_port() for _ in range(200)]
    assert all(ports.LOWEST <= port < start for port in given)
    assert len(set(given)) == len(given)


def test_a_port_something_listens_on_is_not_bindable() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports.free_port()))
        listener.listen()
        assert not ports.bindable(listener.getsockname()[1])


def test_the_ephemeral_start_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("40000\t60999\n")
    assert ports.ephemeral_start(range_file) == 40000
    assert ports.ephemeral_start(tmp_path / "missing") == ports.EPHEMERAL_START
