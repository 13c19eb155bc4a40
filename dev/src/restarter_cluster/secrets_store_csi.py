"""The Secrets Store CSI Driver beside the local control plane: its CRDs
(SecretProviderClass and SecretProviderClassPodStatus) and its CSIDriver object, read from
the pinned Go module (``config/crd/bases``, ``deploy/csidriver.yaml``; nothing is copied
into this repository), and on the real node its node plugin, registered with the kubelet,
calling the driver's own fake provider (all built by hack/build-cluster-binaries.sh).

The plugin runs as host processes of the cluster (stopped with it), as kubelet and
containerd do: the driver mounts each volume as a tmpfs under the kubelet's root directory,
in the mount namespace the kubelet and containerd share.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from restarter_cluster import binaries, controllers
from restarter_cluster.cluster import Cluster

MODULE = "sigs.k8s.io/secrets-store-csi-driver"
#: The Go module that pins the driver and builds its node plugin and fake provider.
TOOLS_MODULE = binaries.REPO_ROOT / "hack" / "tools" / "secrets-store-csi-driver"
DRIVER = "secrets-store-csi-driver"
FAKE_PROVIDER = "secrets-store-fake-provider"
REGISTRAR = "secrets-store-registrar"
#: The CSI driver's name, and the provider name the fake provider serves.
DRIVER_NAME = "secrets-store.csi.k8s.io"
PROVIDER = "fake"
GROUP = "secrets-store.csi.x-k8s.io"
CRD_NAMES = (
    f"secretproviderclasses.{GROUP}",
    f"secretproviderclasspodstatuses.{GROUP}",
)


class SecretsStoreCsiError(RuntimeError):
    """The driver's module or CRDs could not be had; the message says why."""


def version() -> str:
    return binaries.pinned_versions()["SECRETS_STORE_CSI_DRIVER_VERSION"]


def binary(component: str) -> Path:
    """The driver (``DRIVER``) or its fake provider (``FAKE_PROVIDER``), as built."""
    return controllers.cached_binary(f"secrets-store-csi-driver-{version()}", component)


def crd_files() -> list[Path]:
    """The module's two CRDs, in a stable order."""
    directory = controllers.module_dir(MODULE, TOOLS_MODULE, version(), SecretsStoreCsiError)
    files = [
        directory / "config" / "crd" / "bases" / f"{GROUP}_{name.split('.')[0]}.yaml"
        for name in CRD_NAMES
    ]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise SecretsStoreCsiError(f"no CRD at {', '.join(missing)}")
    return files


def install_crds(cluster: Cluster, timeout: float = 60.0) -> list[str]:
    """Apply both CRDs and wait until each is Established; return their names."""
    return controllers.install_crds(cluster, crd_files(), timeout)


def uninstall_crds(cluster: Cluster, timeout: float = 60.0) -> None:
    """Delete both CRDs (and so every object of them) and wait until they are gone."""
    names = [f"customresourcedefinition.apiextensions.k8s.io/{name}" for name in CRD_NAMES]
    cluster.kubectl(
        "delete",
        "--ignore-not-found",
        "--wait",
        f"--timeout={int(timeout)}s",
        *names,
        timeout=timeout + 10,
    )


def install_csi_driver(cluster: Cluster) -> None:
    """The driver's CSIDriver object (inline ephemeral volumes, pod info on mount)."""
    directory = controllers.module_dir(MODULE, TOOLS_MODULE, version(), SecretsStoreCsiError)
    path = directory / "deploy" / "csidriver.yaml"
    cluster.kubectl("apply", "--server-side", "--field-manager=restarter-cluster", f"-f={path}")


@dataclass(frozen=True)
class NodePlugin:
    """The driver running as the real node's CSI plugin, and its fake provider."""

    cluster: Cluster
    contents: Path
    """The fake provider's objects and files (JSON), read again on ``rotate``."""

    def rotate(self, objects: dict[str, str], files: dict[str, str]) -> None:
        """The provider serves new versions (and file contents) from now on; the driver
        picks them up at its next rotation poll."""
        self.contents.write_text(json.dumps({"objects": objects, "files": files}))
        os.kill(self.cluster.pids[FAKE_PROVIDER], signal.SIGHUP)


def start_node_plugin(
    cluster: Cluster,
    kubelet_dir: Path,
    *,
    objects: dict[str, str],
    files: dict[str, str],
    rotation_poll: str = "5s",
    timeout: float = 60.0,
) -> NodePlugin:
    """Install the CRDs and the CSIDriver, start the fake provider (serving ``objects``
    and ``files``), the driver with rotation on, and the registrar; return once the
    kubelet lists the driver on its node's CSINode."""
    deadline = time.monotonic() + timeout
    install_crds(cluster, timeout)
    install_csi_driver(cluster)
    work = cluster.directory / "secrets-store-csi"
    providers, plugin = work / "providers", work / "plugin"
    providers.mkdir(parents=True, exist_ok=True)
    plugin.mkdir(parents=True, exist_ok=True)
    node_plugin = NodePlugin(cluster, work / "contents.json")
    node_plugin.contents.write_text(json.dumps({"objects": objects, "files": files}))
    socket = plugin / "csi.sock"
    cluster.start_component(
        FAKE_PROVIDER,
        [
            str(binary(FAKE_PROVIDER)),
            f"--socket={providers / PROVIDER}.sock",
            f"--contents={node_plugin.contents}",
        ],
    )
    cluster.start_component(
        DRIVER,
        [
            # Its rotation reconciler reads only KUBECONFIG (or the in-cluster config).
            "env",
            f"KUBECONFIG={cluster.kubeconfig}",
            str(binary(DRIVER)),
            f"--endpoint=unix://{socket}",
            "--nodeid=real-node",
            f"--provider-volume={providers}",
            f"--additional-provider-volume-paths={providers}",
            "--enable-secret-rotation",
            f"--rotation-poll-interval={rotation_poll}",
            # Its own port: several clusters share this machine.
            "--metrics-addr=127.0.0.1:0",
            f"--kubeconfig={cluster.kubeconfig}",
        ],
    )
    # The kubelet dials the driver as soon as the registrar answers: the socket first.
    cluster.poll(socket.exists, "the driver's CSI socket", deadline)
    cluster.start_component(
        REGISTRAR,
        [
            str(binary(REGISTRAR)),
            # Any name the kubelet finds there; a short one, as a unix socket's path is
            # limited to 107 bytes and the cluster's directory can be deep.
            f"--socket={kubelet_dir / 'plugins_registry' / 'sscsi-reg.sock'}",
            f"--driver={DRIVER_NAME}",
            f"--endpoint={socket}",
        ],
    )
    cluster.poll(
        lambda: _registered(cluster), "the driver's registration with the kubelet", deadline
    )
    return node_plugin


def _registered(cluster: Cluster) -> bool:
    listed = cluster.kubectl(
        "get", "csinode", "real-node", "-o=jsonpath={.spec.drivers[*].name}", check=False
    )
    return DRIVER_NAME in listed.stdout.split()
