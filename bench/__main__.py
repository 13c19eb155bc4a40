"""``bench/run``: start a local control plane, benchmark the operators, write the report.

restarter, the naive kopf baseline (bench/naive.py) and, when its binary is there,
stakater/Reloader, each in the same phases of the same run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench import many_sources, pacing, plots, report, window_memory, workload
from bench.audit import AuditLog
from bench.control_plane import AuditedCluster, api_client, fresh_workdir
from bench.loading import Objects
from bench.metrics import ApiserverMetrics
from bench.peers import RELOADER_BINARY, RELOADER_BUILD, RELOADER_VERSION, sha256
from bench.scenario import (
    NAIVE,
    OPERATORS,
    RELOADER,
    RELOADER_FLAGS,
    RESTARTER,
    Harness,
    Plan,
    prepare,
    run_once,
)
from bench.watching import DeploymentWatcher

log = logging.getLogger("bench")
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _sizes(text: str) -> list[int]:
    return sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    parser.add_argument(
        "--sizes", type=_sizes, default=[100, 1000], help="Deployments, e.g. 100,1000,5000"
    )
    parser.add_argument("--secrets", type=int, default=2000, help="labelled Secrets (M)")
    parser.add_argument("--noise", type=int, default=20000, help="unlabelled Secrets")
    parser.add_argument("--noise-configmaps", type=int, default=5000, help="ConfigMaps")
    parser.add_argument("--runs", type=int, default=3, help="runs per size and operator")
    parser.add_argument(
        "--runs-above",
        default="",
        metavar="SIZE:RUNS",
        help="fewer runs for big sizes, e.g. 1000:1 runs sizes above 1000 once",
    )
    parser.add_argument("--changes", type=int, default=10, help="single-Secret changes per run")
    parser.add_argument("--churn", type=int, default=20, help="unlabelled Secret updates per run")
    parser.add_argument("--timer-interval", type=float, default=5.0, help="restarter's timer")
    parser.add_argument(
        "--operators",
        help=f"comma-separated, of {', '.join(OPERATORS)} (default: {RESTARTER},{NAIVE}, "
        f"plus {RELOADER} when --reloader-binary exists)",
    )
    parser.add_argument(
        "--reloader-binary",
        type=lambda text: Path(text).expanduser(),
        default=RELOADER_BINARY,
        help=f"stakater/Reloader {RELOADER_VERSION} built from source, or another version's "
        "binary (default: %(default)s)",
    )
    parser.add_argument("--output", type=Path, default=DOCS / "benchmarks.json", help="raw results")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where the table and plot go")
    parser.add_argument(
        "--workdir", type=Path, help="cluster and operator logs (default: a temp dir)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy each operator (speedscope files in workdir)"
    )
    parser.add_argument(
        "--operator-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the operators, e.g. MALLOC_ARENA_MAX=2 (repeatable)",
    )
    parser.add_argument(
        "--no-fanout",
        action="store_true",
        help="skip the fan-out and the window (start-up, single changes and churn only)",
    )
    parser.add_argument(
        "--body",
        choices=sorted(workload.BODIES),
        default="small",
        help="workload Deployments: small, or realistic (a Helm chart's shape, kubectl apply)",
    )
    parser.add_argument(
        "--apiserver-rate",
        action="store_true",
        help="after each restarter run, the apiserver's own rate for the same PATCHes (and "
        "Events) from a bare loop of 16 threads",
    )
    parser.add_argument(
        "--memtrace",
        action="store_true",
        help="tracemalloc in each operator; live allocations written at the end of a run",
    )
    parser.add_argument(
        "--memprofile",
        action="store_true",
        help="memray in restarter (the allocations live at its peak, written when it stops) "
        "and a sample of RSS and Python's allocated blocks every 0.5 s",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pacing"]:
        return pacing.main(argv[1:])
    if argv[:1] == ["window-memory"]:
        return window_memory.main(argv[1:])
    if argv[:1] == ["many-sources"]:
        return many_sources.main(argv[1:])
    if argv[:1] == ["report"]:
        return _report(argv[1:])
    args = parse(argv)
    operators = _operators(args)
    # SIGTERM too must bring the control plane down (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    workdir = fresh_workdir(args.workdir, "restarter-bench-")
    far = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=12)).strftime("%H.%M")
    results: dict[str, Any] = {
        "command": "bench/run " + shlex.join(argv),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "parameters": {k: str(v) for k, v in vars(args).items()}
        | {"operators": ",".join(operators)},
        "setup": {},
        "runs": [],
    }
    if RELOADER in operators:
        results["reloader"] = {
            # The pinned version when the binary is the one bench/peers.py builds.
            "version": RELOADER_VERSION if args.reloader_binary == RELOADER_BINARY else None,
            "binary": str(args.reloader_binary),
            "sha256": sha256(args.reloader_binary),
            "flags": list(RELOADER_FLAGS),
        }
    cluster = AuditedCluster(directory=workdir / "cluster", nodes=2)
    started = time.monotonic()
    cluster.up()
    log.info(f"control plane up in {time.monotonic() - started:.1f}s in {workdir}")
    try:
        client = api_client(cluster)
        objects = Objects(client, cluster)
        objects.ensure_namespace()
        watcher = DeploymentWatcher(client).start()
        harness = Harness(
            cluster,
            objects,
            watcher,
            AuditLog(cluster.audit_log),
            ApiserverMetrics(cluster),
            workdir,
        )
        existing = 0
        for size in args.sizes:
            plan = Plan(
                deployments=size,
                labelled=args.secrets,
                noise_secrets=args.noise,
                noise_configmaps=args.noise_configmaps,
                changes=args.changes,
                churn=args.churn,
                timer_interval=args.timer_interval,
                far_window=far,
                profile=args.profile,
                memtrace=args.memtrace,
                memprofile=args.memprofile,
                fanout=not args.no_fanout,
                body=args.body,
                apiserver_rate=args.apiserver_rate,
                operator_env=tuple(tuple(pair.split("=", 1)) for pair in args.operator_env),
                reloader_binary=args.reloader_binary if RELOADER in operators else None,
            )
            timings = prepare(harness, plan, existing)
            existing = size
            results["setup"][str(size)] = timings
            log.info(
                f"N={size}: prepared " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
            )
            for run in range(_runs(args, size)):
                # Alternate the order so that drift on a shared machine hits both alike.
                order = operators if run % 2 == 0 else operators[::-1]
                for operator in order:
                    result = run_once(harness, plan, operator, run)
                    results["runs"].append(result)
                    log.info(report.one_line(result))
                    _save(results, args.output)
        watcher.stop()
    finally:
        cluster.down()
    results["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    _save(results, args.output)
    report.write(results, args.docs)
    log.info(
        f"wrote {args.output}, {args.docs / 'benchmarks-history.md'} and the plots; "
        f"logs in {workdir}"
    )
    return 0


def _report(argv: list[str]) -> int:
    """``bench/run report``: the tables and plots again from results, running nothing."""
    parser = argparse.ArgumentParser(
        prog="bench/run report",
        description="Render docs/benchmarks-history.md's tables and the benchmarks page's "
        "plots again from raw results, several merged as one.",
    )
    parser.add_argument(
        "results", nargs="*", type=Path, default=[DOCS / "benchmarks.json"], help="raw results"
    )
    parser.add_argument(
        "--window",
        type=Path,
        metavar="RESULTS",
        help="draw the window plot (restarts over time) from these results instead, e.g. "
        "docs/benchmarks-window.json; without it the plot is drawn from the results above "
        "when their runs recorded restarts over time, else left as it is",
    )
    args = parser.parse_args(argv)
    window = json.loads(args.window.read_text()) if args.window else None
    if window is not None and not plots.restarts_over_time(window):
        sys.exit(f"bench/run report: {args.window} holds no restarts over time")
    report.write(report.merge([json.loads(p.read_text()) for p in args.results]), DOCS)
    if window is not None:
        plots.write_window(window, DOCS)
    return 0


def _operators(args: argparse.Namespace) -> list[str]:
    """The operators to run; exits with a message when one is unknown or not built."""
    if args.operators is None:
        found = os.access(args.reloader_binary, os.X_OK)
        return [RESTARTER, NAIVE, *([RELOADER] if found else [])]
    operators = [name.strip() for name in args.operators.split(",") if name.strip()]
    unknown = [name for name in operators if name not in OPERATORS]
    if unknown or not operators:
        sys.exit(f"bench/run: unknown operator(s) {unknown}; known: {', '.join(OPERATORS)}")
    if RELOADER in operators and not os.access(args.reloader_binary, os.X_OK):
        sys.exit(RELOADER_BUILD.format(binary=args.reloader_binary))
    return operators


def _runs(args: argparse.Namespace, size: int) -> int:
    if not args.runs_above:
        return int(args.runs)
    above, runs = (int(part) for part in args.runs_above.split(":"))
    return runs if size > above else int(args.runs)


def _save(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(results))


#: A JSON list of numbers only (the restarts over time: up to N of them).
NUMBERS = re.compile(r"\[(\s*-?[0-9][0-9.eE+-]*(?:,\s*-?[0-9][0-9.eE+-]*)*\s*)\]")


def dumps(results: dict[str, Any]) -> str:
    """The results as indented JSON, each list of numbers on one line."""
    text = json.dumps(results, indent=1, default=str)
    return NUMBERS.sub(lambda m: "[" + re.sub(r",\s*", ", ", m.group(1).strip()) + "]", text) + "\n"


if __name__ == "__main__":
    sys.exit(main())
