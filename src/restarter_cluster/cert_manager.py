"""cert-manager beside the local control plane: its CRDs, read from the pinned Go module,
and its controller (built by hack/build-cluster-binaries.sh) as one process per cluster.

No webhook runs: self-signed and CA issuers need none, and the CRDs in the module's
``deploy/crds`` are plain manifests (no Helm templating, no conversion webhook).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from restarter_cluster import binaries
from restarter_cluster.cluster import Cluster, _terminate, process_alive

MODULE = "github.com/cert-manager/cert-manager"
#: The Go module that pins cert-manager and builds its controller.
TOOLS_MODULE = binaries.REPO_ROOT / "hack" / "tools" / "cert-manager"
COMPONENT = "cert-manager-controller"
STATE_FILE = "cert-manager.json"
#: Line the controller logs once every control loop is constructed and informers start.
STARTED_LINE = "starting controllers"


class CertManagerError(RuntimeError):
    """cert-manager's module, CRDs or controller could not be had; the message says why."""


def version() -> str:
    return binaries.pinned_versions()["CERT_MANAGER_VERSION"]


def controller_binary() -> Path:
    """The built controller, or MissingBinaries naming the script that builds it."""
    path = binaries.cache_root() / f"cert-manager-{version()}" / "bin" / COMPONENT
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise binaries.MissingBinaries(
            f"missing {path}; build it once with {binaries.BUILD_SCRIPT} (hack/setup.sh runs it)"
        )
    return path


def module_dir() -> Path:
    """The pinned cert-manager module's source in the Go module cache (downloaded if absent)."""
    try:
        result = subprocess.run(
            ["go", "mod", "download", "-json", MODULE],
            cwd=TOOLS_MODULE,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    except FileNotFoundError as error:
        raise CertManagerError("Go is needed to locate cert-manager's module") from error
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise CertManagerError(f"go mod download {MODULE}: {info.get('Error') or result.stderr}")
    if info.get("Version") != version():
        raise CertManagerError(
            f"{TOOLS_MODULE / 'go.mod'} pins {info.get('Version')}, "
            f"{binaries.VERSIONS_FILE} says {version()}"
        )
    return Path(info["Dir"])


def crd_files() -> list[Path]:
    """cert-manager's CustomResourceDefinitions, one file each, in a stable order."""
    files = sorted((module_dir() / "deploy" / "crds").glob("*.yaml"))
    if not files:
        raise CertManagerError(f"no CRDs in {module_dir() / 'deploy' / 'crds'}")
    return files


def install_crds(cluster: Cluster, timeout: float = 60.0) -> list[str]:
    """Apply every CRD and wait until each is Established; return their names."""
    names: list[str] = []
    for path in crd_files():
        # Server-side: the larger CRDs do not fit client-side apply's annotation.
        applied = cluster.kubectl(
            "apply", "--server-side", "--field-manager=restarter-cluster", "-o=name", f"-f={path}"
        )
        names.extend(applied.stdout.split())
    established = ["wait", "--for=condition=Established", f"--timeout={int(timeout)}s"]
    cluster.kubectl(*established, *names, timeout=timeout + 10)
    return names


@dataclass
class CertManager:
    """cert-manager's controller for ``cluster``; its pid lives in the cluster directory."""

    cluster: Cluster
    pid: int | None = None

    @property
    def state_path(self) -> Path:
        return self.cluster.directory / STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.cluster.log(COMPONENT)

    @classmethod
    def attach(cls, cluster: Cluster) -> CertManager | None:
        """The controller started earlier for this cluster, if it still runs."""
        if not (cluster.directory / STATE_FILE).exists():
            return None
        pid = json.loads((cluster.directory / STATE_FILE).read_text())["pid"]
        return cls(cluster, pid) if process_alive(pid) else None

    def start(self, timeout: float = 60.0) -> CertManager:
        """Install the CRDs, start the controller and wait until its loops start."""
        binary = controller_binary()
        install_crds(self.cluster, timeout)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                [
                    str(binary),
                    f"--kubeconfig={self.cluster.kubeconfig}",
                    "--cluster-resource-namespace=kube-system",
                    "--enable-certificate-owner-ref=false",
                    "--v=2",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.cluster.directory,
            )
        self.pid = process.pid
        self.state_path.write_text(json.dumps({"pid": self.pid, "version": version()}))
        deadline = time.monotonic() + timeout
        while STARTED_LINE not in self._log_since(offset):
            if not process_alive(self.pid) or time.monotonic() > deadline:
                tail = self._log_since(offset)[-3000:]
                self.stop()
                raise CertManagerError(f"{COMPONENT} did not start; see {self.log_path}:\n{tail}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        """Stop the controller (SIGTERM, then SIGKILL) and forget it."""
        if self.pid is not None:
            _terminate(self.pid)
            self.pid = None
        self.state_path.unlink(missing_ok=True)

    def _log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
