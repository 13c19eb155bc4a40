"""``bench/run many-sources``: hundreds of sources changed in the same second.

trust-manager writes one bundle per namespace; reflector and kubed copy one Secret into
every namespace: a rotation changes all of them at once, each with a few dependents.
K namespaces labelled ``bench.restarter.io/many-sources=true``, each with one labelled
Secret that all D realistic Deployments of the namespace read (bench/many_setup.py), or
with ``--source configmap-bundle`` one labelled ConfigMap of ``--bundle-kib`` KiB of PEM CA
certificates that they mount (trust-manager's shape), on a
control plane of its own, or on one an earlier run left running (``--keep-cluster`` and
the same ``--workdir``: what exists is reused, what is missing created). Each operator in
turn, scoped by that label (both with ``--namespace-selector``), per run:

1. started; ready = start → a change of the probe Secret handled; then at rest until its
   CPU is quiet (``--rest``; with ``--first-sight``, restarter also until every source
   carries its checksum): the peak so far is its peak at rest, before any change;
2. every source's data changed at once (16 threads), for restarter with a window a few
   minutes ahead in the same patch;
3. first change sent → last dependent stamped (restarter) or restarted (Reloader);
4. restarter only: all wait, then window start → last restart.

The harness samples the operator's RSS every 0.5 s from /proc, reads RSS and CPU at the
end of each phase and VmHWM at the end, and counts each Deployment's restarts twice: the
new pod-template values its own watch saw, and the operator's PATCHes and Events in the
audit log.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import logging
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import many_report, many_setup
from bench.audit import AuditLog
from bench.control_plane import api_client, reusable_cluster
from bench.loading import MERGE_PATCH, Objects
from bench.many_setup import PROBE_NAMESPACE, SELECTOR, SOURCE, Layout
from bench.peers import RELOADER_BINARY, RELOADER_BUILD, RELOADER_VERSION, sha256
from bench.processes import OperatorProcess, RssSampler
from bench.scenario import (
    RELOADER,
    RELOADER_PORT,
    RELOADER_STARTED,
    RESTARTER,
    Change,
    check_port_free,
    restarted_since,
    stamped_by,
)
from bench.stats import percentile
from bench.watching import RELOADED_FROM, RESTARTED_AT, DeploymentWatcher, Marks
from bench.workload import PROBE_DEPLOYMENT, PROBE_SECRET, reloader_hash, secret_data
from restarter.model import keys
from restarter.model.references import CONFIGMAP, SECRET

log = logging.getLogger("bench.many")
REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
OPERATORS = (RESTARTER, RELOADER)
#: ``--source``: each namespace's source.
SOURCES = ("secret", "configmap-bundle")
#: Threads changing the Secrets (the harness client's connection pool is 16).
CHANGE_THREADS = 16
#: An operator that has answered no new dependent for this long is given up on.
STALL = 600.0
#: The longest any phase may take, however steadily it progresses.
PHASE_LIMIT = 4 * 3600.0
READY_TIMEOUT = 900.0
#: Seconds before the window opens when "waiting" is measured (RSS, then CPU until 2 s
#: before the window): every workload pending, none due.
WAITING = 22.0
#: Seconds after the last restart before "end" is measured (and a second restart, if
#: any, would have been seen: several timer intervals).
AFTER = 30.0


@dataclass
class Bench:
    """What every run shares."""

    args: argparse.Namespace
    cluster: Any
    objects: Objects
    watcher: DeploymentWatcher
    audit: AuditLog
    layout: Layout


# -- one run --------------------------------------------------------------------------------


def run_once(bench: Bench, operator: str, run: int) -> dict[str, Any]:
    """Start the operator, change every source at once, measure, stop it."""
    patched = many_setup.reset(bench.objects, bench.layout)
    _settle(bench)
    process = _process(bench, operator, run)
    result: dict[str, Any] = {"operator": operator, "run": run, "reset_patches": patched}
    # The machine is shared: how busy it was says how far the figures can be trusted.
    result["load_average"] = {"start": os.getloadavg()[0]}
    # restarter lists every selected namespace's workloads before kopf starts: minutes for
    # a thousand namespaces on a busy machine. Ready is counted from the process's start.
    process.start(timeout=READY_TIMEOUT)
    if bench.args.profile:
        process.profile(Path(f"{_stem(bench, operator, run)}.speedscope.json"))
    sampler = RssSampler(process.pid)
    marks: dict[str, float] = {"started": process.started_at}
    try:
        result["ready_seconds"] = _ready(bench, process, operator)
        marks["ready"] = time.time()
        result["usage_ready"] = vars(process.usage())
        if math.isnan(result["ready_seconds"]):
            return result
        result["rest_seconds"] = _rest(bench, process, operator)
        marks["rested"] = time.time()
        result["usage_rest"] = vars(process.usage())
        windowed = operator == RESTARTER and not bench.args.no_window
        window = _window_start(bench) if windowed else None
        cpu_before = process.usage().cpu_seconds
        bookmark = bench.audit.offset()
        changes = _change_all(bench, window, f"{operator}-{run}-{time.time():.0f}")
        first = min(change.sent for change in changes)
        marks["first_change"] = first
        result["changes"] = _answers(bench, operator, changes, bookmark)
        marks["answered"] = first + result["changes"]["first_to_last_answer"]
        result["changes"]["cpu_seconds"] = process.usage().cpu_seconds - cpu_before
        result["usage_answered"] = vars(process.usage())
        if window is not None:
            result["window"] = _window(bench, process, window, marks["answered"])
            marks["window"] = window.timestamp()
            marks["last_restart"] = marks["window"] + result["window"]["last"]
            result["usage_window"] = vars(process.usage())
        time.sleep(AFTER)
        result["usage_end"] = vars(process.usage())
        marks["end"] = time.time()
        if windowed or operator != RESTARTER:
            result["restarts"] = _restarts(bench, operator, changes, window)
        result["load_average"]["end"] = os.getloadavg()[0]
    finally:
        # Sampling stops first: a process shutting down is no phase of the run.
        sampler.stop(_stem(bench, operator, run).with_suffix(".rss.tsv"))
        process.stop()
    if "first_change" in marks:
        # Everything the operator sent from the changes until it was stopped: Events it
        # posts in the background can trail its restarts by minutes.
        result["requests_until_stopped"] = dict(bench.audit.operator_requests(bookmark))
    result["marks"] = marks
    result["rss_sampled"] = _sampled(sampler, marks)
    return result


def _process(bench: Bench, operator: str, run: int) -> OperatorProcess:
    stem = _stem(bench, operator, run)
    env = dict(bench.args.operator_env)
    if operator == RESTARTER:
        if bench.args.memprofile:
            # bench/memtrace before any given path (--operator-env PYTHONPATH=... picks the
            # code measured): memray's peak allocations and its own samples.
            memtrace = str(Path(__file__).parent / "memtrace")
            env["PYTHONPATH"] = os.pathsep.join([memtrace, *filter(None, [env.get("PYTHONPATH")])])
            env |= {"BENCH_MEMRAY": f"{stem}.memray.bin", "BENCH_SAMPLE": f"{stem}.samples.tsv"}
        # Pacing off, as in the main bench: how fast it can go.
        scope = (
            ["--namespace-selector", SELECTOR] if bench.args.restarter_scope == "selector" else []
        )
        flags = [*scope, "--timer-interval", f"{bench.args.timer_interval:g}"]
        flags += ["--max-in-flight", "0", "--max-per-minute", "0"]
        return OperatorProcess.module(
            bench.cluster, "restarter", flags, stem.with_suffix(".log"), env
        )
    _wait_for_port()
    # KUBERNETES_NAMESPACE set would scope it to that one namespace, selector ignored.
    env["KUBERNETES_NAMESPACE"] = ""
    command = [str(bench.args.reloader_binary), *reloader_flags()]
    return OperatorProcess(
        bench.cluster,
        command,
        stem.with_suffix(".log"),
        env,
        started_line=RELOADER_STARTED,
        python=False,
    )


#: Seconds to wait for Reloader's fixed port while another benchmark's Reloader holds it.
PORT_WAIT = 1800.0


def _wait_for_port() -> None:
    deadline = time.monotonic() + PORT_WAIT
    while True:
        try:
            check_port_free(RELOADER_PORT)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            log.info(f"port {RELOADER_PORT} in use (another Reloader?): waiting for it")
            time.sleep(10)


def _stem(bench: Bench, operator: str, run: int) -> Path:
    """Where a run's files go: named by the command's start too, since runs of several
    commands share a reused workdir."""
    return bench.args.workdir / f"{operator}-r{run}-{bench.args.started}"


def reloader_flags() -> list[str]:
    """``--namespace-selector``: it watches every namespace's Secrets and ConfigMaps and acts
    on those of the selected namespaces; ``--reload-strategy annotations``: a restart is
    one pod-template annotation patch, like restarter's ``restartedAt``."""
    return ["--reload-strategy", "annotations", "--namespace-selector", SELECTOR]


