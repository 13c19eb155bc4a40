"""Patching objects: the marks and checksums on sources, stamps, labels, finalizers and
restarts on workloads, and the operator's scale; each returns what the caller reads of
the patched object, or None when it is gone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from restarter.model import bodies
from restarter.model.kinds import KINDS
from restarter.services.kube.endpoints import Endpoints, discard, whole
from restarter.services.kube.errors import Conflict, Invalid, NotFound
from restarter.services.kube.requesting import retrying_timed

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: The apps/v1 workloads are built-in types: a strategic merge patch can add to and remove
#: from ``metadata.finalizers`` without replacing the list (a JSON merge patch cannot).
#: Custom resources (Rollouts) take only JSON merge patches (model/restart_decisions.py sends them
#: the whole list, conditional on the resourceVersion read).
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Patcher(Endpoints):
    """PATCHes; ``Conflict`` when the object changed since it was read, None when gone."""

    def patch_source(
        self, kind: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Patch a Secret (``secret``) or ConfigMap (``configmap``): its new resourceVersion
        alone (``{"metadata": {"resourceVersion": …}}``), or None when it is gone."""
        method = self._source_method("patch", kind)
        # The response carries the source's data: only the resourceVersion is decoded.
        return self._patch(method, namespace, name, patch, decode=bodies.decode_version)

    def patch_workload(
        self, plural: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Patch a workload (by resource plural): a strategic merge patch where its kind
        merges finalizers as a set, else a JSON merge patch (a custom resource)."""
        content_type = STRATEGIC_MERGE_PATCH if KINDS[plural].merges_finalizers else MERGE_PATCH
        method = self._workload_method("patch", plural)
        return self._patch(method, namespace, name, patch, content_type, bodies.decode_object)

    def json_patch_workload(
        self, plural: str, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> bool:
        """Apply a JSON patch (RFC 6902) to a workload: False when it is gone; ``Conflict``
        when one of its ``test`` operations failed (the object changed since it was read)."""
        method = self._workload_method("patch", plural)
        return self._patch(method, namespace, name, operations, JSON_PATCH, discard) is not None

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> str | None:
        """Scale a Deployment; its pods' label selector, or None when it does not exist."""
        try:
            scale = retrying_timed(
                lambda timeout: self._apps.patch_namespaced_deployment_scale(
                    name,
                    namespace,
                    {"spec": {"replicas": replicas}},
                    _content_type=MERGE_PATCH,
                    _request_timeout=timeout,
                ),
                "patch",
            )
        except NotFound:
            return None
        return str(scale.status.selector or "") if scale.status else ""

    def _patch(
        self,
        method: Callable[..., Any],
        namespace: str,
        name: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        content_type: str = MERGE_PATCH,
        decode: Callable[[bytes], dict[str, Any]] = whole,
    ) -> dict[str, Any] | None:
        """The patched object (None: gone); ``Conflict`` when it changed since it was read
        (409 on a stale resourceVersion, 422 on a JSON patch's failed ``test``)."""
        try:
            result = retrying_timed(
                lambda timeout: method(
                    name,
                    namespace,
                    patch,
                    _content_type=content_type,
                    _request_timeout=timeout,
                    _preload_content=False,
                ),
                "patch",
            )
        except NotFound:
            return None
        except Conflict as error:
            raise Conflict(_changed(namespace, name), status=409, reason=error.reason) from error
        except Invalid as error:
            if content_type != JSON_PATCH or error.status != 422:
                raise
            raise Conflict(_changed(namespace, name), status=422, reason=error.reason) from error
        return decode(result.data)


def _changed(namespace: str, name: str) -> str:
    return f"{namespace}/{name} changed while deciding"
