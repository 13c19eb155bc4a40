"""``restarter plan``: list pending workloads with the user's kubeconfig, read-only.

It needs only get/list on Deployments, StatefulSets and DaemonSets. Exit codes: 0 on
success (also when nothing is pending), 1 when the cluster cannot be read, 2 on bad flags.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from restarter.commands import plan_holds, planning
from restarter.commands.plan_at import parse_at
from restarter.model.gates import GateSettings
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.model.windows import ScheduleError
from restarter.services.kube import requesting
from restarter.services.kube.api import Api
from restarter.services.kube.connecting import KubeconfigError, client_from_kubeconfig
from restarter.services.kube.errors import ApiError, NoAnswer
from restarter.services.kube.reading import Reader
from restarter.services.options import option
from restarter.services.settings import Settings, SettingsError, gate_arguments, gates_of

COMMAND = "plan"
DESCRIPTION = "List pending workloads: the sources they wait for and their next restart."

#: The operator's option the plan mirrors: read from the same variable, in the same way.
HOLD = option("--hold")


class PlanError(RuntimeError):
    """The cluster could not be read; the message is one line for the user."""


@dataclass(frozen=True)
class PlanOptions:
    namespace: str | None
    """``-n``; None means the kubeconfig context's namespace, or ``default``."""

    all_namespaces: bool
    """``-A``: list every namespace."""

    output: str
    """``table`` or ``json``."""

    kubeconfig: str | None
    """A kubeconfig file; None follows ``$KUBECONFIG`` and then ``~/.kube/config``."""

    context: str | None = None
    """A context of the kubeconfig, as kubectl's ``--context``; None: its current context."""

    hold: str = ""
    """The operator's ``--hold`` reason, like its ``RESTARTER_HOLD``: every restart held."""

    at: dt.datetime | None = None
    """``--at``: the instant the plan is shown as of (holds still as of now); None: now."""

    gates: GateSettings = field(default_factory=GateSettings)
    """The operator's gates (``--gate-*``, ``RESTARTER_GATE_*``): shown as of now."""


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"restarter {COMMAND}",
        description=DESCRIPTION,
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    scope.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    parser.add_argument("--context", help="default: the kubeconfig's current context")
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="show the plan as of this instant: 2026-03-29T03:00+02:00, or a local time in "
        "a named zone, '2026-03-29 03:00 Europe/Warsaw' (holds are shown as of now, alerts "
        "are not predicted); default: now",
    )
    parser.add_argument(
        "--hold",
        default=HOLD.from_environment(env),
        help="the operator's --hold reason, shown as holding every restart; as the operator's",
    )
    gate_arguments(parser, env)
    return parser


def parse_options(argv: Sequence[str], env: Mapping[str, str]) -> PlanOptions:
    """Flags, then RESTARTER_* variables; argparse exits 2 on unknown flags, SettingsError
    or ScheduleError says what is wrong with a value."""
    args = _parser(env).parse_args(argv)
    return PlanOptions(
        namespace=args.namespace,
        all_namespaces=args.all_namespaces,
        output=args.output,
        kubeconfig=args.kubeconfig,
        context=args.context,
        hold=HOLD.parse(args.hold),
        at=None if args.at is None else parse_at(args.at),
        gates=gates_of(args),
    )


def _connect(kubeconfig: str | None, context: str | None) -> tuple[Api, str]:
    """An Api from the kubeconfig's context, and that context's namespace (or ``default``)."""
    try:
        client, namespace = client_from_kubeconfig(kubeconfig, context)
    except KubeconfigError as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise PlanError(f"cannot load the kubeconfig {where}: {error}") from None
    return Api(client), namespace


def list_pending(api: Reader, namespace: str | None) -> list[tuple[str, dict[str, Any]]]:
    """Every workload of the kinds restarter restarts, with its resource plural (Rollouts
    only where their CRD is installed)."""
    found = []
    for plural in WORKLOAD_KINDS:
        where = f"in namespace {namespace}" if namespace else "in any namespace"
        try:
            if not KINDS[plural].built_in and not api.served(plural):
                continue
            found += [(plural, item) for item in api.list_workloads(plural, namespace)]
        except NoAnswer as error:
            raise PlanError(f"cannot reach the API server: {error.describe()}") from None
        except ApiError as error:
            raise PlanError(f"cannot list {plural} {where}: {error.describe()}") from None
    return found


def render(rows: list[planning.PlanRow], namespace: str | None, output: str) -> str:
    """The rows as ``output``; the table shows namespaces only when listing them all."""
    if output == "json":
        return planning.to_json(rows)
    if not rows:
        where = f"in namespace {namespace}" if namespace else "in any namespace"
        return f"no pending workloads {where}"
    return planning.to_table(rows, with_namespace=namespace is None)


def _unreadable_namespace(namespace: str, why: str) -> None:
    print(
        f"restarter plan: cannot read namespace {namespace} ({why}): a hold set on it is not shown",
        file=sys.stderr,
    )


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    try:
        options = parse_options(argv, os.environ if env is None else env)
    except (ScheduleError, SettingsError) as error:
        print(f"restarter plan: {error}", file=sys.stderr)
        return 2
    # A request given up on is this command's one line of error; the retries before it
    # (the operator's log warns of each) would only bury it.
    logging.getLogger(requesting.__name__).setLevel(logging.ERROR)
    try:
        api, context_namespace = _connect(options.kubeconfig, options.context)
        namespace = None if options.all_namespaces else options.namespace or context_namespace
        workloads = list_pending(api, namespace)
    except PlanError as error:
        print(f"restarter plan: {error}", file=sys.stderr)
        return 1
    now = options.at or dt.datetime.now(dt.UTC).replace(microsecond=0)
    hold_of = plan_holds.HoldsAsOfNow(api, options.hold, _unreadable_namespace, options.gates)
    defaults = Settings()
    rows = planning.plan(workloads, now, defaults.timezone, defaults.window_length, hold_of.hold_of)
    if options.at is not None and options.output == "table":
        print(f"as of {options.at:%Y-%m-%d %H:%M:%S} UTC (holds as of now)")
    print(render(rows, namespace, options.output))
    states = hold_of.states(namespace or "") if options.output == "table" and rows else []
    if states and (options.gates.enabled or any(state != "clear" for _, state in states)):
        # What a restart asks before it starts, in the operator's order, as of now: shown
        # when gates are configured or one of them holds.
        print("\nblockers, in order (as of now):")
        for name, state in states:
            print(f"  {name:<8} {state}")
    return 0
