"""The Secrets Store CSI Driver beside the local control plane: its CRDs
(SecretProviderClass and SecretProviderClassPodStatus), read from the pinned Go module
(``config/crd/bases``; nothing is copied into this repository), and where its node plugin
and fake provider are built (by hack/build-cluster-binaries.sh).
"""

from __future__ import annotations

from pathlib import Path

from restarter_cluster import binaries, controllers
from restarter_cluster.cluster import Cluster

MODULE = "sigs.k8s.io/secrets-store-csi-driver"
#: The Go module that pins the driver and builds its node plugin and fake provider.
TOOLS_MODULE = binaries.REPO_ROOT / "hack" / "tools" / "secrets-store-csi-driver"
DRIVER = "secrets-store-csi-driver"
FAKE_PROVIDER = "secrets-store-fake-provider"
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
