"""``bench/run window-memory``: what a window's restarts leave in restarter's memory.

Its own control plane. One Secret used by N Deployments (``--body realistic``: a Helm
chart's shape, with its last-applied configuration). restarter runs under tracemalloc
(``bench/memtrace``, 16 frames, from the moment it is ready; slow, so the figures are for
*where*, not *how fast*), pacing off. Each of ``--windows`` rounds: the Secret's data
changes and its window is set far enough ahead for every stamp to land first; once all N
wait, RSS and the live Python allocations are taken ("pending"); once all N restarted and
their marks are gone, again ("after"). Every snapshot is taken after a full garbage
collection. The report gives RSS and traced MiB per phase and, between consecutive phases,
the call stacks whose live memory grew most: memory kept per restarted workload shows
there, and whether a second window adds to it (a leak) or not (a cost paid once per
workload). ``--census`` counts the live objects by type instead (``BENCH_CENSUS``), at full
speed: which kinds of object a window leaves behind.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import logging
import math
import os
import signal
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes

from bench.control_plane import AuditedCluster, api_client, fresh_workdir, wait_until
from bench.processes import OperatorProcess
from bench.workload import deployment, realistic_deployment
from restarter.model import keys

log = logging.getLogger("bench.window_memory")
NAMESPACE = "bench-window"
SECRET = "shared"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MEMTRACE = Path(__file__).parent / "memtrace"
TOP = 12


def _body(name: str, shape: str) -> dict[str, Any]:
    body = (realistic_deployment if shape == "realistic" else deployment)(name, [SECRET])
    body["metadata"].pop("namespace", None)
    if shape == "realistic":
        body["metadata"]["annotations"][LAST_APPLIED] = json.dumps(body, separators=(",", ":"))
    return body


def _prepare(client: kubernetes.client.ApiClient, workloads: int, shape: str) -> list[str]:
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    labels = {keys.RESTART_AT_LABEL: "03.00"}
    core.create_namespaced_secret(
        NAMESPACE,
        {"metadata": {"name": SECRET, "labels": labels}, "stringData": {"ca.crt": "0"}},
    )
    names = [f"app-{i:05d}" for i in range(workloads)]
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(lambda n: apps.create_namespaced_deployment(NAMESPACE, _body(n, shape)), names)
        )
    return names


def _deployments(client: kubernetes.client.ApiClient) -> list[dict[str, Any]]:
    apps = kubernetes.client.AppsV1Api(client)
    found: list[dict[str, Any]] = []
    token = None
    while True:
        options: dict[str, Any] = {"limit": 500, "_preload_content": False}
        if token:
            options["_continue"] = token
        page = json.loads(apps.list_namespaced_deployment(NAMESPACE, **options).data)
        found += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            return found


def _pending(body: dict[str, Any]) -> bool:
    annotations = body["metadata"].get("annotations") or {}
    return any(key.startswith(keys.PENDING_MARK) for key in annotations)


def _restarted_at(body: dict[str, Any]) -> str | None:
    template = body["spec"]["template"].get("metadata") or {}
    return (template.get("annotations") or {}).get(keys.KUBECTL_RESTARTED_AT)


def _phase(process: OperatorProcess, trace: Path, phase: str, census: bool) -> dict[str, Any]:
    usage = vars(process.usage())
    if census:
        usage["traced_live_mb"] = math.nan
        _take_census(process, trace.with_name(f"census.{phase}.txt"))
    else:
        usage["traced_live_mb"] = process.dump_allocations(phase)
        snapshot = trace.with_name(trace.name + ".snapshot")
        snapshot.rename(trace.with_name(f"{trace.stem}.{phase}.snapshot"))
    usage["phase"] = phase
    log.info(json.dumps(usage))
    return usage


def _take_census(process: OperatorProcess, kept: Path) -> None:
    written = Path(process.env["BENCH_CENSUS"])
    written.unlink(missing_ok=True)
    os.kill(process.pid, signal.SIGUSR2)
    wait_until(written.exists, 600, "the census")
    written.rename(kept)


def _counts(path: Path) -> dict[str, int]:
    lines = path.read_text().splitlines()
    counts = {"(allocated blocks)": int(lines[0].split()[-1])}
    for line in lines[1:]:
        count, name = line.split("\t")
        counts[name] = int(count)
    return counts


def _census_growth(older: Path, newer: Path) -> list[str]:
    """The object types whose count grew most from ``older`` to ``newer``."""
    before, after = _counts(older), _counts(newer)
    grown = sorted(after, key=lambda name: before.get(name, 0) - after[name])
    return [
        f"{after[name] - before.get(name, 0):+9d} {name} (now {after[name]})"
        for name in grown[: 2 * TOP]
        if after[name] != before.get(name, 0)
    ]


def _growth(older: Path, newer: Path) -> list[str]:
    """The call stacks whose live memory grew most from ``older`` to ``newer``."""
    before = tracemalloc.Snapshot.load(str(older))
    after = tracemalloc.Snapshot.load(str(newer))
    lines = []
    for stat in after.compare_to(before, "traceback")[:TOP]:
        lines.append(
            f"{stat.size_diff / 1024:+9.0f} KiB {stat.count_diff:+8d} blocks "
            f"(now {stat.size / 1024:.0f} KiB)"
        )
        lines += ["      " + line for line in stat.traceback.format()[-10:]]
    return lines


def run(args: argparse.Namespace, cluster: AuditedCluster) -> dict[str, Any]:
    client = api_client(cluster)
    core = kubernetes.client.CoreV1Api(client)
    names = _prepare(client, args.workloads, args.body)
    log.info("created %d %s Deployments", len(names), args.body)
    trace = args.workdir / "restarter.allocations.txt"
    paths = [str(MEMTRACE), *filter(None, [args.src, os.environ.get("PYTHONPATH")])]
    env = {
        "PYTHONPATH": os.pathsep.join(paths),
        "BENCH_SAMPLE": str(args.workdir / "restarter.samples.tsv"),
    }
    if args.census:
        env["BENCH_CENSUS"] = str(args.workdir / "census.txt")
    else:
        env |= {"BENCH_TRACEMALLOC": str(trace), "BENCH_TRACE_FROM_SIGNAL": "1"}
    flags = ["--namespace", NAMESPACE, "--timer-interval", f"{args.timer_interval:g}"]
    flags += ["--max-in-flight", "0", "--max-per-minute", "0"]
    process = OperatorProcess.module(
        cluster, "restarter", flags, args.workdir / "restarter.log", env
    ).start(timeout=600)
    phases: list[dict[str, Any]] = []
    try:

        def recorded() -> bool:
            found = core.read_namespaced_secret(SECRET, NAMESPACE).metadata.annotations or {}
            return keys.CHECKSUM in found

        wait_until(recorded, 600, "first sight")
        phases.append(_phase(process, trace, "ready", args.census))
        for window in range(args.windows):
            before = {d["metadata"]["name"]: _restarted_at(d) for d in _deployments(client)}
            lead = 60 + args.stamp_seconds * len(names)
            start = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lead + 60)).replace(
                second=0, microsecond=0
            )
            core.patch_namespaced_secret(
                SECRET,
                NAMESPACE,
                {
                    "metadata": {"labels": {keys.RESTART_AT_LABEL: f"{start:%H.%M}"}},
                    "stringData": {"ca.crt": f"round-{window}-{time.time()}"},
                },
            )
            wait_until(lambda: all(map(_pending, _deployments(client))), lead, "every stamp")
            if dt.datetime.now(dt.UTC) >= start:
                raise RuntimeError("the stamps took past the window's start: raise --stamp-seconds")
            time.sleep(10)
            phases.append(_phase(process, trace, f"pending-{window}", args.census))

            def done(before: dict[str, str | None] = before) -> bool:
                found = _deployments(client)
                return all(
                    _restarted_at(d) != before[d["metadata"]["name"]] and not _pending(d)
                    for d in found
                )

            wait_until(done, 3600, "every restart and its marks cleared")
            time.sleep(15)
            phases.append(_phase(process, trace, f"after-{window}", args.census))
    finally:
        process.stop()
    growth = {}
    for older, newer in itertools.pairwise(phases):
        key = f"{older['phase']} → {newer['phase']}"
        if args.census:
            growth[key] = _census_growth(
                trace.with_name(f"census.{older['phase']}.txt"),
                trace.with_name(f"census.{newer['phase']}.txt"),
            )
        else:
            growth[key] = _growth(
                trace.with_name(f"{trace.stem}.{older['phase']}.snapshot"),
                trace.with_name(f"{trace.stem}.{newer['phase']}.snapshot"),
            )
    return {"phases": phases, "growth": growth}


def report(results: dict[str, Any], workloads: int) -> str:
    lines = ["| phase | RSS (MB) | traced live (MiB) | CPU (s) |", "|---|---|---|---|"]
    for phase in results["phases"]:
        traced = phase["traced_live_mb"]
        cell = "—" if math.isnan(traced) else f"{traced:.1f}"
        lines.append(
            f"| {phase['phase']} | {phase['rss_mb']:.0f} | {cell} | {phase['cpu_seconds']:.0f} |"
        )
    for key, stacks in results["growth"].items():
        lines += ["", f"## grown most, {key} ({workloads} workloads)", "", "```", *stacks, "```"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run window-memory", description=__doc__)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--windows", type=int, default=2, help="change-and-window rounds")
    parser.add_argument("--body", choices=("realistic", "small"), default="realistic")
    parser.add_argument("--timer-interval", type=float, default=5.0)
    parser.add_argument(
        "--stamp-seconds",
        type=float,
        default=0.15,
        help="time allowed per stamp (under tracemalloc) when setting the window",
    )
    parser.add_argument(
        "--census",
        action="store_true",
        help="count live objects by type at each phase instead of tracemalloc (full speed)",
    )
    parser.add_argument("--src", help="a src/ to measure instead of this checkout's")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args.workdir = fresh_workdir(args.workdir, "restarter-window-memory-")
    cluster = AuditedCluster(directory=args.workdir / "cluster", nodes=2)
    cluster.up()
    try:
        results = run(args, cluster)
    finally:
        cluster.down()
    results["command"] = "bench/run window-memory " + " ".join(argv)
    (args.workdir / "window-memory.json").write_text(json.dumps(results, indent=1) + "\n")
    text = report(results, args.workloads)
    (args.workdir / "window-memory.md").write_text(text + "\n")
    print(text)
    return 0
