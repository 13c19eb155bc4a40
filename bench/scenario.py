"""One benchmark run: an operator started against the prepared namespace, then measured.

Phases, in order: start-up until a probe change is handled; single-Secret changes with a
few dependents each; unrelated (unlabelled) Secret churn; one change that every
Deployment depends on; and, for restarter, the window in which all of them restart (the
naive baseline and Reloader restart at once: they have no windows).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import apiserver_rate, workload
from bench.audit import AuditLog
from bench.control_plane import api_client
from bench.loading import Objects, concurrently
from bench.metrics import ApiserverMetrics
from bench.processes import OperatorProcess
from bench.stats import percentile
from bench.watching import RELOADED_FROM, RESTARTED_AT, DeploymentWatcher, Marks
from bench.workload import (
    NAMESPACE,
    PROBE_DEPLOYMENT,
    PROBE_SECRET,
    RELOADER_AUTO,
    SHARED_SECRET,
)
from restarter.model import keys
from restarter.model.references import SECRET
from restarter_cluster.cluster import Cluster

log = logging.getLogger("bench")

RESTARTER = "restarter"
NAIVE = "naive"
RELOADER = "reloader"
OPERATORS = (RESTARTER, NAIVE, RELOADER)
#: Reloader's command line besides the binary. ``--namespaces``: scoped mode, it lists and
#: watches Secrets and ConfigMaps of ``bench`` only (like ``--namespace`` for the other two;
#: ``--namespace-selector`` and ``--namespaces-to-ignore`` apply only when it watches every
#: namespace). ``--reload-strategy annotations``: a restart is one pod-template annotation
#: patch, like the others' ``restartedAt`` (the default strategy adds an env var instead).
RELOADER_FLAGS = ("--namespaces", NAMESPACE, "--reload-strategy", "annotations")
#: Reloader logs this when it starts its Secret controller (before the initial listing).
RELOADER_STARTED = "Starting Controller to watch resource type: secrets"
#: Reloader serves metrics and liveness on this port (fixed in its source, no flag).
RELOADER_PORT = 9090
#: Stamps are whole epoch seconds: changes are spaced so that two never share one.
SPACING = 1.1
#: Seconds an operator gets to handle its first change before the run is given up.
READY_TIMEOUT = 900.0
#: Seconds over which the operator's idle CPU rate is measured.
IDLE = 5.0
#: Seconds before the window opens when "waiting" is measured (memory, then CPU until 2 s
#: before the window): every workload pending, none due.
WAITING = 22.0
#: Seconds after the last restart before "end" is measured: what the allocator keeps.
AFTER = 20.0


@dataclass(frozen=True)
class Plan:
    deployments: int
    labelled: int
    noise_secrets: int
    noise_configmaps: int
    changes: int
    churn: int
    timer_interval: float
    far_window: str
    profile: bool = False
    memtrace: bool = False
    memprofile: bool = False
    operator_env: tuple[tuple[str, str], ...] = ()
    fanout: bool = True
    reloader_binary: Path | None = None
    body: str = "small"
    apiserver_rate: bool = False


@dataclass(frozen=True)
class Change:
    """One update of a Secret's data sent by the harness."""

    secret: str
    sent: float
    """Wall-clock seconds just before the update was sent."""
    rv: str
    """The Secret's resourceVersion after the update."""
    data: dict[str, str]
    namespace: str = NAMESPACE
    kind: str = SECRET
    """The source's kind as restarter names it (``secret``, ``configmap``)."""


@dataclass
class Harness:
    cluster: Cluster
    objects: Objects
    watcher: DeploymentWatcher
    audit: AuditLog
    metrics: ApiserverMetrics
    workdir: Path
    versions: dict[str, int] = field(default_factory=dict)

    def change_secret(self, name: str) -> Change:
        """New data for a Secret."""
        version = self.versions.get(name, 0) + 1
        self.versions[name] = version
        data = workload.secret_data(name, version)
        sent = time.time()
        rv = self.objects.patch_secret(name, {"data": data})
        return Change(name, sent, rv, data)


# -- preparing the namespace ----------------------------------------------------------------