#: At rest: the operator's CPU over this many seconds stays under ``QUIET_CPU`` of them.
QUIET_SPAN, QUIET_CPU = 5.0, 0.05
REST_LIMIT = 600.0


def _rest(bench: Bench, process: OperatorProcess, operator: str) -> float:
    """Wait ``--rest`` seconds, and for restarter at its first sight until every source
    carries its checksum (a change before that would be its first sight, no change), then
    until the operator's CPU is quiet; return the seconds waited."""
    started = time.monotonic()
    time.sleep(bench.args.rest)
    if operator == RESTARTER and bench.layout.first_sight:
        while time.monotonic() - started < REST_LIMIT and not _all_recorded(bench):
            time.sleep(1)
    cpu = process.usage().cpu_seconds
    while time.monotonic() - started < REST_LIMIT:
        time.sleep(QUIET_SPAN)
        now = process.usage().cpu_seconds
        if now - cpu < QUIET_CPU * QUIET_SPAN:
            break
        cpu = now
    else:
        log.warning(f"the operator was not quiet within {REST_LIMIT:.0f}s of being ready")
    return time.monotonic() - started


def _all_recorded(bench: Bench) -> bool:
    """Every namespace's source carries restarter's checksum (its metadata alone read)."""
    kind = "ConfigMap" if bench.layout.bundle_kib else "Secret"
    wanted = set(bench.layout.namespace_names())
    recorded = {
        metadata["namespace"]
        for metadata in bench.objects.metadata(kind, keys.RESTART_AT_LABEL)
        if metadata["name"] == SOURCE and keys.CHECKSUM in (metadata.get("annotations") or {})
    }
    return wanted <= recorded


