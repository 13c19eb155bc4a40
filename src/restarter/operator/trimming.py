"""Giving freed memory back to the system after bursts (glibc only).

A fan-out parses thousands of workload bodies in a few seconds, in many threads. Python
frees them, but glibc keeps the pages in its heaps, pinned by a few long-lived objects
allocated in between (the marks seen, the admission table's entries), so RSS stays at the
burst's peak. ``malloc_trim(0)`` hands every free page inside the heaps back (madvise).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Seconds between two trims.
TRIM_INTERVAL = 5.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        function = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if function is not None:
        function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
    return function


class Trimmer:
    """A daemon thread that calls ``malloc_trim(0)`` every ``TRIM_INTERVAL`` seconds."""

    def __init__(self) -> None:
        self.trim = _malloc_trim()
        self.stopping = threading.Event()

    def start(self) -> Trimmer:
        if self.trim is None:
            log.info("no malloc_trim in this C library: freed memory is not handed back")
            return self
        threading.Thread(target=self._run, name="malloc-trim", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        assert self.trim is not None
        while not self.stopping.wait(TRIM_INTERVAL):
            self.trim(0)