def prepare(harness: Harness, plan: Plan, existing: int) -> dict[str, float]:
    """Create what the plan needs beyond ``existing`` Deployments; return seconds per step."""
    objects = harness.objects
    objects.ensure_namespace()
    timings: dict[str, float] = {}
    if existing == 0:
        timings["noise secrets"] = objects.create_all(
            workload.noise_secret(i) for i in range(plan.noise_secrets)
        )
        timings["noise configmaps"] = objects.create_all(
            workload.noise_configmap(i) for i in range(plan.noise_configmaps)
        )
        labelled = [workload.labelled_name(i) for i in range(plan.labelled)]
        timings["labelled secrets"] = objects.create_all(
            workload.labelled_secret(name, plan.far_window)
            for name in [*labelled, SHARED_SECRET, PROBE_SECRET]
        )
        objects.create(workload.deployment(PROBE_DEPLOYMENT, [PROBE_SECRET]))
    timings["deployments"] = objects.create_all(
        (
            workload.workload_deployment(i, plan.labelled, plan.body)
            for i in range(existing, plan.deployments)
        ),
        apply=plan.body == "realistic",
    )
    started = time.monotonic()
    # (the controller's catching up grows with N: 10 000 more after a window of 10 000
    # restarts took over 15 minutes on a loaded 2-core machine)
    wait_until_observed(objects, timeout=max(900.0, 0.1 * plan.deployments))
    timings["controllers settle"] = time.monotonic() - started
    return timings


