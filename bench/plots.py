"""SVG plots for the users' benchmarks page (docs/benchmarks.md), from the benchmark's raw
results: memory against N for restarter and Reloader, and their restarts over time after
one change that every Deployment depends on (restarter's in its window). Plain SVG written
here, so that the page's plots need no plotting library and are the same bytes from the
same results; bench/run writes them with its JSON, and ``bench/run report`` again. A plot
whose figures the results do not hold (results from before restarts were recorded over
time, runs with --no-fanout) is not written."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bench.stats import median

MEMORY_PLOT = "benchmarks-memory.svg"
WINDOW_PLOT = "benchmarks-window.svg"
#: The tools the page compares, and their colours (colour-blind safe: blue and orange).
TOOLS = {"restarter": "#1f77b4", "reloader": "#ff7f0e"}
WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 40, 48
#: Where a run holds each tool's restarts over time (bench/scenario.py), and their origin:
#: restarter's from its window's start, Reloader's from the change (it has no window).
RESTARTS = {
    "restarter": ("window", "restarts_since_start_s", "the window opened"),
    "reloader": ("fanout", "restarts_since_change_s", "the change was sent"),
}


@dataclass(frozen=True)
class Series:
    """One tool's line: a median of its runs at each N."""

    label: str
    colour: str
    points: list[tuple[int, float]]


@dataclass(frozen=True)
class Restarts:
    """One tool's restarts over time in one run: when each dependent was seen restarted."""

    label: str
    colour: str
    origin: str
    """What the seconds count from: the window opened, or the change was sent."""
    deployments: int
    runs: int
    """The tool's runs at that N that hold the times; the one drawn is their median."""
    seconds: list[float]

    def points(self) -> list[tuple[float, int]]:
        """The cumulative count from (0, 0), a step at each time: flat while none restarts
        (the times are to 0.1 s, so steps closer than that are drawn as a slope)."""
        points: list[tuple[float, int]] = [(0.0, 0)]
        for count, at in enumerate(sorted(self.seconds), start=1):
            last_at, last_count = points[-1]
            if at == last_at:
                points[-1] = (at, count)
                continue
            if at - last_at > 0.15:
                points.append((at, last_count))
            points.append((at, count))
        return points


def _labels(results: dict[str, Any]) -> dict[str, str]:
    reloader = results.get("reloader") or {}
    return {
        "restarter": "restarter",
        "reloader": f"Reloader {reloader['version']}" if reloader.get("version") else "Reloader",
    }


def memory_at_ready(results: dict[str, Any]) -> list[Series]:
    """Each compared tool's median RSS once ready (its first change handled) at each N it
    ran. Ready is the one phase every run has: runs with --no-fanout stop there, so a
    whole run's peak would compare runs that did different work."""
    labels = _labels(results)
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


def restarts_over_time(results: dict[str, Any]) -> list[Restarts]:
    """Each compared tool's restarts over time at the largest N whose runs hold them: of
    several runs, the median by its last restart (the lower of the two middle ones)."""
    labels = _labels(results)
    found = []
    for tool, colour in TOOLS.items():
        phase, key, origin = RESTARTS[tool]
        held = [
            run
            for run in results["runs"]
            if run["operator"] == tool and (run.get(phase) or {}).get(key)
        ]
        if not held:
            continue
        size = max(int(run["deployments"]) for run in held)
        at_size = sorted(
            (run[phase][key] for run in held if int(run["deployments"]) == size), key=max
        )
        seconds = [float(s) for s in at_size[(len(at_size) - 1) // 2]]
        found.append(Restarts(labels[tool], colour, origin, size, len(at_size), seconds))
    return found


def _ticks(top: float) -> list[float]:
    """Round steps from 0 to at least ``top``, four to eight of them."""
    step = 10 ** math.floor(math.log10(max(top, 1)))
    while top / step > 8:
        step *= 2 if str(step)[0] == "1" else 2.5 if str(step)[0] == "2" else 2
    while math.ceil(top / step) + 1 < 4 and step > 1:  # 1 000 → 0, 200, …, 1 000
        step /= 2.5 if str(step)[0] == "5" else 2
    step = int(step) if step == int(step) else step
    return [step * i for i in range(max(1, math.ceil(top / step)) + 1)]


def _frame(
    title: str,
    y_ticks: list[float],
    y: Callable[[float], float],
    y_unit: str,
    x_ticks: list[tuple[float, str]],
    x_title: str,
) -> list[str]:
    """The SVG's opening, its title, the horizontal grid and both axes' labels."""
    plot_h = HEIGHT - TOP - BOTTOM
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
    ]
    for tick in y_ticks:
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick)}" y2="{y(tick)}" stroke="#ddd"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4}" text-anchor="end">{tick:g}</text>')
    for at, text in x_ticks:
        out.append(f'<text x="{at}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{text}</text>')
    out.append(
        f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        f"{escape(x_title)}</text>"
    )
    out.append(
        f'<text x="16" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {TOP + plot_h / 2})">{escape(y_unit)}</text>'
    )
    return out


