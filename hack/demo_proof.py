"""The demo's proof that a restart gave the app the new value, checked, not only shown.

A Deployment being rolled has pods of two ReplicaSets for a while: the old pod keeps
running (and printing the old value) until it has terminated. The proof therefore reads
the log of a pod of the Deployment's *current* ReplicaSet, found by the Deployment's
revision and named by its ``pod-template-hash``, and fails with a message that says what
that pod printed when it is not what the demo claims.

    demo_proof.py template-hash NAMESPACE DEPLOYMENT
        prints the pod-template-hash of the Deployment's current ReplicaSet
    demo_proof.py new-pod NAMESPACE DEPLOYMENT CONTAINER [--before HASH] --prints TEXT
                  [--not-prints TEXT] [--timeout SECONDS]
        exits 0 once the current ReplicaSet is not HASH (the one before a restart), has
        rolled out, and each of its pods printed TEXT and never the --not-prints text (the
        old value); else exits 1 saying why

The cluster is the one in $RESTARTER_CLUSTER_DIR (or --cluster-dir): its kubeconfig, and
its real node's pod logs, read with ``restarter-cluster logs`` (the apiserver cannot reach
the node's kubelet for ``kubectl logs``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

#: The Deployment controller's annotation numbering a Deployment and its ReplicaSets: the
#: current ReplicaSet carries the Deployment's number.
REVISION = "deployment.kubernetes.io/revision"
#: The label the Deployment controller puts on a ReplicaSet and its pods.
TEMPLATE_HASH = "pod-template-hash"

Object = Mapping[str, Any]


class ProofFailed(Exception):
    """A claim of the demo that the cluster does not bear out; the message says why."""


def current_replica_set(deployment: Object, replica_sets: Iterable[Object]) -> Object | None:
    """The Deployment's ReplicaSet of its current revision, or None before the controller
    made it (revision numbers only grow, so an older ReplicaSet never carries it)."""
    uid = deployment["metadata"]["uid"]
    revision = (deployment["metadata"].get("annotations") or {}).get(REVISION)
    if revision is None:
        return None
    for replica_set in replica_sets:
        owners = replica_set["metadata"].get("ownerReferences") or []
        annotations = replica_set["metadata"].get("annotations") or {}
        if any(o.get("uid") == uid for o in owners) and annotations.get(REVISION) == revision:
            return replica_set
    return None


def template_hash(replica_set: Object) -> str:
    return str(replica_set["metadata"]["labels"][TEMPLATE_HASH])


def rolled_out(deployment: Object) -> bool:
    """The controller saw the latest spec and every replica is of the current template and
    available: what ``kubectl rollout status`` waits for."""
    spec, status = deployment["spec"], deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    return bool(
        status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
        and status.get("updatedReplicas", 0) == wanted
        and status.get("availableReplicas", 0) >= wanted
    )


def pods_of(hash_: str, pods: Iterable[Object]) -> list[Object]:
    """The running pods of the ReplicaSet with this template hash that are not being
    deleted: never a pod of an older ReplicaSet still terminating beside them."""
    return [
        pod
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get(TEMPLATE_HASH) == hash_
        and pod["metadata"].get("deletionTimestamp") is None
        and (pod.get("status") or {}).get("phase") == "Running"
    ]


def printed_old(logs: Mapping[str, str], not_prints: str | None) -> str | None:
    """Why the new pods disprove the claim for good, or None: a pod that printed the old
    value read it when it started, and waiting will not change that."""
    for pod, log in logs.items():
        if not_prints is not None and not_prints in log:
            return f"pod {pod} printed {not_prints!r}, the old value: {log.strip()!r}"
    return None


def not_printed_yet(logs: Mapping[str, str], prints: str) -> str | None:
    """Why the new pods do not prove the claim yet (a log may lag its pod), or None."""
    for pod, log in logs.items():
        if prints not in log:
            return f"pod {pod} did not print {prints!r}; it printed {log.strip()!r}"
    return None


class Reader(Protocol):
    """What the proof reads from a cluster."""

    def objects(self, namespace: str, deployment: str) -> tuple[Object, list[Object], list[Object]]:
        """The Deployment, and the ReplicaSets and pods its selector matches."""
        ...

    def log(self, namespace: str, pod: str, container: str) -> str: ...


@dataclass(frozen=True)
class Cluster:
    """The local cluster: the API through its kubeconfig, the logs from its real node."""

    directory: Path

    def objects(self, namespace: str, deployment: str) -> tuple[Object, list[Object], list[Object]]:
        import kubernetes  # only the commands that talk to a cluster need the client

        kubeconfig = str(self.directory / "kubeconfig")
        api = kubernetes.config.new_client_from_config(kubeconfig)  # type: ignore[no-untyped-call]
        with api:
            apps = kubernetes.client.AppsV1Api(api)
            core = kubernetes.client.CoreV1Api(api)
            found = apps.read_namespaced_deployment(deployment, namespace)
            labels: dict[str, str] = found.spec.selector.match_labels or {}
            selector = ",".join(f"{k}={v}" for k, v in labels.items())
            replica_sets = apps.list_namespaced_replica_set(namespace, label_selector=selector)
            pods = core.list_namespaced_pod(namespace, label_selector=selector)
            as_dict: Callable[[Any], Object] = api.sanitize_for_serialization
            return (
                as_dict(found),
                [as_dict(r) for r in replica_sets.items],
                [as_dict(p) for p in pods.items],
            )

    def log(self, namespace: str, pod: str, container: str) -> str:
        done = subprocess.run(
            [_restarter_cluster(), "--dir", str(self.directory), "logs", namespace, pod, container],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ProofFailed(f"could not read the log of pod {pod}: {done.stderr.strip()}")
        return done.stdout


def _restarter_cluster() -> str:
    """``restarter-cluster`` of the same environment as this Python, else from PATH."""
    beside = Path(sys.executable).parent / "restarter-cluster"
    return str(beside) if beside.exists() else shutil.which("restarter-cluster") or "false"


def current_hash(cluster: Reader, namespace: str, deployment: str) -> str:
    found, replica_sets, _ = cluster.objects(namespace, deployment)
    current = current_replica_set(found, replica_sets)
    if current is None:
        raise ProofFailed(f"Deployment {namespace}/{deployment} has no current ReplicaSet yet")
    return template_hash(current)


def prove_new_pod(
    cluster: Reader,
    namespace: str,
    deployment: str,
    container: str,
    *,
    before: str | None,
    prints: str,
    not_prints: str | None,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> str:
    """Wait until the current ReplicaSet, if ``before`` is given one other than it, rolled
    out and its pods printed ``prints``; the name of the pod read. Raises ProofFailed with
    the last reason seen."""
    deadline = clock() + timeout
    while True:
        found, replica_sets, pods = cluster.objects(namespace, deployment)
        current = current_replica_set(found, replica_sets)
        if current is None:
            reason = f"Deployment {namespace}/{deployment} has no current ReplicaSet"
        elif template_hash(current) == before:
            reason = f"no ReplicaSet newer than pod-template-hash {before} (no restart)"
        elif not rolled_out(found):
            reason = f"ReplicaSet {template_hash(current)} has not rolled out"
        elif not (new_pods := pods_of(template_hash(current), pods)):
            reason = f"no running pod of ReplicaSet {template_hash(current)}"
        else:
            names = [str(p["metadata"]["name"]) for p in new_pods]
            logs = {name: cluster.log(namespace, name, container) for name in names}
            if old := printed_old(logs, not_prints):
                raise ProofFailed(f"ReplicaSet {template_hash(current)}: {old}")
            if (missing := not_printed_yet(logs, prints)) is None:
                return names[0]
            reason = f"ReplicaSet {template_hash(current)}: {missing}"
        if clock() > deadline:
            raise ProofFailed(f"after {timeout:.0f} s: {reason}")
        pause(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo_proof.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cluster-dir",
        type=Path,
        default=Path(os.environ.get("RESTARTER_CLUSTER_DIR", "/tmp/restarter-cluster")),
        help="the cluster's state directory (default $RESTARTER_CLUSTER_DIR)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    hash_command = sub.add_parser("template-hash", help="the current ReplicaSet's hash")
    hash_command.add_argument("namespace")
    hash_command.add_argument("deployment")
    new_pod = sub.add_parser("new-pod", help="a pod of a new ReplicaSet printed the new value")
    new_pod.add_argument("namespace")
    new_pod.add_argument("deployment")
    new_pod.add_argument("container")
    new_pod.add_argument("--before", help="the pod-template-hash before the restart")
    new_pod.add_argument("--prints", required=True, help="text the new pod must print")
    new_pod.add_argument("--not-prints", help="text it must not print (the old value)")
    new_pod.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    cluster = Cluster(args.cluster_dir)
    try:
        if args.command == "template-hash":
            print(current_hash(cluster, args.namespace, args.deployment))
            return 0
        pod = prove_new_pod(
            cluster,
            args.namespace,
            args.deployment,
            args.container,
            before=args.before,
            prints=args.prints,
            not_prints=args.not_prints,
            timeout=args.timeout,
        )
    except ProofFailed as failure:
        print(f"demo: FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"{pod} (pod-template-hash {current_hash(cluster, args.namespace, args.deployment)})")
    print(cluster.log(args.namespace, pod, args.container).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