def _settle(bench: Bench) -> None:
    names = {name for names in bench.layout.dependents().values() for name in names}
    deadline = time.monotonic() + 1800
    while not bench.watcher.settled(names):
        if time.monotonic() > deadline:
            raise RuntimeError("the deployment controller did not catch up")
        time.sleep(1)


def _patch_secret(
    bench: Bench, namespace: str, name: str, patch: dict[str, Any], kind: str = SECRET
) -> str:
    call = (
        bench.objects.core.patch_namespaced_config_map
        if kind == CONFIGMAP
        else bench.objects.core.patch_namespaced_secret
    )
    response = call(name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False)
    return str(json.loads(response.data)["metadata"]["resourceVersion"])


def _ready(bench: Bench, process: OperatorProcess, operator: str) -> float:
    """Seconds from start until a change of the probe Secret is handled (NaN: never); the
    probe is changed again every 3 s (one made during the initial listing is no event)."""
    attempts: list[Change] = []
    probe = f"{PROBE_NAMESPACE}/{PROBE_DEPLOYMENT}"
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if not process.alive():
            log.warning(f"{operator} exited before it was ready")
            return math.nan
        data = secret_data(PROBE_SECRET, int(time.time() * 1000))
        sent = time.time()
        rv = _patch_secret(bench, PROBE_NAMESPACE, PROBE_SECRET, {"data": data})
        attempts.append(Change(PROBE_SECRET, sent, rv, data, PROBE_NAMESPACE))
        seen = bench.watcher.wait([probe], _any_of(operator, attempts), attempts[0].sent, 3)
        if seen:
            return seen[probe] - process.started_at
    log.warning(f"{operator} handled no probe change within {READY_TIMEOUT:.0f}s")
    return math.nan


