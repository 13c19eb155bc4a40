"""``restarter-cluster up|down|env|status|registry``: the local control plane from the shell."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from restarter_cluster import node
from restarter_cluster.argo_rollouts import ArgoRollouts
from restarter_cluster.binaries import MissingBinaries
from restarter_cluster.cert_manager import CertManager, CertManagerError
from restarter_cluster.cluster import STATE_FILE, Cluster, ClusterError, process_alive
from restarter_cluster.registry import Registry, RegistryError

DEFAULT_DIR = Path(
    os.environ.get("RESTARTER_CLUSTER_DIR", Path(tempfile.gettempdir()) / "restarter-cluster")
)


def _up(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    if (directory / STATE_FILE).exists():
        running = Cluster.attach(directory)
        if running.pids and all(process_alive(pid) for pid in running.pids.values()):
            print(f"already running; export KUBECONFIG={running.kubeconfig}")
            return 0
        running.down()
    shutil.rmtree(directory, ignore_errors=True)
    started = time.monotonic()
    cluster = Cluster(directory=directory, nodes=args.nodes, real_node=args.real_node).up(
        timeout=args.timeout
    )
    real = f" and the real node {node.NAME}" if cluster.real_node else ""
    print(
        f"control plane ready in {time.monotonic() - started:.1f}s: {cluster.server}, "
        f"{cluster.nodes} kwok nodes{real}"
    )
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def _node(args: argparse.Namespace) -> int:
    cluster = Cluster.attach(args.dir)
    if cluster.real_node:
        print(f"the real node {node.NAME} is already up")
        return 0
    started = time.monotonic()
    cluster.add_real_node(timeout=args.timeout)
    print(
        f"real node {node.NAME} Ready in {time.monotonic() - started:.1f}s; pods land on it "
        f"with nodeSelector {node.NODE_LABEL[0]}={node.NODE_LABEL[1]} and its toleration; "
        f"container output under {node.RealNode(cluster).pod_logs}"
    )
    return 0


def _logs(args: argparse.Namespace) -> int:
    cluster = Cluster.attach(args.dir)
    if not cluster.real_node:
        print("no real node runs (kwok's pods print nothing)", file=sys.stderr)
        return 1
    print(node.RealNode(cluster).log(args.namespace, args.pod, args.container))
    return 0


def _down(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    if not (directory / STATE_FILE).exists():
        print(f"nothing running in {directory}")
        return 0
    cluster = Cluster.attach(directory)
    for controller in (CertManager.attach(cluster), ArgoRollouts.attach(cluster)):
        if controller:
            controller.stop()
    cluster.down()
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)
    print("stopped")
    return 0


def _env(args: argparse.Namespace) -> int:
    cluster = Cluster.attach(args.dir)
    for key, value in cluster.env().items():
        print(f"export {key}={value}")
    return 0


def _cert_manager(args: argparse.Namespace) -> int:
    cluster = Cluster.attach(args.dir)
    if CertManager.attach(cluster):
        print("cert-manager already running")
        return 0
    started = time.monotonic()
    running = CertManager(cluster).start()
    print(
        f"cert-manager {running.pid} ready in {time.monotonic() - started:.1f}s "
        f"(CRDs installed, controller log {running.log_path}); `down` stops it"
    )
    return 0


def _registry(args: argparse.Namespace) -> int:
    """Start the cluster's registry; with --publish, push the image and chart to it and
    print shell assignments of what was pushed (for ``eval``)."""
    running = Registry(Cluster.attach(args.dir)).up()
    values = {"REGISTRY": running.host, "REGISTRY_AUTH": str(running.auth_file)}
    if args.publish:
        published = running.publish()
        values |= {"CHART": published.chart, "CHART_VERSION": published.version}
        values |= {"IMAGE": published.repository, "IMAGE_DIGEST": published.digest}
    for key, value in values.items():
        print(f"{key}={shlex.quote(value)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    cluster = Cluster.attach(args.dir)
    states = {name: process_alive(pid) for name, pid in cluster.pids.items()}
    print(json.dumps({"server": cluster.server, "running": states}, indent=2))
    return 0 if states and all(states.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="restarter-cluster", description=__doc__)
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"state directory (default {DEFAULT_DIR}, or $RESTARTER_CLUSTER_DIR)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start etcd, apiserver, controller-manager, scheduler, kwok")
    up.add_argument("--nodes", type=int, default=2, help="simulated nodes (default 2)")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for readiness")
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real node (kubelet, containerd, runc) that runs the built images",
    )
    up.set_defaults(run=_up)
    real = sub.add_parser("node", help="start the real node beside a running control plane")
    real.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for Ready")
    real.set_defaults(run=_node)
    logs = sub.add_parser(
        "logs", help="what a container on the real node printed (read on the node itself)"
    )
    logs.add_argument("namespace")
    logs.add_argument("pod")
    logs.add_argument("container")
    logs.set_defaults(run=_logs)
    down = sub.add_parser("down", help="stop every process and delete the state directory")
    down.add_argument("--keep", action="store_true", help="keep the directory (logs)")
    down.set_defaults(run=_down)
    sub.add_parser("env", help="print export KUBECONFIG=...").set_defaults(run=_env)
    sub.add_parser("status", help="show which components run").set_defaults(run=_status)
    sub.add_parser(
        "cert-manager", help="install cert-manager's CRDs and start its controller (no webhook)"
    ).set_defaults(run=_cert_manager)
    registry = sub.add_parser(
        "registry",
        help="start an OCI registry on loopback (htpasswd), reachable from the real node",
    )
    registry.add_argument(
        "--publish", action="store_true", help="push the image and the chart (hack/release.sh)"
    )
    registry.set_defaults(run=_registry)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (
        MissingBinaries,
        ClusterError,
        node.NodeError,
        CertManagerError,
        RegistryError,
        FileNotFoundError,
    ) as error:
        print(f"restarter-cluster: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
