"""The chart as Artifact Hub shows it: charts/restarter/README.md is what
hack/chart_readme.py prints from values.yaml's comments, and Chart.yaml's artifacthub.io
annotations agree with the changelog, the chart's version and the project's license."""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path

import pytest
import yaml
from hack import chart_readme

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "charts" / "restarter" / "README.md"
CHART = yaml.safe_load((ROOT / "charts" / "restarter" / "Chart.yaml").read_text())


def test_the_chart_readme_is_what_the_generator_prints() -> None:
    generated = chart_readme.readme()
    written = README.read_text() if README.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            written.splitlines(keepends=True),
            generated.splitlines(keepends=True),
            "charts/restarter/README.md",
            "generated",
            n=1,
        )
    )
    assert written == generated, (
        f"charts/restarter/README.md is stale; refresh it with:\n    {chart_readme.COMMAND}\n{diff}"
    )


def test_every_value_of_the_chart_has_its_row() -> None:
    rows = {value.name for value in chart_readme.documented_values()}
    for name in ("image.repository", "pacing.maxInFlight", "resources", "uninstallHook.timeout"):
        assert name in rows
    assert '| `resources` | object | `{"requests": ' in chart_readme.readme()


VALUES = """\
# A heading comment, not a description.
image:
  # -- Repository.
  # Example: registry.example.com/restarter
  repository: restarter
  tag: ""

# -- Resources, one row for the whole mapping.
resources:
  # a plain comment inside
  limits:
    memory: 768Mi
"""


def test_comments_are_read_by_the_paths_of_their_keys() -> None:
    assert chart_readme.described(VALUES) == {
        ("image", "repository"): "Repository. Example: registry.example.com/restarter",
        ("resources",): "Resources, one row for the whole mapping.",
    }


def test_a_value_without_its_comment_cannot_hide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "values.yaml").write_text(VALUES)
    monkeypatch.setattr(chart_readme, "CHART", tmp_path)
    with pytest.raises(ValueError, match=r"\['image.tag'\]"):
        chart_readme.documented_values()


def test_the_changes_annotation_is_the_changelog_entry_of_the_charts_version() -> None:
    annotation = CHART["annotations"]["artifacthub.io/changes"]
    assert yaml.safe_load(annotation) == yaml.safe_load(chart_readme.changes_annotation())
    kinds = {change["kind"] for change in yaml.safe_load(annotation)}
    assert kinds <= {"added", "changed", "deprecated", "removed", "fixed", "security"}


def test_changes_take_their_kind_from_the_changelog_heading() -> None:
    changelog = (
        "# Changelog\n\n## [Unreleased]\n\n- Not this.\n\n## [1.0.0] - 2026-12-07\n\n"
        "### Fixed\n\n- **A fix.** On two\n  lines.\n\n### Removed\n\n- A value.\n\n"
        "## [0.9.0] - 2026-11-01\n\n### Added\n\n- Older.\n"
    )
    assert chart_readme.changes("1.0.0", changelog) == [
        {"kind": "fixed", "description": "A fix. On two lines."},
        {"kind": "removed", "description": "A value."},
    ]
    with pytest.raises(ValueError, match=r"no entry for 2\.0\.0"):
        chart_readme.changes("2.0.0", changelog)


def test_the_image_license_and_links_annotations() -> None:
    annotations = CHART["annotations"]
    images = yaml.safe_load(annotations["artifacthub.io/images"])
    assert images == [{"name": "restarter", "image": f"restarter:{CHART['appVersion']}"}]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert annotations["artifacthub.io/license"] == pyproject["project"]["license"]
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert links and all(link["name"] and link["url"].startswith("https://") for link in links)
