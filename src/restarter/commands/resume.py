"""``restarter resume``: let a halted change through to the rest of its dependents.

It writes ``restarter.io/resume: <change id>`` on the source, with the user's kubeconfig;
the operator then marks the change released and the rest restart in their windows. It
resumes only the change halted now: a later change of the same source is judged afresh.
Exit codes: 0 when resumed (or nothing was halted), 1 when the cluster cannot be read or
written, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from restarter.model import keys, waves
from restarter.model.waves import HALTED
from restarter.services.kube.api import Api
from restarter.services.kube.connecting import KubeconfigError, client_from_kubeconfig
from restarter.services.kube.errors import ApiError

COMMAND = "resume"
DESCRIPTION = "Let a halted change of a Secret or ConfigMap through to the rest of its dependents."

#: ``secret/db``, ``configmap/flags``, as kubectl names them.
_KINDS = {
    "secret": "secret",
    "secrets": "secret",
    "configmap": "configmap",
    "configmaps": "configmap",
    "cm": "configmap",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"restarter {COMMAND}", description=DESCRIPTION)
    parser.add_argument("source", nargs="?", help="secret/NAME or configmap/NAME")
    parser.add_argument(
        "--rollout-group",
        metavar="GROUP",
        help="every halted source labelled restarter.io/rollout-group=GROUP instead (in the "
        "namespace, or with -A in all)",
    )
    parser.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    parser.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    parser.add_argument("--context", help="default: the kubeconfig's current context")
    return parser


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (args.source is None) == (args.rollout_group is None):
        print(
            "restarter resume: give secret/NAME, configmap/NAME or --rollout-group", file=sys.stderr
        )
        return 2
    kind, name = None, ""
    if args.source is not None:
        kind_text, _, name = args.source.partition("/")
        kind = _KINDS.get(kind_text.lower())
        if kind is None or not name:
            wrong = f"{args.source!r} is not secret/NAME or configmap/NAME"
            print(f"restarter resume: {wrong}", file=sys.stderr)
            return 2
    try:
        client, context_namespace = client_from_kubeconfig(args.kubeconfig, args.context)
    except KubeconfigError as error:
        where = args.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        print(f"restarter resume: cannot load the kubeconfig {where}: {error}", file=sys.stderr)
        return 1
    api = Api(client)
    namespace = None if args.all_namespaces else args.namespace or context_namespace
    if kind is None:
        return _resume_group(api, args.rollout_group, namespace)
    return _resume(api, kind, namespace or context_namespace, name)


def _resume_group(api: Api, group: str, namespace: str | None) -> int:
    """Every source of the group (by its label) whose change is halted."""
    where = f"in namespace {namespace}" if namespace else "in any namespace"
    label = f"{keys.ROLLOUT_GROUP}={group}"
    try:
        found = [
            (kind, metadata)
            for kind in ("secret", "configmap")
            for metadata in api.labelled_names(kind, namespace, label)
        ]
    except ApiError as error:
        print(
            f"restarter resume: cannot list {label} {where}: {error.describe()}",
            file=sys.stderr,
        )
        return 1
    halted = [
        (kind, metadata)
        for kind, metadata in found
        if (record := waves.read_record(metadata.get("annotations"))) and record.state == HALTED
    ]
    if not halted:
        print(f"rollout group {group} {where}: no source of it is halted; nothing to resume")
        return 0
    failed = 0
    for kind, metadata in halted:
        failed |= _resume(api, kind, metadata.get("namespace", ""), metadata.get("name", ""))
    return failed


def _resume(api: Api, kind: str, namespace: str, name: str) -> int:
    what = f"{kind}/{name} in namespace {namespace}"
    try:
        found = api.read_source_metadata(kind, namespace, name)
        if found is None:
            print(f"restarter resume: {what} not found", file=sys.stderr)
            return 1
        record = waves.read_record((found.get("metadata") or {}).get("annotations"))
        if record is None or record.state != HALTED:
            state = (
                "no change of it is halted"
                if record is None
                else f"its change {record.change} is not halted "
                f"({record.state or 'its first wave is being judged'})"
            )
            print(f"{what}: {state}; nothing to resume")
            return 0
        api.patch_source(
            kind, namespace, name, {"metadata": {"annotations": {keys.RESUME: record.change}}}
        )
    except ApiError as error:
        print(f"restarter resume: {what}: {error.describe()}", file=sys.stderr)
        return 1
    print(
        f"{what}: change {record.change} resumed (halted because {record.why}); its other "
        "dependents restart in their windows"
    )
    return 0