def _any_of(operator: str, attempts: list[Change]) -> Callable[[Marks], bool]:
    predicates = [stamped_by(operator, change) for change in attempts]
    return lambda marks: any(predicate(marks) for predicate in predicates)


def _window_start(bench: Bench) -> dt.datetime:
    """The next whole minute far enough ahead for every dependent to be stamped first; with
    ``--open-window``, the current minute: the window is open as the changes arrive."""
    if bench.args.open_window:
        return dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    dependents = bench.layout.namespaces * bench.layout.deployments
    margin = bench.args.window_margin
    if margin is None:
        margin = 180 + 0.05 * dependents
    ahead = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=margin)
    return ahead.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)


def _change_all(bench: Bench, window: dt.datetime | None, token: str) -> list[Change]:
    """Every namespace's Secret gets new data, all at once; with a window, its label in the
    same patch (one write per source, as a rotation that also sets the label)."""
    labels = {} if window is None else {keys.RESTART_AT_LABEL: f"{window:%H.%M}"}
    kind = bench.layout.kind

    def change(namespace: str) -> Change:
        data = many_setup.changed_data(bench.layout, namespace, token)
        patch: dict[str, Any] = {"data": data}
        if labels:
            patch["metadata"] = {"labels": labels}
        sent = time.time()
        rv = _patch_secret(bench, namespace, SOURCE, patch, kind)
        return Change(SOURCE, sent, rv, data, namespace, kind)

    started = time.time()
    with ThreadPoolExecutor(CHANGE_THREADS) as pool:
        changes = list(pool.map(change, bench.layout.namespace_names()))
    log.info(
        f"{len(changes)} sources changed in {time.time() - started:.1f}s"
        + ("" if window is None else f", window {window:%H.%M} UTC")
    )
    return changes


def _answers(bench: Bench, operator: str, changes: list[Change], bookmark: int) -> dict[str, Any]:
    """Until every dependent carries the operator's answer: restarter's stamp, Reloader's
    restart (it has no windows). Latency of a dependent: from its own source's change."""
    dependents = bench.layout.dependents()
    predicates: dict[str, Callable[[Marks], bool]] = {}
    sent_of: dict[str, float] = {}
    for change in changes:
        answered = stamped_by(operator, change)
        for name in dependents[change.namespace]:
            predicates[name], sent_of[name] = answered, change.sent
    first = min(change.sent for change in changes)
    seen = bench.watcher.wait_each(predicates, first, PHASE_LIMIT, stall=STALL)
    requests = bench.audit.wait_quiet(bookmark)
    latencies = [at - sent_of[name] for name, at in seen.items()]
    last = max(seen.values(), default=math.nan)
    return {
        "sources": len(changes),
        "dependents": len(predicates),
        "answered": len(seen),
        "send_seconds": max(change.sent for change in changes) - first,
        "first_to_last_answer": last - first,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "per_second": len(seen) / (last - first) if seen else math.nan,
        "requests": dict(requests),
    }


