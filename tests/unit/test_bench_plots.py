"""The benchmarks page's plots are drawn from the benchmark's results by bench/plots.py: each
committed SVG is what its committed results give, and bench/run draws them with its report
(the window's only from runs that recorded their restarts over time)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench import __main__ as bench_main
from bench import plots, report
from bench.scenario import offsets

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


def test_the_committed_window_plot_is_what_its_committed_results_draw() -> None:
    # The page's window plot comes from its own run (docs/benchmarks.json's predate the
    # recording of restarts over time).
    committed = json.loads((DOCS / "benchmarks-window.json").read_text())
    assert (DOCS / plots.WINDOW_PLOT).read_text() == plots.window_plot(committed), (
        "docs/benchmarks-window.svg is stale: "
        "bench/run report --window docs/benchmarks-window.json draws it again"
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


# -- restarts over time ------------------------------------------------------------------


def window_results(*runs: tuple[str, int, list[float] | None]) -> dict[str, Any]:
    """Runs holding restarts over time where each tool's bench/scenario.py puts them."""
    found = []
    for tool, n, seconds in runs:
        run: dict[str, Any] = {"operator": tool, "deployments": n, "usage_ready": {"rss_mb": 1}}
        if tool == "restarter":
            run["window"] = {} if seconds is None else {"restarts_since_start_s": seconds}
        else:
            run["fanout"] = {} if seconds is None else {"restarts_since_change_s": seconds}
        found.append(run)
    return {"reloader": {"version": "1.4.21"}, "runs": found}


def test_each_tool_gets_its_median_run_at_the_largest_size_that_holds_restarts() -> None:
    series = plots.restarts_over_time(
        window_results(
            ("restarter", 1000, None),  # older results: percentiles only
            ("restarter", 100, [0.0, 0.4, 0.5]),
            ("restarter", 500, [0.2, 0.3, 3.0]),
            ("restarter", 500, [0.1, 0.1, 1.0]),  # the median of three by its last restart
            ("restarter", 500, [0.1, 0.2, 0.3]),
            ("naive", 1000, [0.1]),  # not one of the compared tools
            ("reloader", 100, [1.0, 1.5]),
        )
    )
    assert [(s.label, s.origin, s.deployments, s.runs, s.seconds) for s in series] == [
        ("restarter", "the window opened", 500, 3, [0.1, 0.1, 1.0]),
        ("Reloader 1.4.21", "the change was sent", 100, 1, [1.0, 1.5]),
    ]
    assert plots.window_title(series) == (
        "Restarts over time (restarter N = 500, Reloader 1.4.21 N = 100), "
        "median run of each (by its last restart)"
    )


def test_the_count_steps_up_at_each_restart_and_stays_flat_between() -> None:
    line = plots.Restarts("restarter", "#000", "the window opened", 4, 1, [0.5, 0.6, 0.6, 2.0])
    assert line.points() == [
        (0.0, 0),
        (0.5, 0),  # none before the first restart
        (0.5, 1),
        (0.6, 3),  # a tenth of a second apart: the resolution, drawn as a slope
        (2.0, 3),  # flat while none restarts
        (2.0, 4),
    ]


def test_the_window_svg_has_one_line_per_tool_and_names_the_runs() -> None:
    svg = plots.window_plot(
        window_results(
            ("restarter", 1000, [0.5 + 0.1 * i for i in range(20)]),
            ("reloader", 1000, [0.2 * i for i in range(1, 21)]),
        )
    )
    assert svg is not None
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
    assert len(re.findall("<polyline ", svg)) == 2
    assert "<title>Restarts over time at N = 1,000, one run of each tool</title>" in svg
    assert "restarter: 20 restarts, the last 2.4 s after the window opened" in svg
    assert "Reloader 1.4.21: 20 restarts, the last 4 s after the change was sent" in svg
    assert "Seconds since the window opened (restarter) or the change was sent" in svg


def test_no_window_plot_is_written_when_no_run_holds_restarts(tmp_path: Path) -> None:
    written = plots.write(results(("restarter", 100, 100.0), ("reloader", 100, 150.0)), tmp_path)
    assert written == [tmp_path / plots.MEMORY_PLOT]
    assert not (tmp_path / plots.WINDOW_PLOT).exists()
    assert (
        plots.window_plot(window_results(("restarter", 100, None), ("reloader", 100, []))) is None
    )


def test_the_report_draws_the_window_plot_when_the_runs_hold_restarts(tmp_path: Path) -> None:
    written = plots.write(
        window_results(("restarter", 100, [1.0, 2.0]), ("reloader", 100, [0.5])), tmp_path
    )
    assert written == [tmp_path / plots.MEMORY_PLOT, tmp_path / plots.WINDOW_PLOT]
    assert (tmp_path / plots.WINDOW_PLOT).read_text().count("<polyline ") == 2


def test_a_run_records_its_restarts_compactly() -> None:
    assert offsets({"b": 103.04, "a": 100.96, "c": 101.26}, 100.0) == [1.0, 1.3, 3.0]
    text = bench_main.dumps(
        {"window": {"restarts_since_start_s": [1.0, 1.3, 3.0]}, "flags": ["a", "b"]}
    )
    assert '"restarts_since_start_s": [1.0, 1.3, 3.0]' in text
    assert json.loads(text)["flags"] == ["a", "b"]


def test_bench_run_report_draws_the_window_plot_from_the_results_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "plot", lambda *_: None)
    monkeypatch.setattr(report, "markdown", lambda *_: "table")
    monkeypatch.setattr(bench_main, "DOCS", tmp_path)
    page = tmp_path / "page.json"
    page.write_text(json.dumps(results(("restarter", 100, 100.0)) | {"command": "", "setup": {}}))
    window = tmp_path / "window.json"
    window.write_text(json.dumps(window_results(("restarter", 1000, [1.0, 2.0]))))
    assert bench_main.main(["report", str(page)]) == 0
    assert not (tmp_path / plots.WINDOW_PLOT).exists()  # the page's results hold none
    assert bench_main.main(["report", str(page), "--window", str(window)]) == 0
    assert "N = 100" in (tmp_path / plots.MEMORY_PLOT).read_text()
    assert "N = 1,000" in (tmp_path / plots.WINDOW_PLOT).read_text()
    with pytest.raises(SystemExit, match="holds no restarts over time"):
        bench_main.main(["report", str(page), "--window", str(page)])