def wait_until_observed(objects: Objects, timeout: float = 900) -> None:
    """Until the deployment controller has caught up with every Deployment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lagging = [
            d
            for d in objects.deployments()
            if d.get("status", {}).get("observedGeneration") != d["metadata"]["generation"]
        ]
        if not lagging:
            return
        time.sleep(2)
    raise RuntimeError("the deployment controller did not catch up")


def reset(harness: Harness) -> int:
    """Every run starts from the same state; return how many objects needed a patch.

    Labelled Secrets get the checksum and digests of their current data, as if restarter had
    seen every earlier change (the naive and Reloader runs change them too), and restarter's
    marks, pending label and finalizer leave every Deployment. What the naive baseline and
    Reloader leave behind (an annotation naming a Secret's resourceVersion, a pod-template
    annotation naming a Secret's hash) is kept: the watcher only counts values that answer
    a change sent in the current run, and neither operator reads it back.
    """
    objects = harness.objects
    labelled = [name for name in harness.versions if not name.startswith("noise-")]
    for name in labelled:
        data = workload.secret_data(name, harness.versions[name])
        objects.patch_secret(name, {"metadata": {"annotations": workload.recorded(name, data)}})
    patches = []
    for deployment in objects.deployments():
        metadata = deployment["metadata"]
        annotations = metadata.get("annotations") or {}
        marks = [k for k in annotations if k.startswith(keys.MARK_PREFIXES)]
        finalizers = metadata.get("finalizers") or []
        pending = keys.PENDING_LABEL in (metadata.get("labels") or {})
        has_auto = annotations.get(RELOADER_AUTO) == "true"  # Deployments made before it was added
        if not marks and keys.FINALIZER not in finalizers and not pending and has_auto:
            continue
        patch: dict[str, Any] = {"metadata": {"annotations": dict.fromkeys(marks)}}
        if not has_auto:
            patch["metadata"]["annotations"][RELOADER_AUTO] = "true"
        if pending:
            patch["metadata"]["labels"] = {keys.PENDING_LABEL: None}
        if keys.FINALIZER in finalizers:
            patch["metadata"]["finalizers"] = [f for f in finalizers if f != keys.FINALIZER]
        patches.append((metadata["name"], patch))
    concurrently(lambda item: harness_patch(objects, item), patches)
    return len(labelled) + len(patches)


def harness_patch(objects: Objects, item: tuple[str, dict[str, Any]]) -> None:
    objects.patch_deployment(*item)


# -- what "handled" looks like for each operator -----------------------------------------------


def stamped_by(operator: str, change: Change) -> Callable[[Marks], bool]:
    """Predicate: the Deployment carries the operator's answer to this change."""
    if operator == RESTARTER:
        key = keys.pending_key(change.kind, change.secret)
        floor = int(change.sent)

        def restarter_stamped(marks: Marks) -> bool:
            value = marks.get(key, "")
            return value.isdigit() and int(value) >= floor

        return restarter_stamped

    if operator == RELOADER:
        expected = {
            "type": change.kind.upper(),
            "name": change.secret,
            "namespace": change.namespace,
        }
        digest = workload.reloader_hash(change.data, change.kind)

        def reloader_stamped(marks: Marks) -> bool:
            try:
                source = json.loads(marks.get(RELOADED_FROM, ""))
            except ValueError:
                return False
            if not isinstance(source, dict) or source.get("hash") != digest:
                return False
            return all(source.get(k) == v for k, v in expected.items())

        return reloader_stamped

    def naive_stamped(marks: Marks) -> bool:
        return marks.get(f"naive.bench/secret.{change.secret}") == change.rv

    return naive_stamped


def restarted_since(window_start: float) -> Callable[[Marks], bool]:
    def restarted(marks: Marks) -> bool:
        value = marks.get(RESTARTED_AT)
        return value is not None and _epoch(value) >= window_start

    return restarted


def _epoch(rfc3339: str) -> float:
    return dt.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


# -- one run ------------------------------------------------------------------------------------


def run_once(harness: Harness, plan: Plan, operator: str, run: int) -> dict[str, Any]:
    """Start the operator, measure every phase, stop it; return the raw figures."""
    removed = reset(harness)
    wait_until_observed(harness.objects)
    harness.watcher.forget()
    process = _process(harness, plan, operator, run)
    result: dict[str, Any] = {
        "operator": operator,
        "deployments": plan.deployments,
        "run": run,
        "reset_patches": removed,
    }
    process.start(timeout=600 if plan.memtrace or plan.memprofile else 60)
    if plan.profile:
        process.profile(harness.workdir / f"{operator}-n{plan.deployments}-r{run}.speedscope.json")
    try:
        result["ready_seconds"] = _ready(harness, process, operator)
        result["usage_ready"] = vars(process.usage())
        if math.isnan(result["ready_seconds"]):
            result["usage_end"] = result["usage_ready"]
            return result  # never ready: nothing else can be measured
        result["changes"] = [
            _small_change(harness, plan, operator, run, k) for k in range(plan.changes)
        ]
        result["churn"] = _churn(harness, plan, process, run)
        if plan.fanout:
            window = _next_window(plan) if operator == RESTARTER else None
            result["fanout"] = _fanout(harness, plan, operator, process, window)
            result["usage_stamped"] = _phase(process, plan, "stamped")
            if window is not None:
                result["window"] = _window(harness, plan, process, window)
                result["usage_window"] = _phase(process, plan, "window")
                time.sleep(AFTER)
        result["usage_end"] = _phase(process, plan, "end")
    finally:
        process.stop()
    if plan.apiserver_rate and operator == RESTARTER:
        # After the operator stopped, with the harness's watchers still running.
        dependents = [workload.deployment_name(i) for i in range(plan.deployments)]
        result["apiserver_rate"] = apiserver_rate.measure(
            api_client(harness.cluster, apiserver_rate.THREADS + 8), dependents
        )
    return result


def _phase(process: OperatorProcess, plan: Plan, phase: str) -> dict[str, Any]:
    """RSS and CPU now and, with ``--memtrace``, the live Python allocations (MiB)."""
    usage: dict[str, Any] = vars(process.usage())
    if plan.memtrace:
        usage["traced_live_mb"] = process.dump_allocations(phase)
    return usage


def _process(harness: Harness, plan: Plan, operator: str, run: int) -> OperatorProcess:
    stem = harness.workdir / f"{operator}-n{plan.deployments}-r{run}"
    env = dict(plan.operator_env)
    if plan.memtrace or plan.memprofile:
        # Before any given path (--operator-env PYTHONPATH=... picks the code measured).
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parent / "memtrace"), *filter(None, [env.get("PYTHONPATH")])]
        )
    if plan.memtrace:
        env["BENCH_TRACEMALLOC"] = f"{stem}.allocations.txt"
    if plan.memprofile and operator == RESTARTER:
        env |= {"BENCH_MEMRAY": f"{stem}.memray.bin", "BENCH_SAMPLE": f"{stem}.samples.tsv"}
    log_path = stem.with_suffix(".log")
    if operator == RESTARTER:
        # Pacing off: these phases measure how fast restarter can go (bench/run pacing
        # measures it paced).
        # RESTARTER_NAMESPACE_SELECTOR in --operator-env scopes it instead of --namespace.
        scope = [] if env.get("RESTARTER_NAMESPACE_SELECTOR") else ["--namespace", NAMESPACE]
        args = [*scope, "--timer-interval", f"{plan.timer_interval:g}"]
        args += ["--max-in-flight", "0", "--max-per-minute", "0"]
        return OperatorProcess.module(harness.cluster, "restarter", args, log_path, env)
    if operator == RELOADER:
        if plan.reloader_binary is None:
            raise RuntimeError("no Reloader binary given")
        check_port_free(RELOADER_PORT)
        command = [str(plan.reloader_binary), *RELOADER_FLAGS]
        return OperatorProcess(
            harness.cluster, command, log_path, env, started_line=RELOADER_STARTED, python=False
        )
    if operator != NAIVE:
        raise ValueError(f"unknown operator {operator!r} (known: {', '.join(OPERATORS)})")
    args = ["--namespace", NAMESPACE]
    return OperatorProcess.module(harness.cluster, "bench.naive", args, log_path, env)


