"""``restarter release-finalizers``: stop the operator, then free every workload it held.

Helm's pre-delete hook runs it before the operator's RBAC goes: scaling the operator to
0 lets its own clean shutdown run with its permissions, and once its pods are gone
nothing adds the finalizer back, so removing the rest is final. Marks stay.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from restarter.commands.release_plan import (
    COMMAND,
    ReleaseOptions,
    ReleaseOptionsError,
    parse_options,
)
from restarter.restarting.finalizer_release import FinalizerReleaser, ReleaseFailed, failure
from restarter.services.kube.api import Api
from restarter.services.kube.connecting import KubeconfigError, load_client
from restarter.services.kube.errors import ApiError

POLL_SECONDS = 1.0


def _say(message: str) -> None:
    print(message, flush=True)


def stop_operator(api: Api, options: ReleaseOptions) -> None:
    """Scale the operator to 0 and wait until its pods are gone (its shutdown ran)."""
    namespace, name = options.operator_namespace, options.operator_deployment
    try:
        selector = api.scale_deployment(namespace, name, 0)
    except ApiError as error:
        raise failure(f"scaling deployment {namespace}/{name} to 0", error) from None
    if selector is None:
        _say(f"operator deployment {namespace}/{name} not found: nothing to stop")
        return
    _say(f"scaled deployment {namespace}/{name} to 0 replicas")
    if not selector:
        raise ReleaseFailed(f"deployment {namespace}/{name} reports no pod selector")
    started = time.monotonic()
    deadline = started + options.timeout.total_seconds()
    while True:
        try:
            left = api.pod_names(namespace, selector)
        except ApiError as error:
            raise failure(f"listing the operator's pods in {namespace}", error) from None
        if not left:
            _say(f"operator pods gone after {time.monotonic() - started:.0f}s")
            return
        if time.monotonic() > deadline:
            waited = options.timeout.total_seconds()
            raise ReleaseFailed(
                f"operator pods still present after {waited:g}s: "
                f"{', '.join(left)}; released nothing, since a running operator adds "
                "the finalizer back. Run again once they are gone."
            )
        time.sleep(POLL_SECONDS)


def main(argv: Sequence[str]) -> int:
    """Exit 0 when nothing carries the finalizer any more, 1 on failure, 2 on bad options."""
    try:
        options = parse_options(argv)
    except ReleaseOptionsError as error:
        print(f"restarter {COMMAND}: {error}", file=sys.stderr)
        return 2
    try:
        api = Api(load_client(options.kubeconfig, options.context))
    except KubeconfigError as error:
        print(f"restarter {COMMAND}: cannot load the kubeconfig: {error}", file=sys.stderr)
        return 1
    try:
        stop_operator(api, options)
        released = FinalizerReleaser(api, options.namespaces, _say).release_all()
    except ReleaseFailed as error:
        print(f"restarter {COMMAND}: {error}", file=sys.stderr)
        return 1
    scope = ", ".join(options.namespaces) or "all namespaces"
    _say(
        f"released the finalizer of {len(released)} workload(s) in {scope}; "
        "their pending-restart marks stay"
    )
    return 0