def _window(
    bench: Bench, process: OperatorProcess, window: dt.datetime, answered: float
) -> dict[str, Any]:
    """Every dependent is due at the window's start: when is each restarted?"""
    start = window.timestamp()
    if answered >= start:
        log.warning("stamping ran past the window's start: raise --window-margin")
    time.sleep(max(0.0, start - time.time() - WAITING))
    waiting = vars(process.usage())
    waited_from = time.time()
    time.sleep(max(0.0, start - time.time() - 2))
    cpu_waiting = process.usage().cpu_seconds - waiting["cpu_seconds"]
    waited = time.time() - waited_from
    bookmark = bench.audit.offset()
    names = [name for names in bench.layout.dependents().values() for name in names]
    restarted = restarted_since(start)
    seen = bench.watcher.wait_each(
        dict.fromkeys(names, restarted), start - 1, PHASE_LIMIT, stall=STALL
    )
    requests = bench.audit.wait_quiet(bookmark)
    delays = [at - start for at in seen.values()]
    return {
        "window": f"{window:%H.%M}",
        "stamped_before_window": answered < start,
        "restarted": len(seen),
        "p50": percentile(delays, 0.50),
        "p99": percentile(delays, 0.99),
        "last": max(delays, default=math.nan),
        "per_second": len(seen) / max(max(delays), 1e-3) if delays else math.nan,
        "requests": dict(requests),
        "usage_waiting": waiting,
        "cpu_waiting_seconds": cpu_waiting,
        "waiting_seconds": waited,
    }


def _restarts(
    bench: Bench, operator: str, changes: list[Change], window: dt.datetime | None
) -> dict[str, Any]:
    """How many times each dependent was restarted for this run's change, as the harness's
    watch saw it: distinct new ``restartedAt`` values at or after the window's start
    (restarter), distinct ``last-reloaded-from`` values naming the new data (Reloader).
    Also restarts before the window (restarter must make none). Values are whole seconds:
    two restarts in one second would look like one here; the audit counts catch that."""
    first = min(change.sent for change in changes)
    history = bench.watcher.history(first - 1)
    counts: dict[str, int] = {}
    early = 0
    for change in changes:
        digest = reloader_hash(change.data, change.kind)
        for name in bench.layout.dependents()[change.namespace]:
            seen = history.get(name, [])
            if operator == RESTARTER:
                assert window is not None
                values = {m[RESTARTED_AT] for m in seen if RESTARTED_AT in m}
                late = {v for v in values if _epoch(v) >= window.timestamp()}
                early += len({v for v in values if first - 1 <= _epoch(v) < window.timestamp()})
                counts[name] = len(late)
            else:
                counts[name] = len({m[RELOADED_FROM] for m in seen if _names(m, digest)})
    off = {name: n for name, n in counts.items() if n != 1}
    return {
        "dependents": len(counts),
        "exactly_once": sum(1 for n in counts.values() if n == 1),
        "never": sum(1 for n in counts.values() if n == 0),
        "more_than_once": sum(1 for n in counts.values() if n > 1),
        "before_window": early,
        "examples": dict(sorted(off.items())[:10]),
    }


def _names(marks: Marks, digest: str) -> bool:
    try:
        source = json.loads(marks.get(RELOADED_FROM, ""))
    except ValueError:
        return False
    return isinstance(source, dict) and source.get("hash") == digest


def _epoch(rfc3339: str) -> float:
    return dt.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def _sampled(sampler: RssSampler, marks: dict[str, float]) -> dict[str, Any]:
    """The highest sampled RSS in each phase between two marks, and when the overall peak
    came (seconds after the first change)."""
    order: list[str] = ["started", "ready", "rested", "first_change", "answered"]
    order = [m for m in order if m in marks]
    order += [m for m in ("window", "last_restart", "end") if m in marks]
    phases = {
        f"{a}..{b}": peak
        for a, b in itertools.pairwise(order)
        if not math.isnan(peak := sampler.peak(marks[a], marks[b])[1])
    }
    at, rss = sampler.peak(marks["started"], marks.get("end", math.inf))
    first = marks.get("first_change", math.nan)
    return {
        "samples": len(sampler.samples),
        "peak_mb": rss,
        "peak_after_first_change_s": at - first,
        "phase_peaks_mb": phases,
    }


