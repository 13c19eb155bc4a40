"""What the controllers run beside the local control plane share: their pinned Go module's
source in the module cache, and one process per cluster whose pid lives in the cluster
directory (cert-manager, Argo Rollouts)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from restarter_cluster import binaries
from restarter_cluster.cluster import Cluster, _terminate, process_alive


def cached_binary(build: str, component: str) -> Path:
    """A controller built into ``$RESTARTER_CACHE/<build>/bin``, or MissingBinaries naming
    the script that builds it."""
    path = binaries.cache_root() / build / "bin" / component
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise binaries.MissingBinaries(
            f"missing {path}; build it once with {binaries.BUILD_SCRIPT} (hack/setup.sh runs it)"
        )
    return path


def module_dir(module: str, tools_module: Path, version: str, error: type[Exception]) -> Path:
    """``module``'s source at the version ``tools_module`` pins, in the Go module cache
    (downloaded if absent); ``error`` when Go, the module or the pin disagree."""
    try:
        result = subprocess.run(
            ["go", "mod", "download", "-json", module],
            cwd=tools_module,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except FileNotFoundError as missing:
        raise error(f"Go is needed to locate {module}") from missing
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise error(f"go mod download {module}: {info.get('Error') or result.stderr}")
    if info.get("Version") != version:
        raise error(
            f"{tools_module / 'go.mod'} pins {info.get('Version')}, "
            f"hack/versions.env says {version}"
        )
    return Path(info["Dir"])


def install_crds(cluster: Cluster, files: list[Path], timeout: float = 60.0) -> list[str]:
    """Apply each CRD file and wait until every CRD is Established; return their names."""
    names: list[str] = []
    for path in files:
        # Server-side: the larger CRDs do not fit client-side apply's annotation.
        applied = cluster.kubectl(
            "apply", "--server-side", "--field-manager=restarter-cluster", "-o=name", f"-f={path}"
        )
        names.extend(applied.stdout.split())
    established = ["wait", "--for=condition=Established", f"--timeout={int(timeout)}s"]
    cluster.kubectl(*established, *names, timeout=timeout + 10)
    return names


@dataclass
class Controller:
    """A controller process for ``cluster``: started once, found again by ``attach``."""

    cluster: Cluster
    pid: int | None = None

    #: The log's and the binary's name.
    COMPONENT: ClassVar[str]
    #: Where the pid is kept, in the cluster directory.
    STATE_FILE: ClassVar[str]
    #: The log line that says the controller's loops run.
    STARTED_LINE: ClassVar[str]

    @property
    def state_path(self) -> Path:
        return self.cluster.directory / self.STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.cluster.log(self.COMPONENT)

    @classmethod
    def attach(cls, cluster: Cluster) -> Self | None:
        """The controller started earlier for this cluster, if it still runs."""
        state = cluster.directory / cls.STATE_FILE
        if not state.exists():
            return None
        pid = json.loads(state.read_text())["pid"]
        return cls(cluster, pid) if process_alive(pid) else None

    def launch(
        self, command: list[str], version: str, timeout: float, error: type[Exception]
    ) -> None:
        """Run ``command`` in its own session and wait for ``STARTED_LINE`` in its log."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.cluster.directory,
            )
        self.pid = process.pid
        self.state_path.write_text(json.dumps({"pid": self.pid, "version": version}))
        deadline = time.monotonic() + timeout
        while self.STARTED_LINE not in self.log_since(offset):
            if not process_alive(self.pid) or time.monotonic() > deadline:
                tail = self.log_since(offset)[-3000:]
                self.stop()
                raise error(f"{self.COMPONENT} did not start; see {self.log_path}:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the controller (SIGTERM, then SIGKILL) and forget it."""
        if self.pid is not None:
            _terminate(self.pid)
            self.pid = None
        self.state_path.unlink(missing_ok=True)

    def log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
