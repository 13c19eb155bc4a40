"""bench/peers.py points the user at places every checkout has: Reloader's repository at its
tag, cloned into $RELOADER_SRC, and the binary in restarter's cache ($RESTARTER_CACHE)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from bench import peers


def test_the_build_message_names_no_path_of_one_machine() -> None:
    message = peers.RELOADER_BUILD.format(binary="$RESTARTER_CACHE/peers/reloader")
    absolute = set(re.findall(r"(?<![\w$./:])/[\w.-]+(?:/[\w.-]+)*", message))
    # /tmp is only the default of $RELOADER_SRC; the binary's path is the argument.
    assert {path for path in absolute if not path.startswith("/tmp/")} == set()
    assert "$RELOADER_SRC" in message
    assert f"--branch v{peers.RELOADER_VERSION} https://github.com/stakater/Reloader" in message


def test_the_binary_is_looked_for_in_restarters_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RESTARTER_CACHE", str(tmp_path))
    try:
        reloaded = importlib.reload(peers)
        expected = tmp_path / "peers" / peers.RELOADER_VERSION / "reloader"
        assert expected == reloaded.RELOADER_BINARY
    finally:
        monkeypatch.undo()
        importlib.reload(peers)
