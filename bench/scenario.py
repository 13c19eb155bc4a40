"""One benchmark run: an operator started against the prepared namespace, then measured.

Phases, in order: start-up until a probe change is handled; single-Secret changes with a
few dependents each; unrelated (unlabelled) Secret churn; one change that every
Deployment depends on; and, for restarter, the window in which all of them restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import workload
from bench.audit import AuditLog
from bench.loading import Objects, concurrently
from bench.metrics import ApiserverMetrics
from bench.processes import OperatorProcess
from bench.stats import percentile
from bench.watching import RESTARTED_AT, DeploymentWatcher, Marks
from bench.workload import NAMESPACE, PROBE_DEPLOYMENT, PROBE_SECRET, SHARED_SECRET
from restarter import keys
from restarter.checksums import checksum
from restarter.references import SECRET
from restarter_cluster.cluster import Cluster

log = logging.getLogger("bench")

RESTARTER = "restarter"
NAIVE = "naive"
#: Stamps are whole epoch seconds: changes are spaced so that two never share one.
SPACING = 1.1
#: Seconds an operator gets to handle its first change before the run is given up.
READY_TIMEOUT = 900.0
#: Seconds over which the operator's idle CPU rate is measured.
IDLE = 5.0


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
    operator_env: tuple[tuple[str, str], ...] = ()
    fanout: bool = True


@dataclass
class Harness:
    cluster: Cluster
    objects: Objects
    watcher: DeploymentWatcher
    audit: AuditLog
    metrics: ApiserverMetrics
    workdir: Path
    versions: dict[str, int] = field(default_factory=dict)

    def change_secret(self, name: str) -> tuple[float, str]:
        """New data for a Secret; return (wall time sent, new resourceVersion)."""
        version = self.versions.get(name, 0) + 1
        self.versions[name] = version
        sent = time.time()
        rv = self.objects.patch_secret(name, {"data": workload.secret_data(name, version)})
        return sent, rv


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
        workload.workload_deployment(i, plan.labelled) for i in range(existing, plan.deployments)
    )
    started = time.monotonic()
    wait_until_observed(objects)
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

    Labelled Secrets get the checksum of their current data, as if restarter had seen
    every earlier change (the naive runs change them too), and restarter's marks and
    finalizer leave every Deployment.
    """
    objects = harness.objects
    labelled = [name for name in harness.versions if not name.startswith("noise-")]
    for name in labelled:
        data = workload.secret_data(name, harness.versions[name])
        objects.patch_secret(name, {"metadata": {"annotations": {keys.CHECKSUM: checksum(data)}}})
    prefixes = (keys.PENDING_RESTART + "/", keys.RESTART_AT + "/")
    patches = []
    for deployment in objects.deployments():
        metadata = deployment["metadata"]
        marks = [k for k in metadata.get("annotations") or {} if k.startswith(prefixes)]
        finalizers = metadata.get("finalizers") or []
        if not marks and keys.FINALIZER not in finalizers:
            continue
        patch: dict[str, Any] = {"metadata": {"annotations": dict.fromkeys(marks)}}
        if keys.FINALIZER in finalizers:
            patch["metadata"]["finalizers"] = [f for f in finalizers if f != keys.FINALIZER]
        patches.append((metadata["name"], patch))
    concurrently(lambda item: harness_patch(objects, item), patches)
    return len(labelled) + len(patches)


def harness_patch(objects: Objects, item: tuple[str, dict[str, Any]]) -> None:
    objects.patch_deployment(*item)


# -- what "handled" looks like for each operator -----------------------------------------------


def stamped_by(operator: str, secret: str, sent: float, rv: str) -> Callable[[Marks], bool]:
    """Predicate: the Deployment carries the operator's answer to this change of ``secret``."""
    if operator == RESTARTER:
        key = keys.pending_key(SECRET, secret)
        floor = int(sent)

        def restarter_stamped(marks: Marks) -> bool:
            value = marks.get(key, "")
            return value.isdigit() and int(value) >= floor

        return restarter_stamped

    def naive_stamped(marks: Marks) -> bool:
        return marks.get(f"naive.bench/secret.{secret}") == rv

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
    process.start(timeout=600 if plan.memtrace else 60)
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
            if window is not None:
                result["window"] = _window(harness, plan, window)
        result["usage_end"] = vars(process.usage())
        if plan.memtrace:
            process.dump_allocations()
    finally:
        process.stop()
    return result


