"""An operator under test as a subprocess, with its memory and CPU read from /proc."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from restarter_cluster.cluster import Cluster

REPO = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: kopf logs this once it has logged in: the operator is running (not yet ready).
KOPF_STARTED = "Initial authentication has finished"


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float
    """User plus system CPU time since the process started."""
    rss_mb: float
    peak_rss_mb: float
    """VmHWM: the resident set's high-water mark."""


class OperatorProcess:
    """An operator's command line (``python -m <module> ...`` or a binary) run with the
    cluster's admin kubeconfig; it counts as started once ``started_line`` is in its log."""

    def __init__(
        self,
        cluster: Cluster,
        command: list[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        started_line: str = KOPF_STARTED,
        python: bool = True,
    ) -> None:
        self.cluster, self.command, self.log_path = cluster, command, log_path
        self.env = env or {}
        self.started_line = started_line
        self.python = python
        """A Python process: py-spy and bench/memtrace apply to it."""
        self.process: subprocess.Popen[bytes] | None = None
        self.profiler: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    @classmethod
    def module(
        cls,
        cluster: Cluster,
        module: str,
        args: list[str],
        log_path: Path,
        env: dict[str, str] | None = None,
    ) -> OperatorProcess:
        """``python -m <module> *args`` (a kopf operator)."""
        return cls(cluster, [sys.executable, "-m", module, *args], log_path, env)

    @property
    def name(self) -> str:
        return self.command[2] if self.python else Path(self.command[0]).name

    def start(self, timeout: float = 60) -> OperatorProcess:
        environment = {**os.environ, **self.cluster.env(), **self.env}
        self.started_at = time.time()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=REPO,
            )
        deadline = time.monotonic() + timeout
        while self.started_line not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start:\n{self.log()[-3000:]}")
            time.sleep(0.1)
        return self

    def profile(self, output: Path) -> None:
        """Sample the running operator with py-spy: all threads, each sample the one that
        holds the GIL (``--gil``), so the samples are where its Python CPU goes and not a
        thread blocked in a socket read with the GIL released."""
        if not self.python:
            return
        py_spy = Path(sys.executable).parent / "py-spy"
        self.profiler = subprocess.Popen(
            [
                str(py_spy),
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                "50",
                "--nonblocking",
                "--gil",
                "--format",
                "speedscope",
                "--output",
                str(output),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def usage(self) -> Usage:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited:\n{self.log()[-3000:]}")
        status = Path(f"/proc/{self.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        # Fields after the command name (which may hold spaces) start at field 3.
        after = stat[stat.rindex(")") + 2 :].split()
        utime, stime = int(after[11]), int(after[12])
        return Usage(
            cpu_seconds=(utime + stime) / CLOCK_TICKS,
            rss_mb=int(fields["VmRSS"].split()[0]) / 1024,
            peak_rss_mb=int(fields["VmHWM"].split()[0]) / 1024,
        )

    def dump_allocations(self, phase: str) -> float:
        """Ask bench/memtrace (when loaded) to write the live allocations, kept as
        ``<stem>.<phase>.allocations.txt``; return the traced live MiB (NaN if none)."""
        output = self.env.get("BENCH_TRACEMALLOC")
        if not self.python or not output:
            return math.nan
        written = Path(output)
        written.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 600
        while not written.exists() or not written.read_text().endswith("\n## end\n"):
            if time.monotonic() > deadline:
                return math.nan
            time.sleep(0.5)
        text = written.read_text()
        kept = written.name.replace(".allocations", f".{phase}.allocations")
        written.rename(written.with_name(kept))
        return float(text.split()[2])

    def stop(self) -> None:
        if self.profiler is not None:
            self.profiler.send_signal(signal.SIGINT)
            self.profiler.wait(60)
            self.profiler = None
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class RssSampler:
    """The operator's resident set every ``interval`` seconds, read from /proc by the
    harness (the same for a Python operator and a Go binary): when in a run the peak
    came, and the most within each phase."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float]] = []
        """(epoch seconds, RSS in MB)."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while not self._stopping.is_set():
            try:
                text = status.read_text()
            except OSError:
                return  # the process is gone
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.samples.append((time.time(), int(line.split()[1]) / 1024))
            self._stopping.wait(self.interval)

    def stop(self, output: Path | None = None) -> None:
        self._stopping.set()
        self._thread.join(5)
        if output is not None:
            lines = [f"{at:.2f}\t{rss:.1f}" for at, rss in self.samples]
            output.write_text("epoch\trss_mb\n" + "\n".join(lines) + "\n")

    def peak(self, start: float = 0.0, end: float = math.inf) -> tuple[float, float]:
        """(epoch, MB) of the highest sample in ``[start, end)``; NaNs when none."""
        inside = [(rss, at) for at, rss in self.samples if start <= at < end]
        if not inside:
            return math.nan, math.nan
        rss, at = max(inside)
        return at, rss
