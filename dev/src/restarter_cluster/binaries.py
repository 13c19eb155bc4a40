"""Where the control-plane binaries are: a user's own directory, or the project's build cache."""

from __future__ import annotations

import os
from pathlib import Path

#: Every binary the local cluster and the tests run.
REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "kwok",
    "helm",
)

REPO_ROOT = Path(__file__).resolve().parents[3]  # dev/src/restarter_cluster/binaries.py
VERSIONS_FILE = REPO_ROOT / "hack" / "versions.env"
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-cluster-binaries.sh"


class MissingBinaries(RuntimeError):
    """Raised when a binary is in none of the searched directories."""


def pinned_versions() -> dict[str, str]:
    """The versions pinned in hack/versions.env."""
    versions: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key] = value
    return versions


def cache_root() -> Path:
    """$RESTARTER_CACHE, or ~/.cache/restarter: where hack/build-cluster-binaries.sh builds."""
    return Path(os.environ.get("RESTARTER_CACHE", Path.home() / ".cache" / "restarter"))


def cache_dir() -> Path:
    """The directory hack/build-cluster-binaries.sh writes the control plane to."""
    return cache_root() / f"k8s-{pinned_versions()['KUBERNETES_VERSION']}" / "bin"


def component(name: str, version_key: str) -> Path:
    """A binary built into ``<cache>/<name>-<version>/bin`` (the registry, promtool: see
    hack/build-cluster-binaries.sh), or MissingBinaries naming the script that builds it."""
    path = cache_root() / f"{name}-{pinned_versions()[version_key]}" / "bin" / name
    if not path.is_file():
        raise MissingBinaries(f"missing {path}; build it once with {BUILD_SCRIPT}")
    return path


def search_path() -> list[Path]:
    """Directories searched in order: $RESTARTER_K8S_BIN, $KUBEBUILDER_ASSETS, the cache."""
    dirs = [os.environ.get("RESTARTER_K8S_BIN"), os.environ.get("KUBEBUILDER_ASSETS")]
    return [Path(d) for d in dirs if d] + [cache_dir()]


def locate() -> dict[str, Path]:
    """Map every required binary name to an executable path, or raise MissingBinaries."""
    found: dict[str, Path] = {}
    for name in REQUIRED:
        for directory in search_path():
            candidate = directory / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found[name] = candidate
                break
    missing = [name for name in REQUIRED if name not in found]
    if missing:
        raise MissingBinaries(
            f"missing {', '.join(missing)} in {', '.join(map(str, search_path()))}; "
            f"build them once with {BUILD_SCRIPT}"
        )
    return found
