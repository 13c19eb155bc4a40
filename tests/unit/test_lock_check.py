"""``hack/lock.sh --check`` (hack/test.sh's first step): the lock and its exports must follow
pyproject.toml, and the check says so offline, on a copy of the repository's files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """pyproject.toml (restarter's and the dev tools'), uv.lock, requirements/ and
    hack/lock.sh, with the dev venv's tools."""
    (tmp_path / "hack").mkdir()
    shutil.copy(REPO / "hack" / "lock.sh", tmp_path / "hack" / "lock.sh")
    (tmp_path / "dev").mkdir()
    shutil.copy(REPO / "dev" / "pyproject.toml", tmp_path / "dev" / "pyproject.toml")
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "requirements", tmp_path / "requirements")
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(root / "hack" / "lock.sh"), "--check"],
        capture_output=True,
        text=True,
        # Offline: nothing may be fetched to tell whether the lock is current.
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "UV_OFFLINE": "1"},
        timeout=120,
        check=False,
    )


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_repository_lock_is_current(copy: Path) -> None:
    result = check(copy)
    assert result.returncode == 0, result.stderr
    assert "uv.lock and requirements/ match pyproject.toml" in result.stdout


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # A new dependency.
        (
            '"pytz>=2024.1",',
            '"pytz>=2024.1",\n    "tomli-w>=1",',
            "uv.lock is out of date with pyproject.toml; run hack/lock.sh",
        ),
        # A range the locked version no longer fits.
        ('"croniter>=6.1,<8"', '"croniter>=6.1,<7"', "uv.lock is out of date"),
        # A build backend the build group does not lock.
        (
            'requires = ["setuptools>=69", "wheel"]',
            'requires = ["flit"]',
            "[build-system] requires ['flit'] but the build group locks",
        ),
    ],
)
def test_a_pyproject_change_makes_the_lock_stale(
    copy: Path, old: str, new: str, message: str
) -> None:
    edit(copy / "pyproject.toml", old, new)
    result = check(copy)
    assert result.returncode == 1
    assert message in result.stderr


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # A new dependency of the dev tools.
        (
            '"pyyaml>=6",',
            '"pyyaml>=6",\n    "tomli-w>=1",',
            "uv.lock is out of date with pyproject.toml; run hack/lock.sh",
        ),
        # A build backend the build group does not lock.
        (
            'requires = ["setuptools>=69", "wheel"]',
            'requires = ["flit"]',
            "dev/pyproject.toml's [build-system] requires ['flit'] but the build group locks",
        ),
    ],
)
def test_a_change_to_the_dev_tools_makes_the_lock_stale(
    copy: Path, old: str, new: str, message: str
) -> None:
    edit(copy / "dev" / "pyproject.toml", old, new)
    result = check(copy)
    assert result.returncode == 1
    assert message in result.stderr


def test_an_export_edited_by_hand_is_stale(copy: Path) -> None:
    runtime = copy / "requirements" / "runtime.txt"
    lines = runtime.read_text().splitlines(keepends=True)
    # Drop one hash of one package: pip would then refuse that file, the check refuses first.
    hashed = next(i for i, line in enumerate(lines) if "--hash=sha256:" in line)
    runtime.write_text("".join(lines[:hashed] + lines[hashed + 1 :]))
    result = check(copy)
    assert result.returncode == 1
    assert "requirements/runtime.txt is not uv.lock's export" in result.stderr