def _legend(index: int, label: str, colour: str) -> list[str]:
    legend_y = TOP + 16 + 20 * index
    return [
        f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 36}" y1="{legend_y}" '
        f'y2="{legend_y}" stroke="{colour}" stroke-width="2"/>',
        f'<text x="{WIDTH - RIGHT + 42}" y="{legend_y + 4}">{escape(label)}</text>',
    ]


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

    x_ticks = [(x(n), f"{n:,}") for n in sizes]
    out = _frame(title, ticks, y, y_unit, x_ticks, "Deployments (N, logarithmic)")
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
        out += _legend(index, line.label, line.colour)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def restarts_chart(title: str, series: Sequence[Restarts]) -> str:
    """Cumulative restarts against seconds, both axes linear: one stepped polyline per
    series, and a point at its last restart."""
    if not any(line.seconds for line in series):
        raise ValueError("no restarts to plot")
    x_ticks = _ticks(max(max(line.seconds) for line in series if line.seconds))
    y_ticks = _ticks(max(len(line.seconds) for line in series))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(seconds: float) -> float:
        return round(LEFT + seconds / x_ticks[-1] * plot_w, 1)

    def y(count: float) -> float:
        return round(TOP + plot_h - count / y_ticks[-1] * plot_h, 1)

    origins = " or ".join(f"{line.origin} ({line.label})" for line in series)
    out = _frame(
        title,
        y_ticks,
        y,
        "restarts",
        [(x(t), f"{t:g}") for t in x_ticks],
        f"Seconds since {origins}",
    )
    for index, line in enumerate(series):
        drawn: list[str] = []
        for at, count in line.points():
            point = f"{x(at)},{y(count)}"
            if not drawn or drawn[-1] != point:
                drawn.append(point)
        out.append(
            f'<polyline fill="none" stroke="{line.colour}" stroke-width="2" '
            f'points="{" ".join(drawn)}"><title>{escape(line.label)}</title></polyline>'
        )
        last = max(line.seconds)
        out.append(
            f'<circle cx="{x(last)}" cy="{y(len(line.seconds))}" r="3.5" fill="{line.colour}">'
            f"<title>{escape(line.label)}: {len(line.seconds):,} restarts, the last "
            f"{last:g} s after {escape(line.origin)}</title></circle>"
        )
        out += _legend(index, line.label, line.colour)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def memory_plot(results: dict[str, Any]) -> str:
    return line_chart("Memory once ready (RSS), median of runs", memory_at_ready(results), "MB")


def window_title(series: Sequence[Restarts]) -> str:
    """Which runs are drawn: the N, and one run or the median of several."""
    which = (
        "one run of each tool"
        if all(line.runs == 1 for line in series)
        else "median run of each (by its last restart)"
    )
    sizes = {line.deployments for line in series}
    if len(sizes) == 1:
        return f"Restarts over time at N = {sizes.pop():,}, {which}"
    at = ", ".join(f"{line.label} N = {line.deployments:,}" for line in series)
    return f"Restarts over time ({at}), {which}"


def window_plot(results: dict[str, Any]) -> str | None:
    """The restarts over time after one change every Deployment depends on; None when no
    run holds them."""
    series = restarts_over_time(results)
    return restarts_chart(window_title(series), series) if series else None


def write(results: dict[str, Any], docs: Path) -> list[Path]:
    """Write the page's plots into ``docs``; the paths written. The window plot is written
    only when the results hold restarts over time; otherwise an existing one is kept."""
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / MEMORY_PLOT
    path.write_text(memory_plot(results))
    window = write_window(results, docs)
    return [path, *([window] if window else [])]


def write_window(results: dict[str, Any], docs: Path) -> Path | None:
    """The window plot alone, when the results hold restarts over time; its path."""
    svg = window_plot(results)
    if svg is None:
        return None
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / WINDOW_PLOT
    path.write_text(svg)
    return path
