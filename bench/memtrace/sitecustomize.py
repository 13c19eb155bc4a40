"""Imported at start-up by an operator run with ``bench/memtrace`` on PYTHONPATH.

With ``BENCH_TRACEMALLOC=<file>`` set, traces Python allocations and, on SIGUSR1, writes
the biggest live ones (by call stack and by file) to that file. Slow: profiling only.
"""

from __future__ import annotations

import os
import signal
import tracemalloc
from types import FrameType

OUTPUT = os.environ.get("BENCH_TRACEMALLOC")


def _dump(signum: int, frame: FrameType | None) -> None:
    assert OUTPUT is not None
    snapshot = tracemalloc.take_snapshot()
    with open(OUTPUT, "w") as out:
        total = sum(stat.size for stat in snapshot.statistics("filename"))
        out.write(f"traced live: {total / 2**20:.1f} MiB\n\n## by file\n")
        for stat in snapshot.statistics("filename")[:30]:
            out.write(f"{stat.size / 1024:9.0f} KiB {stat.count:8d} blocks  {stat.traceback}\n")
        out.write("\n## by call stack\n")
        for stat in snapshot.statistics("traceback")[:25]:
            out.write(f"\n{stat.size / 1024:.0f} KiB in {stat.count} blocks\n")
            for line in stat.traceback.format()[-16:]:
                out.write(line + "\n")
        out.write("\n## end\n")


if OUTPUT:
    tracemalloc.start(16)
    signal.signal(signal.SIGUSR1, _dump)
