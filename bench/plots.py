"""SVG plots for the users' benchmarks page (docs/benchmarks.md), from the benchmark's raw
results (docs/benchmarks.json): memory against N for restarter and Reloader. Plain SVG
written here, so that the page's plots need no plotting library and are the same bytes from
the same results; bench/run writes them with its JSON, and ``bench/run report`` again."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bench.stats import median

MEMORY_PLOT = "benchmarks-memory.svg"
#: The tools the page compares, and their colours (colour-blind safe: blue and orange).
TOOLS = {"restarter": "#1f77b4", "reloader": "#ff7f0e"}
WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 40, 48


@dataclass(frozen=True)
class Series:
    """One tool's line: a median of its runs at each N."""

    label: str
    colour: str
    points: list[tuple[int, float]]


def memory_at_ready(results: dict[str, Any]) -> list[Series]:
    """Each compared tool's median RSS once ready (its first change handled) at each N it
    ran. Ready is the one phase every run has: runs with --no-fanout stop there, so a
    whole run's peak would compare runs that did different work."""
    reloader = results.get("reloader") or {}
    labels = {
        "restarter": "restarter",
        "reloader": f"Reloader {reloader['version']}" if reloader.get("version") else "Reloader",
    }
    found = []
    for tool, colour in TOOLS.items():
        by_size: dict[int, list[float]] = {}
        for run in results["runs"]:
            rss = (run.get("usage_ready") or {}).get("rss_mb")
            if run["operator"] == tool and rss is not None:
                by_size.setdefault(int(run["deployments"]), []).append(float(rss))
        if by_size:
            points = [(n, median(values)) for n, values in sorted(by_size.items())]
            found.append(Series(labels[tool], colour, points))
    return found


def _ticks(top: float) -> list[float]:
    """Round steps from 0 to at least ``top``, four to eight of them."""
    step = 10 ** math.floor(math.log10(max(top, 1)))
    while top / step > 8:
        step *= 2 if str(step)[0] == "1" else 2.5 if str(step)[0] == "2" else 2
    return [step * i for i in range(math.ceil(top / step) + 1)]


def line_chart(title: str, series: Sequence[Series], y_unit: str) -> str:
    """A line chart with a logarithmic N axis: one polyline and its points per series."""
    sizes = sorted({n for s in series for n, _ in s.points})
    if not sizes:
        raise ValueError("no runs to plot")
    ticks = _ticks(max(v for s in series for _, v in s.points))
    low, high = math.log10(sizes[0]), math.log10(sizes[-1])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(n: int) -> float:
        share = (math.log10(n) - low) / (high - low) if high > low else 0.5
        return round(LEFT + share * plot_w, 1)

    def y(value: float) -> float:
        return round(TOP + plot_h - value / ticks[-1] * plot_h, 1)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
    ]
    for tick in ticks:
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick)}" y2="{y(tick)}" stroke="#ddd"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4}" text-anchor="end">{tick:g}</text>')
    for n in sizes:
        out.append(f'<text x="{x(n)}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{n:,}</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        "Deployments (N, logarithmic)</text>"
    )
    out.append(
        f'<text x="16" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {TOP + plot_h / 2})">{escape(y_unit)}</text>'
    )
    for index, line in enumerate(series):
        points = " ".join(f"{x(n)},{y(v)}" for n, v in line.points)
        out.append(
            f'<polyline fill="none" stroke="{line.colour}" stroke-width="2" points="{points}">'
            f"<title>{escape(line.label)}</title></polyline>"
        )
        for n, v in line.points:
            out.append(
                f'<circle cx="{x(n)}" cy="{y(v)}" r="3.5" fill="{line.colour}">'
                f"<title>{escape(line.label)}: {v:.0f} at N = {n:,}</title></circle>"
            )
        legend_y = TOP + 16 + 20 * index
        out.append(
            f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 36}" y1="{legend_y}" '
            f'y2="{legend_y}" stroke="{line.colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{WIDTH - RIGHT + 42}" y="{legend_y + 4}">{escape(line.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def memory_plot(results: dict[str, Any]) -> str:
    return line_chart("Memory once ready (RSS), median of runs", memory_at_ready(results), "MB")


def write(results: dict[str, Any], docs: Path) -> list[Path]:
    """Write the page's plots into ``docs``; the paths written."""
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / MEMORY_PLOT
    path.write_text(memory_plot(results))
    return [path]
