"""``bench/run pacing``: N workloads due at one window, restarted with and without pacing.

Its own control plane. One Secret, N Deployments of one replica that read it (kwok makes
their pods Ready, so a rollout takes real time). Each run: the Secret's window is set to
the next minute at least 45 s ahead, restarter starts, the Secret's data changes (every
Deployment is stamped and waits), and at the window's start all N are due at once. The
harness's own watch measures, per run: restarts per second (N over window start → last
restart), the most restarts by restarter whose rollout was incomplete at once (kubectl's
rules, until first complete), window start → first and → last restart, and counts
Deployments restarted not at all (lost) or more than once (twice). Modes alternate order
between runs; the figures are medians with min-max.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import shlex
import signal
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes

from bench.control_plane import AuditedCluster, api_client, fresh_workdir, wait_until
from bench.processes import OperatorProcess
from bench.stats import median, spread
from restarter.model import keys
from restarter.model.kinds import progress
from restarter.model.progress import Progress

log = logging.getLogger("bench.pacing")
NAMESPACE = "bench-pacing"
SECRET = "shared-cert"
DOCS = Path(__file__).resolve().parents[1] / "docs"
BEGIN, END = "<!-- pacing:begin -->", "<!-- pacing:end -->"


class Watch:
    """Every restartedAt each Deployment shows (with the time seen), and the incomplete
    rollouts of restarts by restarter, counted until they first complete."""

    def __init__(self, client: kubernetes.client.ApiClient) -> None:
        self.client = client
        self.restarts: dict[str, dict[str, float]] = defaultdict(dict)  # value → first seen
        self.incomplete: set[str] = set()
        self.completed: set[tuple[str, str]] = set()
        self.max_in_flight = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        apps = kubernetes.client.AppsV1Api(self.client)
        while True:
            stream = kubernetes.watch.Watch().stream(
                apps.list_namespaced_deployment, NAMESPACE, timeout_seconds=300
            )
            for event in stream:
                self._see(self.client.sanitize_for_serialization(event["object"]))

    def _see(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        template = (body["spec"]["template"].get("metadata") or {}).get("annotations") or {}
        value = template.get(keys.KUBECTL_RESTARTED_AT)
        with self.lock:
            if value:
                self.restarts[name].setdefault(value, time.time())
            if value and (name, value) not in self.completed:
                if progress("deployments", body) is Progress.COMPLETE:
                    self.completed.add((name, value))
                    self.incomplete.discard(name)
                else:
                    self.incomplete.add(name)
            self.max_in_flight = max(self.max_in_flight, len(self.incomplete))

    def reset(self) -> None:
        with self.lock:
            self.max_in_flight = len(self.incomplete)

    def since(self, instant: float) -> dict[str, list[float]]:
        """Per Deployment, the times its new restartedAt values were seen after ``instant``."""
        with self.lock:
            return {
                name: sorted(t for t in values.values() if t >= instant)
                for name, values in self.restarts.items()
            }


def _deployment(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example/app:1",
                            "envFrom": [{"secretRef": {"name": SECRET}}],
                        }
                    ]
                },
            },
        },
    }


def _prepare(client: kubernetes.client.ApiClient, workloads: int) -> list[str]:
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_secret(
        NAMESPACE, {"metadata": {"name": SECRET}, "stringData": {"tls.key": "0"}}
    )
    names = [f"app-{i:04d}" for i in range(workloads)]
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(lambda n: apps.create_namespaced_deployment(NAMESPACE, _deployment(n)), names)
        )
    _wait(lambda: _all_available(apps, names), 600, "every Deployment available")
    return names


def _all_available(apps: kubernetes.client.AppsV1Api, names: list[str]) -> bool:
    items = apps.list_namespaced_deployment(NAMESPACE).items
    done = {
        d.metadata.name
        for d in items
        if (d.status.available_replicas or 0) == 1
        and (d.status.updated_replicas or 0) == 1
        and (d.status.replicas or 0) == 1
        and d.status.observed_generation == d.metadata.generation
    }
    return done >= set(names)


def _wait(check: Any, timeout: float, what: str) -> None:
    wait_until(check, timeout, what, interval=0.5)


def _window() -> dt.datetime:
    """The next whole minute at least 45 s from now."""
    start = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=45 + 60)).replace(
        second=0, microsecond=0
    )
    return start


def run_once(
    cluster: AuditedCluster,
    client: kubernetes.client.ApiClient,
    watch: Watch,
    names: list[str],
    mode: str,
    limits: tuple[int, int],
    args: argparse.Namespace,
    run: int,
) -> dict[str, Any]:
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    window = _window()
    core.patch_namespaced_secret(
        SECRET, NAMESPACE, {"metadata": {"labels": {keys.RESTART_AT_LABEL: f"{window:%H.%M}"}}}
    )
    flags = [
        "--namespace",
        NAMESPACE,
        "--timer-interval",
        f"{args.timer_interval:g}",
        "--max-in-flight",
        str(limits[0]),
        "--max-per-minute",
        str(limits[1]),
    ]
    log_path = args.workdir / f"restarter-{mode}-r{run}.log"
    process = OperatorProcess.module(cluster, "restarter", flags, log_path).start()
    try:
        secret = lambda: core.read_namespaced_secret(SECRET, NAMESPACE).metadata  # noqa: E731
        _wait(lambda: keys.CHECKSUM in (secret().annotations or {}), 120, "first sight")
        core.patch_namespaced_secret(SECRET, NAMESPACE, {"stringData": {"tls.key": f"{mode}{run}"}})

        def all_stamped() -> bool:
            items = apps.list_namespaced_deployment(NAMESPACE).items
            return all(
                any(key.startswith(keys.PENDING_MARK) for key in d.metadata.annotations or {})
                for d in items
            )

        _wait(all_stamped, 300, "every Deployment stamped")
        start = window.timestamp()
        if time.time() >= start:
            raise RuntimeError("stamping took past the window's start; rerun")
        time.sleep(max(0.0, start - time.time()))
        watch.reset()
        _wait(lambda: sum(1 for t in watch.since(start).values() if t) == len(names), 1800, "all")
        time.sleep(2 * args.timer_interval)  # a second restart, if any, would come now
        seen = watch.since(start)
        firsts = sorted(times[0] for times in seen.values() if times)
        last = firsts[-1]
        result = {
            "mode": mode,
            "run": run,
            "limits": {"max_in_flight": limits[0], "max_per_minute": limits[1]},
            "workloads": len(names),
            "window_start": window.isoformat(),
            "first_restart_s": round(firsts[0] - start, 2),
            "last_restart_s": round(last - start, 2),
            "restarts_per_second": round(len(names) / max(last - start, 1e-3), 2),
            "max_in_flight": watch.max_in_flight,
            "lost": sum(1 for name in names if not seen.get(name)),
            "twice": sum(1 for name in names if len(seen.get(name, [])) > 1),
        }
    finally:
        process.stop()
    # Settled: the deployment controller has acted on every restart. Availability is not
    # waited for: the next run needs only the controller to be done with this one.
    _wait(lambda: _all_rolled(apps), 600, "rollouts settled")
    return result


def _all_rolled(apps: kubernetes.client.AppsV1Api) -> bool:
    return all(
        d.status.observed_generation == d.metadata.generation
        and (d.status.updated_replicas or 0) == 1
        for d in apps.list_namespaced_deployment(NAMESPACE).items
    )


def _cell(values: list[float]) -> str:
    low, high = spread(values)
    return f"{median(values):g} ({low:g}-{high:g})" if len(values) > 1 else f"{values[0]:g}"


def write(results: dict[str, Any], docs: Path) -> str:
    """The pacing table in docs/benchmarks-history.md (between its markers) and a JSON file."""
    (docs / "pacing-benchmark.json").write_text(json.dumps(results, indent=1) + "\n")
    rows = [
        "| mode | limits (K in flight, R per minute) | restarts/s | most in flight | "
        "window start → first restart (s) | → last restart (s) | lost | twice |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in ("unpaced", "paced"):
        runs = [r for r in results["runs"] if r["mode"] == mode]
        if not runs:
            continue
        limits = runs[0]["limits"]
        described = (
            "off (0, 0)"
            if mode == "unpaced"
            else f"{limits['max_in_flight'] or 'off'}, {limits['max_per_minute'] or 'off'}"
        )
        cells = [
            _cell([float(r[key]) for r in runs])
            for key in ("restarts_per_second", "max_in_flight", "first_restart_s", "last_restart_s")
        ]
        lost = sum(r["lost"] for r in runs)
        twice = sum(r["twice"] for r in runs)
        rows.append(f"| {mode} | {described} | " + " | ".join(cells) + f" | {lost} | {twice} |")
    table = "\n".join(
        [
            BEGIN,
            f"`{results['command']}` — {results['workloads']} Deployments due at one window, "
            f"{len(results['runs']) // 2} run(s) per mode, median (min-max); "
            f"{results['started']} on {results['machine']}.",
            "",
            *rows,
            END,
        ]
    )
    page = docs / "benchmarks-history.md"
    text = page.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + table + text[text.index(END) + len(END) :]
    else:
        text += "\n## Pacing: 500 workloads due at one window\n\n" + table + "\n"
    page.write_text(text)
    return table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run pacing", description=__doc__)
    parser.add_argument("--workloads", type=int, default=500)
    parser.add_argument("--runs", type=int, default=2, help="runs per mode")
    parser.add_argument("--max-in-flight", type=int, default=20, help="K of the paced runs")
    parser.add_argument("--max-per-minute", type=int, default=240, help="R of the paced runs")
    parser.add_argument("--timer-interval", type=float, default=5.0)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    # SIGTERM too must bring the control plane down (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args.workdir = fresh_workdir(args.workdir, "restarter-pacing-")
    cluster = AuditedCluster(directory=args.workdir / "cluster", nodes=2)
    cluster.up()
    results: dict[str, Any] = {
        "command": "bench/run pacing " + shlex.join(argv),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{__import__('os').cpu_count()} CPUs",
        "workloads": args.workloads,
        "runs": [],
    }
    try:
        client = api_client(cluster)
        names = _prepare(client, args.workloads)
        watch = Watch(client)
        modes = {"unpaced": (0, 0), "paced": (args.max_in_flight, args.max_per_minute)}
        for run in range(args.runs):
            order = list(modes) if run % 2 == 0 else list(modes)[::-1]
            for mode in order:
                result = run_once(cluster, client, watch, names, mode, modes[mode], args, run)
                log.info(json.dumps(result))
                results["runs"].append(result)
    finally:
        cluster.down()
    print(write(results, args.docs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
