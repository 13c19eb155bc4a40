"""hack/release.sh refuses, before building or pushing anything, a version without an entry
in CHANGELOG.md or whose chart, image and package versions differ; hack/changelog.sh prints
a version's entry (the release's notes)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = """# Changelog

## [Unreleased]

## [{version}] - 2026-12-07

### Added

- Restarts in windows.
"""


def release_tree(tmp_path: Path, changelog: str, *, package_version: str = "0.1.0") -> Path:
    """A copy of what release.sh reads, with a hack/build-image.sh that only records that it
    ran: the first step after the checks."""
    (tmp_path / "hack").mkdir()
    for script in ("release.sh", "changelog.sh"):
        shutil.copy2(ROOT / "hack" / script, tmp_path / "hack" / script)
    (tmp_path / "charts" / "restarter").mkdir(parents=True)
    (tmp_path / "charts" / "restarter" / "Chart.yaml").write_text(
        'apiVersion: v2\nname: restarter\nversion: 0.1.0\nappVersion: "0.1.0"\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "restarter"\nversion = "{package_version}"\n'
    )
    (tmp_path / "CHANGELOG.md").write_text(changelog)
    build = tmp_path / "hack" / "build-image.sh"
    build.write_text(f'#!/bin/sh\ntouch "{tmp_path}/built"\nexit 3\n')
    build.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("skopeo", "helm"):  # present, so that only the checks can stop the script
        fake = bin_dir / tool
        fake.write_text(f'#!/bin/sh\ntouch "{tmp_path}/{tool}-ran"\n')
        fake.chmod(0o755)
    return tmp_path


def release(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tree / "hack" / "release.sh"), "127.0.0.1:5000"],
        capture_output=True,
        text=True,
        env={"PATH": f"{tree / 'bin'}:/usr/bin:/bin", "HOME": str(tree)},
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "changelog",
    [
        ENTRY.format(version="0.0.9"),
        ENTRY.format(version="0.1.0-rc1"),
        "# Changelog\n\n## [Unreleased]\n\n- Restarts in windows.\n\n## [0.1.0] - 2026-12-07\n",
    ],
    ids=["another-version", "a-prerelease-only", "an-empty-entry"],
)
def test_release_refuses_a_version_without_its_changelog_entry(
    tmp_path: Path, changelog: str
) -> None:
    tree = release_tree(tmp_path, changelog)
    done = release(tree)
    assert done.returncode == 1
    assert "refusing to release 0.1.0 without its entry in CHANGELOG.md" in done.stderr
    assert not (tree / "built").exists()
    assert not list(tree.glob("*-ran"))


def test_release_with_the_entry_goes_on_to_build_the_image(tmp_path: Path) -> None:
    tree = release_tree(tmp_path, ENTRY.format(version="0.1.0"))
    done = release(tree)
    assert (tree / "built").exists(), done.stderr
    assert done.returncode == 3  # the stand-in build's own failure, after the checks


def test_release_refuses_versions_that_differ(tmp_path: Path) -> None:
    tree = release_tree(tmp_path, ENTRY.format(version="0.1.0"), package_version="0.2.0")
    done = release(tree)
    assert done.returncode == 1
    assert "versions differ" in done.stderr
    assert not (tree / "built").exists()


def test_changelog_prints_the_entry_of_its_version_only(tmp_path: Path) -> None:
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text(ENTRY.format(version="0.2.0") + "\n## [0.1.0] - 2026-12-01\n\n- Old.\n")
    done = subprocess.run(
        [str(ROOT / "hack" / "changelog.sh"), "0.2.0", str(changelog)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "### Added\n\n- Restarts in windows.\n"


def test_the_repository_changelog_has_an_entry_for_the_charts_version() -> None:
    chart = (ROOT / "charts" / "restarter" / "Chart.yaml").read_text()
    version = next(
        line.split(":", 1)[1].strip() for line in chart.splitlines() if line.startswith("version:")
    )
    done = subprocess.run(
        [str(ROOT / "hack" / "changelog.sh"), version],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
