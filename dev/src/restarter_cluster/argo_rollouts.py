"""Argo Rollouts beside the local control plane: its CRDs, read from the pinned Go module
(``manifests/crds``; nothing is copied into this repository), and its controller (built
by hack/build-cluster-binaries.sh) as one process per cluster, without leader election.
"""

from __future__ import annotations

from pathlib import Path

from restarter_cluster import binaries, controllers
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port

MODULE = "github.com/argoproj/argo-rollouts"
#: The Go module that pins Argo Rollouts and builds its controller.
TOOLS_MODULE = binaries.REPO_ROOT / "hack" / "tools" / "argo-rollouts"
COMPONENT = "rollouts-controller"
#: The Rollout CRD; the controller also needs the others of ``manifests/crds``.
ROLLOUT_CRD = "rollout-crd.yaml"


class ArgoRolloutsError(RuntimeError):
    """Argo Rollouts' module, CRDs or controller could not be had; the message says why."""


def version() -> str:
    return binaries.pinned_versions()["ARGO_ROLLOUTS_VERSION"]


def controller_binary() -> Path:
    return controllers.cached_binary(f"argo-rollouts-{version()}", COMPONENT)


def crd_files(only_rollout: bool = False) -> list[Path]:
    """The module's CRDs (the Rollout's alone with ``only_rollout``), in a stable order."""
    directory = controllers.module_dir(MODULE, TOOLS_MODULE, version(), ArgoRolloutsError)
    directory = directory / "manifests" / "crds"
    files = [directory / ROLLOUT_CRD] if only_rollout else sorted(directory.glob("*-crd.yaml"))
    if not files or not all(path.is_file() for path in files):
        raise ArgoRolloutsError(f"no CRDs in {directory}")
    return files


def install_crds(cluster: Cluster, only_rollout: bool = False, timeout: float = 60.0) -> list[str]:
    """Apply the CRDs and wait until each is Established; return their names."""
    return controllers.install_crds(cluster, crd_files(only_rollout), timeout)


class ArgoRollouts(controllers.Controller):
    """Argo Rollouts' controller for ``cluster``; its pid lives in the cluster directory."""

    COMPONENT = COMPONENT
    STATE_FILE = "argo-rollouts.json"
    #: Logged once the Rollout workers run.
    STARTED_LINE = "Started rollout workers"

    def start(self, timeout: float = 60.0) -> ArgoRollouts:
        """Install every CRD, start the controller and wait until its workers run."""
        binary = controller_binary()
        install_crds(self.cluster, timeout=timeout)
        command = [
            str(binary),
            f"--kubeconfig={self.cluster.kubeconfig}",
            "--leader-elect=false",
            # Its own ports, not the defaults: several clusters share this machine.
            f"--healthzPort={free_port()}",
            f"--metricsPort={free_port()}",
            "--loglevel=info",
        ]
        self.launch(command, version(), timeout, ArgoRolloutsError)
        return self
