"""cert-manager beside the local control plane: its CRDs, read from the pinned Go module,
and its controller (built by hack/build-cluster-binaries.sh) as one process per cluster.

No webhook runs: self-signed and CA issuers need none, and the CRDs in the module's
``deploy/crds`` are plain manifests (no Helm templating, no conversion webhook).
"""

from __future__ import annotations

from pathlib import Path

from restarter_cluster import binaries, controllers
from restarter_cluster.cluster import Cluster

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
    return controllers.cached_binary(f"cert-manager-{version()}", COMPONENT)


def module_dir() -> Path:
    """The pinned cert-manager module's source in the Go module cache (downloaded if absent)."""
    return controllers.module_dir(MODULE, TOOLS_MODULE, version(), CertManagerError)


def crd_files() -> list[Path]:
    """cert-manager's CustomResourceDefinitions, one file each, in a stable order."""
    files = sorted((module_dir() / "deploy" / "crds").glob("*.yaml"))
    if not files:
        raise CertManagerError(f"no CRDs in {module_dir() / 'deploy' / 'crds'}")
    return files


def install_crds(cluster: Cluster, timeout: float = 60.0) -> list[str]:
    """Apply every CRD and wait until each is Established; return their names."""
    return controllers.install_crds(cluster, crd_files(), timeout)


class CertManager(controllers.Controller):
    """cert-manager's controller for ``cluster``; its pid lives in the cluster directory."""

    COMPONENT = COMPONENT
    STATE_FILE = STATE_FILE
    STARTED_LINE = STARTED_LINE

    def start(self, timeout: float = 60.0) -> CertManager:
        """Install the CRDs, start the controller and wait until its loops start."""
        binary = controller_binary()
        install_crds(self.cluster, timeout)
        command = [
            str(binary),
            f"--kubeconfig={self.cluster.kubeconfig}",
            "--cluster-resource-namespace=kube-system",
            "--enable-certificate-owner-ref=false",
            "--v=2",
        ]
        self.launch(command, version(), timeout, CertManagerError)
        return self