def check_port_free(port: int) -> None:
    """Reloader exits (after starting) when its fixed port is taken: say so before."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as error:
            raise RuntimeError(
                f"port {port} is in use ({error}); Reloader listens on it and would exit"
            ) from error


def _ready(harness: Harness, process: OperatorProcess, operator: str) -> float:
    """Seconds from start until a change of the probe Secret is handled (NaN: never).

    A change made while the operator still lists may arrive in its initial listing and
    not as a change, so the probe is changed again every few seconds until one is
    handled; an answer to any of those changes counts (handling one may take longer
    than the interval between them).
    """
    attempts: list[Change] = []
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if not process.alive():
            log.warning(f"{operator} exited before it was ready")
            return math.nan
        attempts.append(harness.change_secret(PROBE_SECRET))
        first_sent = attempts[0].sent
        seen = harness.watcher.wait([PROBE_DEPLOYMENT], _any_of(operator, attempts), first_sent, 3)
        if seen:
            return seen[PROBE_DEPLOYMENT] - process.started_at
    log.warning(f"{operator} handled no probe change within {READY_TIMEOUT:.0f}s")
    return math.nan


def _any_of(operator: str, attempts: list[Change]) -> Callable[[Marks], bool]:
    predicates = [stamped_by(operator, change) for change in attempts]
    return lambda marks: any(predicate(marks) for predicate in predicates)


def _small_change(harness: Harness, plan: Plan, operator: str, run: int, k: int) -> dict[str, Any]:
    """Change one labelled Secret with a few dependents; time until all are stamped."""
    index = (run * plan.changes + k) % min(plan.labelled, plan.deployments)
    secret = workload.labelled_name(index)
    dependents = workload.dependents_of(index, plan.deployments, plan.labelled)
    time.sleep(SPACING)
    bookmark, listed = harness.audit.offset(), harness.metrics.listed_bytes("deployments")
    change = harness.change_secret(secret)
    seen = harness.watcher.wait(dependents, stamped_by(operator, change), change.sent, 120)
    requests = harness.audit.wait_quiet(bookmark)
    return {
        "dependents": len(dependents),
        "stamped": len(seen),
        "latency": max(seen.values()) - change.sent if seen else math.nan,
        "requests": dict(requests),
        "listed_kb": (harness.metrics.listed_bytes("deployments") - listed) / 1024,
    }


def _churn(harness: Harness, plan: Plan, process: OperatorProcess, run: int) -> dict[str, Any]:
    """Change the data of unlabelled Secrets nobody uses; the operator's CPU and requests.

    The operator's idle CPU rate (its timers) is measured first and subtracted.
    """
    names = [f"noise-{(run * plan.churn + i) % plan.noise_secrets:06d}" for i in range(plan.churn)]
    idle_started, idle_cpu = time.monotonic(), process.usage().cpu_seconds
    time.sleep(IDLE)
    idle_rate = (process.usage().cpu_seconds - idle_cpu) / (time.monotonic() - idle_started)
    bookmark, listed = harness.audit.offset(), harness.metrics.listed_bytes("deployments")
    started, before = time.monotonic(), process.usage().cpu_seconds
    concurrently(harness.change_secret, names)
    cpu = _settle_cpu(process, quiet=idle_rate * 2 + 0.05)
    elapsed = time.monotonic() - started
    return {
        "updates": len(names),
        "cpu_seconds": max(0.0, cpu - before - idle_rate * elapsed),
        "idle_cpu_per_s": idle_rate,
        "requests": dict(harness.audit.operator_requests(bookmark)),
        "listed_kb": (harness.metrics.listed_bytes("deployments") - listed) / 1024,
    }


def _settle_cpu(process: OperatorProcess, quiet: float, timeout: float = 600) -> float:
    """Wait until the operator spends under ``quiet`` CPU seconds per 2 s; return its CPU."""
    deadline = time.monotonic() + timeout
    previous = process.usage().cpu_seconds
    while True:
        time.sleep(2)
        current = process.usage().cpu_seconds
        if current - previous < quiet or time.monotonic() > deadline:
            return current
        previous = current


def _next_window(plan: Plan) -> dt.datetime:
    """A window start far enough ahead for every Deployment to be stamped before it."""
    # 30 s, plus a stamp rate of 33/s (restarter stamps at 90/s or more here, 50/s under
    # --memprofile): N = 20 000 waits 11 min for its window, not 20.
    margin = dt.timedelta(seconds=30 + 0.03 * plan.deployments)
    ahead = dt.datetime.now(dt.UTC) + margin
    return ahead.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)


def _fanout(
    harness: Harness,
    plan: Plan,
    operator: str,
    process: OperatorProcess,
    window: dt.datetime | None,
) -> dict[str, Any]:
    """Change the Secret every Deployment uses; per-dependent latencies and requests."""
    if window is not None:
        # Metadata only: restarter must not act on it; the stamps below carry the window.
        label = {keys.RESTART_AT_LABEL: f"{window:%H.%M}"}
        harness.objects.patch_secret(SHARED_SECRET, {"metadata": {"labels": label}})
    dependents = [workload.deployment_name(i) for i in range(plan.deployments)]
    time.sleep(SPACING)
    bookmark = harness.audit.offset()
    cpu_before = process.usage().cpu_seconds
    change = harness.change_secret(SHARED_SECRET)
    sent = change.sent
    timeout = 120 + 0.5 * plan.deployments
    seen = harness.watcher.wait(dependents, stamped_by(operator, change), sent, timeout)
    cpu_stamped = process.usage().cpu_seconds
    requests = harness.audit.wait_quiet(bookmark)
    latencies = [at - sent for at in seen.values()]
    # The naive baseline's and Reloader's stamp is their restart (a pod-template patch):
    # when each dependent restarted, for the plot of restarts over time (bench/plots.py).
    restarts = {} if window is not None else {"restarts_since_change_s": offsets(seen, sent)}
    return {
        "dependents": len(dependents),
        "stamped": len(seen),
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies, default=math.nan),
        "cpu_seconds": cpu_stamped - cpu_before,
        "requests": dict(requests),
        "stamped_before_window": None
        if window is None
        else sent + max(latencies, default=0) < window.timestamp(),
    } | restarts


def _window(
    harness: Harness, plan: Plan, process: OperatorProcess, window: dt.datetime
) -> dict[str, Any]:
    """Every Deployment is due in the same window: when is each restarted?"""
    start = window.timestamp()
    dependents = [workload.deployment_name(i) for i in range(plan.deployments)]
    time.sleep(max(0.0, start - time.time() - WAITING))
    waiting = _phase(process, plan, "waiting")
    waited_from = time.time()
    time.sleep(max(0.0, start - time.time() - 2))
    # CPU over the seconds just waited: every workload pending, none due.
    cpu_waiting = process.usage().cpu_seconds
    waited = time.time() - waited_from
    bookmark = harness.audit.offset()
    timeout = (start - time.time()) + 120 + 0.5 * plan.deployments
    seen = harness.watcher.wait(dependents, restarted_since(start), start - 1, timeout)
    requests = harness.audit.wait_quiet(bookmark)
    delays = [at - start for at in seen.values()]
    last = max(seen.values(), default=math.nan)
    return {
        "window": f"{window:%H.%M}",
        "restarted": len(seen),
        "p50": percentile(delays, 0.50),
        "p99": percentile(delays, 0.99),
        "max": max(delays, default=math.nan),
        "throughput_per_s": len(seen) / (last - start) if seen else math.nan,
        "restarts_since_start_s": offsets(seen, start),
        "requests": dict(requests),
        "usage_waiting": waiting,
        "cpu_waiting_seconds": cpu_waiting - waiting["cpu_seconds"],
        "waiting_seconds": waited,
    }


def offsets(seen: dict[str, float], origin: float) -> list[float]:
    """When each dependent was seen, in seconds since ``origin`` (0.1 s, sorted): the
    restarts over time, compact (a list of N numbers)."""
    return sorted(round(at - origin, 1) for at in seen.values())
