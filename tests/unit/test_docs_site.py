"""The documentation site builds with ``mkdocs build --strict``: a broken link or anchor, or
a page left out of the navigation, fails here; and every alert the chart's PrometheusRule
can fire has its runbook."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "search" / "search_index.json").exists()
    assert (tmp_path / "site" / "runbooks" / "index.html").exists()


def _pages(nav: list[object]) -> list[str]:
    found: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found.extend(_pages(value) if isinstance(value, list) else [str(value)])
    return found


def test_every_page_of_docs_is_in_the_navigation() -> None:
    # yaml.Loader: mkdocs.yml names a Python function (the slugify of its anchors).
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.Loader)
    pages = set(_pages(config["nav"]))
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert written == pages


def test_every_alert_has_its_runbook() -> None:
    rule = (ROOT / "charts" / "restarter" / "templates" / "prometheusrule.yaml").read_text()
    alerts = re.findall(r"^\s*- alert: (\w+)$", rule, re.MULTILINE)
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    sections = re.findall(r"^## (\w+)$", runbooks, re.MULTILINE)
    assert alerts
    assert sections == alerts
