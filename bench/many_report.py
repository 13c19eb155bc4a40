"""The ``many-sources`` table: figures per operator, as markdown between markers in
docs/benchmarks.md; pure formatting of the raw results except ``write``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.stats import median, spread

BEGIN, END = "<!-- many-sources:begin -->", "<!-- many-sources:end -->"
HEADING = "## Many sources at once"
NAMES = {"restarter": "restarter", "reloader": "Reloader"}

Run = dict[str, Any]
Figure = Callable[[Run], float | None]


def _get(run: Run, *path: str) -> float | None:
    value: Any = run
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return None if value is None else float(value)


def _per_minute(run: Run) -> float | None:
    window = run.get("window")
    if not window or not window.get("waiting_seconds"):
        return None
    return 60 * float(window["cpu_waiting_seconds"]) / float(window["waiting_seconds"])


#: (row label, figure of one run, digits). A figure of None: not measured for that operator.
ROWS: list[tuple[str, Figure, int]] = [
    ("ready: start → first change handled (s)", lambda r: _get(r, "ready_seconds"), 1),
    ("RSS at ready (MB)", lambda r: _get(r, "usage_ready", "rss_mb"), 1),
    ("the harness sent the K changes in (s)", lambda r: _get(r, "changes", "send_seconds"), 1),
    (
        "**first change → last dependent stamped (restarter) / restarted (Reloader) (s)**",
        lambda r: _get(r, "changes", "first_to_last_answer"),
        1,
    ),
    ("its source's change → dependent answered, p50 (s)", lambda r: _get(r, "changes", "p50"), 1),
    ("its source's change → dependent answered, p99 (s)", lambda r: _get(r, "changes", "p99"), 1),
    ("dependents answered per second", lambda r: _get(r, "changes", "per_second"), 1),
    ("CPU, first change → last answer (s)", lambda r: _get(r, "changes", "cpu_seconds"), 1),
    ("RSS once all answered (MB)", lambda r: _get(r, "usage_answered", "rss_mb"), 1),
    (
        "highest sampled RSS, first change → last answer (MB)",
        lambda r: _get(r, "rss_sampled", "phase_peaks_mb", "first_change..answered"),
        1,
    ),
    (
        "RSS while every one waits for the window (MB)",
        lambda r: _get(r, "window", "usage_waiting", "rss_mb"),
        1,
    ),
    ("CPU while every one waits (s per minute)", _per_minute, 2),
    (
        "**window start → last restart (s)**",
        lambda r: _get(r, "window", "last"),
        1,
    ),
    ("window start → restarted, p50 (s)", lambda r: _get(r, "window", "p50"), 1),
    ("window start → restarted, p99 (s)", lambda r: _get(r, "window", "p99"), 1),
    ("window restarts per second", lambda r: _get(r, "window", "per_second"), 1),
    (
        "highest sampled RSS in the window (MB)",
        lambda r: _get(r, "rss_sampled", "phase_peaks_mb", "window..last_restart"),
        1,
    ),
    ("RSS after the last restart (MB)", lambda r: _get(r, "usage_window", "rss_mb"), 1),
    ("RSS 30 s later (MB)", lambda r: _get(r, "usage_end", "rss_mb"), 1),
    ("**peak RSS (VmHWM, MB)**", lambda r: _get(r, "usage_end", "peak_rss_mb"), 1),
    (
        "peak sampled, seconds after the first change",
        lambda r: _get(r, "rss_sampled", "peak_after_first_change_s"),
        0,
    ),
    ("**CPU, whole run (s)**", lambda r: _get(r, "usage_end", "cpu_seconds"), 1),
]


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}".replace(",", " ")


def _cell(values: list[float | None], digits: int) -> str:
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present:
        return "—"
    if len(present) == 1:
        return _number(present[0], digits)
    low, high = spread(present)
    return f"{_number(median(present), digits)} ({_number(low, digits)}-{_number(high, digits)})"


def _restarts(runs: list[Run]) -> str:
    cells = []
    for run in runs:
        counted = run.get("restarts")
        if not counted:
            continue
        text = f"{counted['exactly_once']} of {counted['dependents']}"
        others = [
            f"{counted[key]} {label}"
            for key, label in (
                ("never", "never"),
                ("more_than_once", "more than once"),
                ("before_window", "before the window"),
            )
            if counted.get(key)
        ]
        cells.append(text + (f" ({', '.join(others)})" if others else ""))
    return "; ".join(cells) or "—"


def _requests(runs: list[Run], *path: str) -> str:
    """The operator's requests of a phase, biggest first (the first run's)."""
    for run in runs:
        counts: Any = run
        for key in path:
            counts = counts.get(key) if isinstance(counts, dict) else None
        if counts:
            ordered = sorted(counts.items(), key=lambda item: -item[1])
            return ", ".join(f"{verb} {_number(n, 0)}" for verb, n in ordered)
    return "—"


def table(results: dict[str, Any]) -> list[str]:
    operators = list(dict.fromkeys(run["operator"] for run in results["runs"]))
    by_operator = {op: [r for r in results["runs"] if r["operator"] == op] for op in operators}
    header = "| figure | " + " | ".join(NAMES.get(op, op) for op in operators) + " |"
    rows = [header, "|---" * (len(operators) + 1) + "|"]
    for label, figure, digits in ROWS:
        cells = [_cell([figure(run) for run in by_operator[op]], digits) for op in operators]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    rows.append(
        "| **restarted exactly once** (the harness's watch) | "
        + " | ".join(_restarts(by_operator[op]) for op in operators)
        + " |"
    )
    for label, path in (
        ("requests, changes → quiet (audit)", ("changes", "requests")),
        ("requests, window → quiet (audit)", ("window", "requests")),
    ):
        cells = [_requests(by_operator[op], *path) for op in operators]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def _described(results: dict[str, Any], output: Path | None) -> str:
    layout = results["layout"]
    k, d = layout["namespaces"], layout["deployments_per_namespace"]
    code = results.get("code", {})
    commit = str(code.get("commit", "?"))[:7] + (
        " with src/ modified" if code.get("src_modified") else ""
    )
    runs = max((run["run"] for run in results["runs"]), default=0) + 1
    raw = f"; raw figures in `{output.name}`" if output is not None else ""
    reloader = results.get("reloader")
    peer = f"; Reloader `{' '.join(reloader['flags'])}`" if reloader else ""
    return (
        f"`{results['command']}` — {_number(k, 0)} namespaces of {d} Deployments "
        f"({_number(k * d, 0)} dependents), one labelled Secret per namespace, all changed at "
        f"once; restarter at `{commit}`{peer}; {runs} run(s) per operator (median, min-max); "
        f"{results['started']} on {results['machine']['cpus']} CPUs{raw}."
    )


def one_line(run: Run) -> str:
    changes = run.get("changes", {})
    window = run.get("window", {})
    return (
        f"{run['operator']} run {run['run']}: ready {run.get('ready_seconds', math.nan):.1f}s, "
        f"{changes.get('answered', 0)}/{changes.get('dependents', 0)} answered, last "
        f"{changes.get('first_to_last_answer', math.nan):.1f}s after the first change"
        + (f", window → last restart {window.get('last', math.nan):.1f}s" if window else "")
        + f", peak RSS {run.get('usage_end', {}).get('peak_rss_mb', math.nan):.1f} MB"
    )


def write(results: dict[str, Any], docs: Path, output: Path | None) -> str:
    """The section between the markers in ``docs``/benchmarks.md (appended, with a heading,
    when the page has none); returns it."""
    section = "\n".join([BEGIN, _described(results, output), "", *table(results), END])
    page = docs / "benchmarks.md"
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        text += f"\n{HEADING}\n\n{section}\n"
    docs.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return section
