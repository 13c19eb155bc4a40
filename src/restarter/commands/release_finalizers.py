"""``restarter release-finalizers``: stop the operator, then free every workload it held.

Helm's pre-delete hook runs it before the operator's RBAC goes: scaling the operator to
0 lets its own clean shutdown run with its permissions, and once its pods are gone
nothing adds the finalizer back, so removing the rest is final. Marks stay.
"""

from __future__ import annotations

import json
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException

from restarter.commands.release_plan import (
    COMMAND,
    WORKLOAD_KINDS,
    ReleaseOptions,
    ReleaseOptionsError,
    parse_options,
    release_patch,
)
from restarter.model import bodies, keys
from restarter.model.references import ROLLOUTS, WORKLOAD_APIS
from restarter.runtime import kube

JSON_PATCH = "application/json-patch+json"
#: A workload whose finalizers keep changing under us is retried this many times.
RELEASE_PASSES = 3
POLL_SECONDS = 1.0
PAGE = 500

T = TypeVar("T")


class ReleaseFailed(RuntimeError):
    """A step failed; the message names the step and the API's answer."""


def _say(message: str) -> None:
    print(message, flush=True)


def _api_call(step: str, call: Callable[[], T]) -> T:
    """Run one request (transient failures retried); turn an API error into ReleaseFailed."""
    try:
        return kube.retrying(call, "request")
    except ApiException as error:
        raise _failure(step, error) from None


def _failure(step: str, error: ApiException) -> ReleaseFailed:
    try:
        detail = json.loads(error.body or "{}").get("message") or error.reason
    except (ValueError, AttributeError):
        detail = error.reason
    return ReleaseFailed(f"{step}: HTTP {error.status}: {detail}")


class Releaser:
    """The subcommand's API calls: scale, wait for pods, list and patch workloads."""

    def __init__(self, client: kubernetes.client.ApiClient, options: ReleaseOptions) -> None:
        self._core = kubernetes.client.CoreV1Api(client)
        self._apps = kubernetes.client.AppsV1Api(client)
        self._options = options

    def stop_operator(self) -> None:
        """Scale the operator to 0 and wait until its pods are gone (its shutdown ran)."""
        namespace, name = self._options.operator_namespace, self._options.operator_deployment
        try:
            scale = kube.retrying(
                lambda: self._apps.patch_namespaced_deployment_scale(
                    name,
                    namespace,
                    {"spec": {"replicas": 0}},
                    _content_type=kube.MERGE_PATCH,
                    _request_timeout=kube.REQUEST_TIMEOUT,
                ),
                "patch",
            )
        except ApiException as error:
            if error.status != 404:
                raise _failure(f"scaling deployment {namespace}/{name} to 0", error) from None
            _say(f"operator deployment {namespace}/{name} not found: nothing to stop")
            return
        _say(f"scaled deployment {namespace}/{name} to 0 replicas")
        selector = scale.status.selector if scale.status else None
        if not selector:
            raise ReleaseFailed(f"deployment {namespace}/{name} reports no pod selector")
        started = time.monotonic()
        deadline = started + self._options.timeout.total_seconds()
        while True:
            pods = _api_call(
                f"listing the operator's pods in {namespace}",
                lambda: self._core.list_namespaced_pod(
                    namespace, label_selector=selector, _request_timeout=kube.REQUEST_TIMEOUT
                ),
            )
            left = sorted(str(getattr(pod.metadata, "name", "?")) for pod in pods.items)
            if not left:
                _say(f"operator pods gone after {time.monotonic() - started:.0f}s")
                return
            if time.monotonic() > deadline:
                waited = self._options.timeout.total_seconds()
                raise ReleaseFailed(
                    f"operator pods still present after {waited:g}s: "
                    f"{', '.join(left)}; released nothing, since a running operator adds "
                    "the finalizer back. Run again once they are gone."
                )
            time.sleep(POLL_SECONDS)

    def release_all(self) -> list[str]:
        """Remove our finalizer from every workload in scope; return ``kind ns/name``."""
        return FinalizerReleaser(self._apps, self._options.namespaces, _say).release_all()


