"""The ``many-sources`` table: figures per operator, as markdown between markers in
docs/benchmarks-history.md; pure formatting of the raw results except ``write``."""

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
    ("at rest after ready, until quiet (s)", lambda r: _get(r, "rest_seconds"), 0),
    ("RSS at rest (MB)", lambda r: _get(r, "usage_rest", "rss_mb"), 1),
    (
        "**peak RSS at rest, before any change (VmHWM, MB)**",
        lambda r: _get(r, "usage_rest", "peak_rss_mb"),
        1,
    ),
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
        "**peak RSS once all answered (VmHWM, MB)**",
        lambda r: _get(r, "usage_answered", "peak_rss_mb"),
        1,
    ),
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
    (
        "machine's load average (1 min) at the run's start",
        lambda r: _get(r, "load_average", "start"),
        1,
    ),
    ("machine's load average (1 min) at its end", lambda r: _get(r, "load_average", "end"), 1),
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
        text = f"{_number(counted['exactly_once'], 0)} of {_number(counted['dependents'], 0)}"
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


def _column(run: Run, results: dict[str, Any]) -> str:
    """An operator's column; restarter watching every namespace has its own."""
    name = NAMES.get(run["operator"], run["operator"])
    if run["operator"] == "restarter" and _scope(results) == "cluster":
        name += " (every namespace)"
    return name


def _scope(results: dict[str, Any]) -> str:
    return str(results.get("parameters", {}).get("restarter_scope", "selector"))


def table(commands: list[dict[str, Any]]) -> list[str]:
    """One column per operator (and restarter's scope) over the runs of every command."""
    by_column: dict[str, list[Run]] = {}
    for results in commands:
        for run in results["runs"]:
            by_column.setdefault(_column(run, results), []).append(run)
    columns = list(by_column)
    rows = ["| figure | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    cells: dict[str, list[str]] = {}
    for label, figure, digits in ROWS:
        cells[label] = [_cell([figure(run) for run in by_column[c]], digits) for c in columns]
    cells["**restarted exactly once** (the harness's watch)"] = [
        _restarts(by_column[c]) for c in columns
    ]
    for label, path in (
        ("requests, changes → quiet (audit)", ("changes", "requests")),
        ("requests, window → quiet (audit)", ("window", "requests")),
        ("requests, first change → operator stopped (audit)", ("requests_until_stopped",)),
    ):
        cells[label] = [_requests(by_column[c], *path) for c in columns]
    # A row no run measured (an older run's results) is left out.
    rows += [f"| {k} | " + " | ".join(v) + " |" for k, v in cells.items() if set(v) != {"—"}]
    return rows


def _described(results: dict[str, Any], output: Path | None) -> str:
    """One command: what it ran, on which code, when, and where its raw figures are."""
    layout = results["layout"]
    k, d = layout["namespaces"], layout["deployments_per_namespace"]
    code = results.get("code", {})
    commit = str(code.get("commit", "?"))[:7]
    commit += " with src/ modified" if code.get("src_modified") else ""
    if _scope(results) == "cluster":
        commit += ", watching every namespace (no --namespace-selector)"
    runs = max((run["run"] for run in results["runs"]), default=0) + 1
    reloader = results.get("reloader")
    peer = f"; Reloader `{' '.join(reloader['flags'])}`" if reloader else ""
    raw = f"; raw figures in `{output.name}`" if output is not None else ""
    source = "one Secret each"
    if layout.get("bundle_kib"):
        source = f"one ConfigMap bundle of {layout['bundle_kib']} KiB each"
    if layout.get("first_sight"):
        source += ", first sight (no records on them)"
    return (
        f"`{results['command']}`: {_number(k, 0)} namespaces of {d} Deployments, {source} "
        f"({_number(k * d, 0)} dependents); restarter at `{commit}`{peer}; {runs} run(s) per "
        f"operator; {results['started']} on {results['machine']['cpus']} CPUs{raw}."
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


def write(commands: list[dict[str, Any]], docs: Path, outputs: list[Path | None]) -> str:
    """The section between the markers in ``docs``/benchmarks-history.md (appended, with a heading,
    when the page has none) from one or more commands' results; returns it."""
    described = [f"- {_described(r, output)}" for r, output in zip(commands, outputs, strict=True)]
    note = "One labelled source per namespace, all changed at once; median (min-max) of runs."
    section = "\n".join([BEGIN, *described, "", note, "", *table(commands), END])
    page = docs / "benchmarks-history.md"
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        text += f"\n{HEADING}\n\n{section}\n"
    docs.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return section
