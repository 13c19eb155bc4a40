"""Imported at start-up by an operator run with ``bench/memtrace`` on PYTHONPATH.

- ``BENCH_TRACEMALLOC=<file>``: traces Python allocations and, on SIGUSR1, writes the
  biggest live ones (by call stack and by file) to that file, and the whole snapshot
  to ``<file>.snapshot`` (after a full collection). Slow: profiling only. With
  ``BENCH_TRACE_FROM_SIGNAL=1`` tracing starts at the first SIGUSR1 (its dump is empty).
- ``BENCH_CENSUS=<file>``: on SIGUSR2, every live object tracked by the collector,
  counted by type, written to that file (after a full collection). Cheap enough to run
  at full speed.
- ``BENCH_MEMRAY=<file>``: memray tracks every allocation (Python and native) and writes,
  when the process exits, the allocations live at its high-water mark (memray's
  aggregated format: ``memray flamegraph`` or ``memray tree`` of that file).
- ``BENCH_SAMPLE=<file>``: every 0.5 s, one line of RSS, Python's allocated blocks and
  threads, so the peak can be placed in time against the harness's phases (``%p`` in the
  name becomes the process id: one file per operator run).
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
import time
import tracemalloc
from types import FrameType

OUTPUT = os.environ.get("BENCH_TRACEMALLOC")
MEMRAY = os.environ.get("BENCH_MEMRAY")
SAMPLE = os.environ.get("BENCH_SAMPLE", "").replace("%p", str(os.getpid()))
SAMPLE_INTERVAL = 0.5
FRAMES = 16
CENSUS = os.environ.get("BENCH_CENSUS")
#: Trace only from the first SIGUSR1 on: what grows after that moment, without tracing
#: the imports and start-up (minutes under tracemalloc).
FROM_SIGNAL = bool(os.environ.get("BENCH_TRACE_FROM_SIGNAL"))


def _dump(signum: int, frame: FrameType | None) -> None:
    assert OUTPUT is not None
    if not tracemalloc.is_tracing():
        tracemalloc.start(FRAMES)  # BENCH_TRACE_FROM_SIGNAL: from the first dump on
    gc.collect()  # what is live, not what waits for the collector
    snapshot = tracemalloc.take_snapshot()
    snapshot.dump(OUTPUT + ".snapshot")  # whole, for Snapshot.compare_to between phases
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


def _census(signum: int, frame: FrameType | None) -> None:
    """Live objects by type (after a full collection), biggest counts first."""
    assert CENSUS is not None
    gc.collect()
    counts: dict[str, int] = {}
    for item in gc.get_objects():
        kind = type(item)
        name = f"{kind.__module__}.{kind.__qualname__}"
        counts[name] = counts.get(name, 0) + 1
    with open(CENSUS + ".tmp", "w") as out:
        out.write(f"allocated blocks {sys.getallocatedblocks()}\n")
        for name, count in sorted(counts.items(), key=lambda item: -item[1]):
            out.write(f"{count}\t{name}\n")
    os.replace(CENSUS + ".tmp", CENSUS)


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _sample(path: str) -> None:
    with open(path, "w", buffering=1) as out:
        out.write("epoch\trss_mb\tallocated_blocks\tthreads\n")
        while True:
            out.write(
                f"{time.time():.2f}\t{_rss_kib() / 1024:.1f}\t{sys.getallocatedblocks()}\t"
                f"{threading.active_count()}\n"
            )
            time.sleep(SAMPLE_INTERVAL)


if OUTPUT:
    if not FROM_SIGNAL:
        tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR1, _dump)

if CENSUS:
    signal.signal(signal.SIGUSR2, _census)

if MEMRAY:
    import memray

    _tracker = memray.Tracker(
        MEMRAY, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS, native_traces=False
    )
    _tracker.__enter__()
    atexit.register(lambda: _tracker.__exit__(None, None, None))

if SAMPLE:
    threading.Thread(target=_sample, args=(SAMPLE,), name="bench-sample", daemon=True).start()