# -- the command ----------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run many-sources", description=__doc__)
    parser.add_argument(
        "--namespaces", type=int, default=1000, help="K: namespaces, one source each"
    )
    parser.add_argument("--deployments", type=int, default=10, help="D: dependents per namespace")
    parser.add_argument(
        "--operators",
        help=f"comma-separated, of {', '.join(OPERATORS)} (default: both when Reloader is built)",
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="secret",
        help="each namespace's source: a small Secret, or a ConfigMap bundle of PEM CA "
        "certificates (trust-manager's shape, --bundle-kib)",
    )
    parser.add_argument(
        "--bundle-kib", type=int, default=149, help="KiB of each bundle (default: %(default)s)"
    )
    parser.add_argument(
        "--first-sight",
        action="store_true",
        help="each run starts with no restarter records on the sources: its start is its "
        "first sight of them, as a new user's",
    )
    parser.add_argument(
        "--rest",
        type=float,
        default=10.0,
        help="seconds at rest after ready, then until the operator's CPU is quiet, before "
        "the change (default: %(default)s)",
    )
    parser.add_argument(
        "--no-window",
        action="store_true",
        help="restarter: the changes keep the sources' window 12 h away, so the run ends "
        "once every dependent is stamped (no window phase, no restarts counted)",
    )
    parser.add_argument(
        "--open-window",
        action="store_true",
        help="restarter: the sources' window opens in the minute of the changes, so each "
        "dependent restarts as it is stamped, as Reloader restarts on the change (the "
        "window phase's times then count from that minute's start)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per operator")
    parser.add_argument("--timer-interval", type=float, default=5.0, help="restarter's timer")
    parser.add_argument(
        "--window-margin",
        type=float,
        help="seconds from the changes to the window, rounded up to the minute "
        "(default: 180 + 0.05 per dependent)",
    )
    parser.add_argument(
        "--reloader-binary",
        type=lambda text: Path(text).expanduser(),
        default=RELOADER_BINARY,
        help=f"stakater/Reloader {RELOADER_VERSION} built from source (default: %(default)s)",
    )
    parser.add_argument(
        "--operator-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the operators, e.g. PYTHONPATH=<worktree>/src (repeatable)",
    )
    parser.add_argument(
        "--restarter-scope",
        choices=("selector", "cluster"),
        default="selector",
        help="restarter scoped by the namespaces' label (--namespace-selector, as Reloader), "
        "or watching every namespace (the cluster holds only the benchmark's)",
    )
    parser.add_argument(
        "--restarter-at",
        metavar="COMMIT",
        help="measure restarter as of this commit (its src/ exported into the workdir); "
        "default: this checkout, as it is",
    )
    parser.add_argument(
        "--memprofile",
        action="store_true",
        help="memray in restarter (allocations live at its peak) and its own 0.5 s samples",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy each Python operator over the whole run, all threads, each sample the "
        "one holding the GIL (speedscope files in the workdir)",
    )
    parser.add_argument("--workdir", type=Path, help="cluster and logs (default: a temp dir)")
    parser.add_argument(
        "--keep-cluster",
        action="store_true",
        help="leave the control plane running: a later run with the same --workdir reuses it "
        "and what it holds",
    )
    parser.add_argument("--docs", type=Path, default=DOCS, help="where the section goes")
    parser.add_argument(
        "--output", type=Path, default=DOCS / "many-sources-benchmark.json", help="raw results"
    )
    args = parser.parse_args(argv)
    args.operator_env = [tuple(pair.split("=", 1)) for pair in args.operator_env]
    return args