def _process(harness: Harness, plan: Plan, operator: str, run: int) -> OperatorProcess:
    stem = harness.workdir / f"{operator}-n{plan.deployments}-r{run}"
    env = dict(plan.operator_env)
    if plan.memtrace:
        env |= {
            "PYTHONPATH": str(Path(__file__).parent / "memtrace"),
            "BENCH_TRACEMALLOC": f"{stem}.allocations.txt",
        }
    log_path = stem.with_suffix(".log")
    if operator == RESTARTER:
        args = ["--namespace", NAMESPACE, "--timer-interval", f"{plan.timer_interval:g}"]
        return OperatorProcess(harness.cluster, "restarter", args, log_path, env)
    args = ["--namespace", NAMESPACE]
    return OperatorProcess(harness.cluster, "bench.naive", args, log_path, env)


def _ready(harness: Harness, process: OperatorProcess, operator: str) -> float:
    """Seconds from start until a change of the probe Secret is handled (NaN: never).

    A change made while the operator still lists may arrive in its initial listing and
    not as a change, so the probe is changed again every few seconds until one is
    handled; an answer to any of those changes counts (handling one may take longer
    than the interval between them).
    """
    attempts: list[tuple[float, str]] = []
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        attempts.append(harness.change_secret(PROBE_SECRET))
        first_sent = attempts[0][0]
        seen = harness.watcher.wait([PROBE_DEPLOYMENT], _any_of(operator, attempts), first_sent, 3)
        if seen:
            return seen[PROBE_DEPLOYMENT] - process.started_at
    log.warning(f"{operator} handled no probe change within {READY_TIMEOUT:.0f}s")
    return math.nan


def _any_of(operator: str, attempts: list[tuple[float, str]]) -> Callable[[Marks], bool]:
    predicates = [stamped_by(operator, PROBE_SECRET, sent, rv) for sent, rv in attempts]
    return lambda marks: any(predicate(marks) for predicate in predicates)


def _small_change(harness: Harness, plan: Plan, operator: str, run: int, k: int) -> dict[str, Any]:
    """Change one labelled Secret with a few dependents; time until all are stamped."""
    index = (run * plan.changes + k) % min(plan.labelled, plan.deployments)
    secret = workload.labelled_name(index)
    dependents = workload.dependents_of(index, plan.deployments, plan.labelled)
    time.sleep(SPACING)
    bookmark, listed = harness.audit.offset(), harness.metrics.listed_bytes("deployments")
    sent, rv = harness.change_secret(secret)
    seen = harness.watcher.wait(dependents, stamped_by(operator, secret, sent, rv), sent, 120)
    requests = harness.audit.wait_quiet(bookmark)
    return {
        "dependents": len(dependents),
        "stamped": len(seen),
        "latency": max(seen.values()) - sent if seen else math.nan,
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
    margin = dt.timedelta(seconds=30 + 0.06 * plan.deployments)
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
    sent, rv = harness.change_secret(SHARED_SECRET)
    timeout = 120 + 0.5 * plan.deployments
    seen = harness.watcher.wait(
        dependents, stamped_by(operator, SHARED_SECRET, sent, rv), sent, timeout
    )
    cpu_stamped = process.usage().cpu_seconds
    requests = harness.audit.wait_quiet(bookmark)
    latencies = [at - sent for at in seen.values()]
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
    }


def _window(harness: Harness, plan: Plan, window: dt.datetime) -> dict[str, Any]:
    """Every Deployment is due in the same window: when is each restarted?"""
    start = window.timestamp()
    dependents = [workload.deployment_name(i) for i in range(plan.deployments)]
    time.sleep(max(0.0, start - time.time() - 2))
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
        "requests": dict(requests),
    }