class FinalizerReleaser:
    """Remove restarter's finalizer from every workload in some namespaces (all: empty).

    Used by the subcommand after the operator stopped, and by the operator's own clean
    shutdown.
    """

    def __init__(
        self,
        apps: kubernetes.client.AppsV1Api,
        namespaces: Sequence[str],
        report: Callable[[str], None],
    ) -> None:
        self._apps = apps
        self._custom = kubernetes.client.CustomObjectsApi(apps.api_client)
        self._namespaces = tuple(namespaces)
        self._report = report

    def release_all(self) -> list[str]:
        """Remove our finalizer from every workload carrying it; return ``kind ns/name``."""
        released: list[str] = []
        for _ in range(RELEASE_PASSES):
            # Everything is listed before anything is patched: a namespace or kind we may
            # not read fails the command before it changed any workload.
            found = [
                (kind, suffix, metadata)
                for kind, suffix in WORKLOAD_KINDS
                for metadata in self._carrying(kind, suffix)
            ]
            changed: list[str] = []
            for kind, suffix, metadata in found:
                label = f"{kind} {metadata.namespace}/{metadata.name}"
                patch = release_patch(metadata.finalizers, keys.FINALIZER)
                if patch is None:
                    continue
                outcome = self._patch(suffix, metadata.namespace, metadata.name, patch, label)
                if outcome == "released":
                    self._report(f"released {keys.FINALIZER} from {label}")
                    released.append(label)
                elif outcome == "changed":
                    changed.append(label)
            if not changed:
                return released
        raise ReleaseFailed(
            f"the finalizers of {', '.join(changed)} changed on each of {RELEASE_PASSES} tries"
        )

    def _carrying(self, kind: str, suffix: str) -> Iterator[Any]:
        """Metadata of every workload of ``kind`` in scope that carries our finalizer.

        Listed as metadata only (PartialObjectMetadataList), decoded to the fields read:
        the operator runs this as it stops, and a listing of 10 000 Helm-made Deployments
        as the client's model objects was its largest peak (1.6 M Python blocks for 1 000).
        Rollouts are none when their CRD is not installed, or when restarter may not list
        them (then it never held one).
        """
        for namespace in self._namespaces or (None,):
            where = namespace or "all namespaces"
            token: str | None = None
            while True:
                options: dict[str, Any] = {
                    "limit": PAGE,
                    "_request_timeout": kube.REQUEST_TIMEOUT,
                    "_headers": kube.METADATA_LIST,
                    "_preload_content": False,
                }
                if token:
                    options["_continue"] = token
                lister = _lister(self._apps, self._custom, suffix, namespace, options)
                try:
                    response = kube.retrying(lister, "list")
                except ApiException as error:
                    if suffix == ROLLOUTS and error.status in (403, 404):
                        return
                    raise _failure(f"listing {kind}s in {where}", error) from None
                page = bodies.decode_list(response.data)
                for item in page.get("items") or []:
                    metadata = item.get("metadata") or {}
                    if keys.FINALIZER in (metadata.get("finalizers") or ()):
                        yield types.SimpleNamespace(
                            namespace=metadata.get("namespace"),
                            name=metadata.get("name"),
                            finalizers=metadata.get("finalizers"),
                        )
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break

    def _patch(
        self, suffix: str, namespace: str, name: str, patch: list[dict[str, Any]], label: str
    ) -> str:
        if suffix == ROLLOUTS:
            group, version = WORKLOAD_APIS[ROLLOUTS]

            def method(name: str, namespace: str, body: Any, **options: Any) -> Any:
                return self._custom.patch_namespaced_custom_object(
                    group, version, namespace, ROLLOUTS, name, body, **options
                )
        else:
            method = getattr(self._apps, f"patch_namespaced_{suffix}")
        try:
            kube.retrying(
                lambda: method(
                    name,
                    namespace,
                    patch,
                    _content_type=JSON_PATCH,
                    _request_timeout=kube.REQUEST_TIMEOUT,
                ),
                "patch",
            )
        except ApiException as error:
            if error.status == 404:
                return "gone"
            if error.status == 422:  # the test op failed: finalizers changed since listed
                return "changed"
            raise _failure(f"removing {keys.FINALIZER} from {label}", error) from None
        return "released"


def _lister(
    apps: kubernetes.client.AppsV1Api,
    custom: kubernetes.client.CustomObjectsApi,
    suffix: str,
    namespace: str | None,
    options: dict[str, Any],
) -> Callable[[], Any]:
    """One page of a workload kind's list, with ``options`` (raw: decoded by the caller)."""
    if suffix == ROLLOUTS:
        group, version = WORKLOAD_APIS[ROLLOUTS]
        if namespace is None:
            return lambda: custom.list_cluster_custom_object(group, version, ROLLOUTS, **options)
        return lambda: custom.list_namespaced_custom_object(
            group, version, namespace, ROLLOUTS, **options
        )
    if namespace is None:
        return lambda: getattr(apps, f"list_{suffix}_for_all_namespaces")(**options)
    return lambda: getattr(apps, f"list_namespaced_{suffix}")(namespace, **options)


def main(argv: Sequence[str]) -> int:
    """Exit 0 when nothing carries the finalizer any more, 1 on failure, 2 on bad options."""
    try:
        options = parse_options(argv)
    except ReleaseOptionsError as error:
        print(f"restarter {COMMAND}: {error}", file=sys.stderr)
        return 2
    releaser = Releaser(kube.load_client(), options)
    try:
        releaser.stop_operator()
        released = releaser.release_all()
    except ReleaseFailed as error:
        print(f"restarter {COMMAND}: {error}", file=sys.stderr)
        return 1
    scope = ", ".join(options.namespaces) or "all namespaces"
    _say(
        f"released the finalizer of {len(released)} workload(s) in {scope}; "
        "their pending-restart marks stay"
    )
    return 0
