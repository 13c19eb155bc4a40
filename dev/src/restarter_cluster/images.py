"""The images the real node runs: built by hack/build-image.sh into OCI archives in the cache."""

from __future__ import annotations

from pathlib import Path

import yaml

from restarter_cluster import binaries

#: The registry host of every image imported on the real node: none serves it, the names
#: are only fully qualified (containerd would otherwise look for ``docker.io/library/...``).
IMPORTED_HOST = "localhost"
#: restarter's image as the real node knows it; its tag is the chart's appVersion.
RESTARTER_REPOSITORY = f"{IMPORTED_HOST}/restarter"
#: The sandbox ("pause") image: busybox-static sleeping.
PAUSE = f"{IMPORTED_HOST}/restarter-pause:1"
#: A shell and a few tools from busybox-static, for the applications the tests run.
APP = f"{IMPORTED_HOST}/restarter-app:1"
BUILD_SCRIPT = binaries.REPO_ROOT / "hack" / "build-image.sh"
CHART = binaries.REPO_ROOT / "charts" / "restarter" / "Chart.yaml"


def app_version() -> str:
    """The chart's appVersion, which is restarter's image tag."""
    return str(yaml.safe_load(CHART.read_text())["appVersion"])


def restarter_image() -> str:
    return f"{RESTARTER_REPOSITORY}:{app_version()}"


#: Written by hack/build-image.sh: the path of the archive built from this checkout.
BUILT = binaries.REPO_ROOT / ".image-archive"


def archives() -> list[Path]:
    """The three OCI archives (restarter's: the one built from this checkout's sources), or
    MissingBinaries naming the script that builds them."""
    directory = binaries.cache_root() / "images"
    built = BUILT.read_text().strip() if BUILT.is_file() else ""
    paths = [
        Path(built) if built else BUILT,
        directory / "restarter-pause-1.oci.tar",
        directory / "restarter-app-1.oci.tar",
    ]
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise binaries.MissingBinaries(
            f"missing {', '.join(map(str, missing))}; build them once with {BUILD_SCRIPT}"
        )
    return paths