def _operators(args: argparse.Namespace) -> list[str]:
    built = os.access(args.reloader_binary, os.X_OK)
    if args.operators is None:
        return [RESTARTER, *([RELOADER] if built else [])]
    operators = [name.strip() for name in args.operators.split(",") if name.strip()]
    unknown = [name for name in operators if name not in OPERATORS]
    if unknown or not operators:
        sys.exit(f"bench/run many-sources: unknown operator(s) {unknown}; known: {OPERATORS}")
    if RELOADER in operators and not built:
        sys.exit(RELOADER_BUILD.format(binary=args.reloader_binary))
    return operators


def _git(*args: str, **kwargs: Any) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, check=True, **kwargs)
    return str(done.stdout.decode().strip())


def _code(args: argparse.Namespace) -> dict[str, Any]:
    """The restarter measured: a commit's src/ exported into the workdir (``--restarter-at``,
    put first on its PYTHONPATH), or this checkout, and whether its src/ differed from HEAD."""
    if args.restarter_at is None:
        return {
            "commit": _git("rev-parse", "HEAD"),
            "src_modified": bool(_git("status", "--porcelain", "src")),
        }
    commit = _git("rev-parse", "--verify", f"{args.restarter_at}^{{commit}}")
    target = args.workdir / f"restarter-{commit[:12]}"
    if not (target / "src").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "src"], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    env = dict(args.operator_env)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(target / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    args.operator_env = list(env.items())
    return {"commit": commit, "src_modified": False, "exported_to": str(target / "src")}


def main(argv: list[str]) -> int:
    if argv[:1] == ["report"]:
        paths = [Path(p) for p in argv[1:]] or [DOCS / "many-sources-benchmark.json"]
        commands = [json.loads(path.read_text()) for path in paths]
        outputs: list[Path | None] = list(paths)
        print(many_report.write(commands, DOCS, outputs))
        return 0
    args = parse(argv)
    args.started = time.strftime("%Y%m%dT%H%M%S")
    operators = _operators(args)
    # SIGTERM too must bring the control plane down (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args.workdir, cluster, running = reusable_cluster(args.workdir, "restarter-many-")
    bundle = args.bundle_kib if args.source == "configmap-bundle" else 0
    layout = Layout(args.namespaces, args.deployments, bundle, args.first_sight)
    results: dict[str, Any] = {
        "command": "bench/run many-sources " + shlex.join(argv),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "code": _code(args),
        "layout": {
            "namespaces": layout.namespaces,
            "deployments_per_namespace": layout.deployments,
            "source": args.source,
            "bundle_kib": layout.bundle_kib,
            "first_sight": layout.first_sight,
        },
        "parameters": {k: str(v) for k, v in vars(args).items()}
        | {"operators": ",".join(operators)},
        "runs": [],
    }
    if RELOADER in operators:
        results["reloader"] = {
            "binary": str(args.reloader_binary),
            "sha256": sha256(args.reloader_binary),
            "flags": reloader_flags(),
        }
    if not running:
        cluster.up()
    log.info(f"control plane {'reused' if running else 'up'} in {args.workdir}")
    try:
        client = api_client(cluster, CHANGE_THREADS + 8)
        objects = Objects(client, cluster)
        watcher = DeploymentWatcher(client, namespace=None).start()
        bench = Bench(args, cluster, objects, watcher, AuditLog(cluster.audit_log), layout)
        results["setup"] = many_setup.ensure(objects, watcher, layout)
        log.info("prepared: " + ", ".join(f"{k} {v:.0f}" for k, v in results["setup"].items()))
        for run in range(args.runs):
            # Alternate the order so that drift on a shared machine hits both alike.
            for operator in operators if run % 2 == 0 else operators[::-1]:
                result = run_once(bench, operator, run)
                results["runs"].append(result)
                log.info(many_report.one_line(result))
                _save(results, args.output)
        watcher.stop()
    finally:
        if not args.keep_cluster:
            cluster.down()
    results["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    _save(results, args.output)
    print(many_report.write([results], args.docs, [args.output]))
    return 0


def _save(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
