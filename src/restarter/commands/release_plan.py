"""What ``restarter release-finalizers`` does, decided without the API: options and patches.

It runs as Helm's pre-delete hook: stop the operator first (its own shutdown releases
what it can while its RBAC still exists), then remove our finalizer from every workload
that still carries it, so none of them hangs on deletion once the operator is gone.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from restarter.model.windows import ScheduleError, parse_length

COMMAND = "release-finalizers"
DESCRIPTION = "Stop the operator, then remove its finalizer from every workload."


class ReleaseOptionsError(ValueError):
    """A command-line value that cannot be used; nothing has been changed yet."""


@dataclass(frozen=True)
class ReleaseOptions:
    operator_namespace: str
    """Namespace of the operator's own Deployment (the Helm release's namespace)."""

    operator_deployment: str
    """Name of the operator's Deployment, scaled to 0 before anything is released."""

    namespaces: tuple[str, ...] = ()
    """Namespaces whose workloads are released; empty means every namespace."""

    timeout: dt.timedelta = dt.timedelta(seconds=60)
    """How long to wait for the operator's pods to be gone; past it, release nothing."""

    kubeconfig: str | None = None
    """A kubeconfig file to use; None: in-cluster credentials in a pod, else the default
    kubeconfig (``$KUBECONFIG``, then ``~/.kube/config``)."""

    context: str | None = None
    """A context of that kubeconfig, as kubectl's ``--context``; None: its current one."""


def parse_options(argv: Sequence[str]) -> ReleaseOptions:
    """Options from the subcommand's arguments (everything after ``release-finalizers``)."""
    parser = argparse.ArgumentParser(
        prog=f"restarter {COMMAND}",
        description=DESCRIPTION,
    )
    parser.add_argument("--operator-namespace", required=True)
    parser.add_argument("--operator-deployment", required=True)
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        dest="namespaces",
        help="release workloads only in this namespace (repeatable); default all",
    )
    parser.add_argument("--timeout", default="60s", help="wait for the operator's pods: 60s, 2m")
    parser.add_argument(
        "--kubeconfig", help="default: in a pod its ServiceAccount, else $KUBECONFIG"
    )
    parser.add_argument("--context", help="default: the kubeconfig's current context")
    args = parser.parse_args(argv)
    try:
        timeout = parse_length(args.timeout)
    except ScheduleError:
        raise ReleaseOptionsError(
            f"timeout {args.timeout!r} is not like 60s or 2m (more than 0, at most 24h)"
        ) from None
    return ReleaseOptions(
        operator_namespace=args.operator_namespace,
        operator_deployment=args.operator_deployment,
        namespaces=tuple(dict.fromkeys(args.namespaces or ())),
        timeout=timeout,
        kubeconfig=args.kubeconfig,
        context=args.context,
    )
