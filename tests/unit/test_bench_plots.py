"""The benchmarks page's plot is drawn from the benchmark's results by bench/plots.py: the
committed SVG is what the committed results give, and bench/run draws it with its report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench import plots, report

DOCS = Path(__file__).resolve().parents[2] / "docs"


def results(*runs: tuple[str, int, float | None]) -> dict[str, Any]:
    return {
        "reloader": {"version": "1.4.21"},
        "runs": [
            {"operator": tool, "deployments": n, "usage_ready": {"rss_mb": rss} if rss else {}}
            for tool, n, rss in runs
        ],
    }


def test_the_committed_plot_is_what_the_committed_results_draw() -> None:
    committed = json.loads((DOCS / "benchmarks.json").read_text())
    assert (DOCS / plots.MEMORY_PLOT).read_text() == plots.memory_plot(committed), (
        "docs/benchmarks-memory.svg is stale: bench/run report draws it again"
    )


def test_each_tool_gets_the_median_of_its_runs_at_each_size() -> None:
    series = plots.memory_at_ready(
        results(
            ("restarter", 1000, 120.0),
            ("restarter", 1000, 130.0),
            ("restarter", 100, 110.0),
            ("naive", 100, 300.0),  # not one of the compared tools
            ("reloader", 100, 150.0),
            ("reloader", 1000, None),  # a run that never got ready
        )
    )
    assert [(s.label, s.points) for s in series] == [
        ("restarter", [(100, 110.0), (1000, 125.0)]),
        ("Reloader 1.4.21", [(100, 150.0)]),
    ]


def test_the_svg_has_one_line_per_tool_and_a_point_per_size() -> None:
    svg = plots.memory_plot(
        results(("restarter", 100, 100.0), ("restarter", 10000, 120.0), ("reloader", 100, 150.0))
    )
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
    assert len(re.findall("<polyline ", svg)) == 2
    assert len(re.findall("<circle ", svg)) == 3
    assert "restarter: 120 at N = 10,000" in svg


def test_the_report_draws_the_plot_beside_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "plot", lambda *_: None)  # the PNG needs matplotlib
    monkeypatch.setattr(report, "markdown", lambda *_: "table")
    report.write(results(("restarter", 100, 100.0), ("reloader", 100, 150.0)), tmp_path)
    assert (tmp_path / plots.MEMORY_PLOT).read_text().startswith("<svg ")
    assert "table" in (tmp_path / "benchmarks-history.md").read_text()
