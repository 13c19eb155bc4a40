"""What ships: restarter's wheel and its image hold the operator, its CLI and their locked
dependencies, and none of the dev tools (``dev/``: the local control plane, the reference
page's generator) or the tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

import pytest

from restarter_cluster import images
from tests.conftest import REPO

#: The dev tools' packages and distribution; no path that ships may name them.
DEV_ONLY = ("restarter_cluster", "restarter_reference", "restarter_dev", "restarter-dev")
#: Top-level folders of the repository that never ship, in the wheel or in site-packages.
NOT_SHIPPED = ("tests/", "dev/", "src/", "bench/", "hack/")
#: Nor at the image's root (where ``dev/`` is the system's own).
NOT_AT_THE_ROOT = ("tests/", "src/", "bench/", "hack/", "charts/")
#: The product's modules, as its sources hold them.
MODULES = {
    path.relative_to(REPO / "src").as_posix() for path in (REPO / "src" / "restarter").rglob("*.py")
}
#: Where the image's virtualenv keeps its packages.
SITE_PACKAGES = re.compile(r"^opt/restarter/lib/python3\.\d+/site-packages/")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_runtime() -> set[str]:
    """The distributions requirements/runtime.txt pins (uv.lock's export, hack/lock.sh)."""
    text = (REPO / "requirements" / "runtime.txt").read_text()
    return {normalized(found) for found in re.findall(r"^([A-Za-z0-9][\w.-]*)==", text, re.M)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """restarter's wheel, built from what the Dockerfile copies, by the locked setuptools."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    offline = ["--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run(
        [*pip, "wheel", *offline, "--wheel-dir", str(out), str(source)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("restarter-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_holds_restarter_modules_only(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"restarter"}
    assert {name for name in names if name.endswith(".py")} == MODULES
    assert not [name for name in names if any(dev in name for dev in DEV_ONLY)]
    assert not [name for name in names if name.startswith(NOT_SHIPPED)]


def test_the_wheel_installs_the_operator_and_its_cli_only(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = (name for name in wheel.namelist() if name.endswith("entry_points.txt"))
    scripts = re.findall(r"^(\S+) = ", wheel.read(entry_points).decode(), re.M)
    assert set(scripts) == {"restarter", "kubectl-restarter"}


def layer_names(archive: Path) -> Iterator[str]:
    """Every path in every layer of an OCI archive (hack/build-image.sh's output)."""
    with tarfile.open(archive) as oci:

        def read(name: str) -> IO[bytes]:
            found = oci.extractfile(name)
            assert found is not None, f"{archive}: no {name}"
            return found

        def blob(digest: str) -> IO[bytes]:
            return read("blobs/" + digest.replace(":", "/", 1))

        (descriptor,) = json.load(read("index.json"))["manifests"]
        for layer in json.load(blob(descriptor["digest"]))["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as files:
                for member in files:
                    yield member.name.removeprefix("./")


@pytest.fixture(scope="module")
def image_files() -> list[str]:
    """The paths in restarter's image as hack/build-image.sh built it (hack/setup.sh does)."""
    archive = images.archives()[0]
    return list(layer_names(archive))


def test_the_image_holds_no_dev_tools_and_no_tests(image_files: list[str]) -> None:
    shipped = [name for name in image_files if name.startswith("opt/restarter/")]
    assert shipped, "no /opt/restarter in the image"
    assert not [name for name in shipped if any(dev in name for dev in DEV_ONLY)]
    packages = [SITE_PACKAGES.sub("", name) for name in shipped if SITE_PACKAGES.match(name)]
    assert not [name for name in packages if name.startswith(NOT_SHIPPED)]
    assert not [name for name in image_files if name.startswith(NOT_AT_THE_ROOT)]


def test_the_image_holds_the_operator_its_cli_and_the_locked_runtime(
    image_files: list[str],
) -> None:
    packages = [SITE_PACKAGES.sub("", name) for name in image_files if SITE_PACKAGES.match(name)]
    modules = {name for name in packages if name.startswith("restarter/") and name.endswith(".py")}
    assert modules == MODULES
    distributions = {
        normalized(top.removesuffix(".dist-info").rsplit("-", 1)[0])
        for top in {PurePosixPath(name).parts[0] for name in packages}
        if top.endswith(".dist-info")
    }
    assert distributions == locked_runtime() | {"restarter"}
    scripts = {
        PurePosixPath(name).name
        for name in image_files
        if PurePosixPath(name).parent == PurePosixPath("opt/restarter/bin")
    }
    assert "restarter" in scripts
    assert "restarter-cluster" not in scripts
