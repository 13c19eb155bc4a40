"""What every verb's client shares: the kubernetes client's APIs, each kind's methods on
them, and how an answer's body becomes plain dicts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import kubernetes

from restarter.model import bodies
from restarter.model.kinds import KINDS
from restarter.services.kube.connecting import Client

#: What a metadata-only list and watch ask for: the server sends PartialObjectMetadata.
METADATA_LIST = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
METADATA_WATCH = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
#: The stem of each built-in workload kind's ``AppsV1Api`` methods
#: (``patch_namespaced_<stem>``), by plural; the other kinds are custom resources, reached
#: through ``CustomObjectsApi``.
APPS_STEMS = {
    "deployments": "deployment",
    "statefulsets": "stateful_set",
    "daemonsets": "daemon_set",
}
#: The stem of each source kind's ``CoreV1Api`` methods.
SOURCE_STEMS = {"secret": "secret", "configmap": "config_map"}


class Endpoints:
    """The kubernetes client's APIs over one connection, and each kind's methods on them."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._core = kubernetes.client.CoreV1Api(client)
        self._apps = kubernetes.client.AppsV1Api(client)
        self._custom = kubernetes.client.CustomObjectsApi(client)

    def _source_method(self, verb: str, kind: str) -> Callable[..., Any]:
        """The client's ``<verb>_namespaced_...`` method of a Secret or ConfigMap."""
        return cast(
            Callable[..., Any], getattr(self._core, f"{verb}_namespaced_{SOURCE_STEMS[kind]}")
        )

    def _source_lister(self, kind: str, namespace: str | None) -> Callable[..., Any]:
        stem = SOURCE_STEMS[kind]
        if namespace:
            method = getattr(self._core, f"list_namespaced_{stem}")
            return lambda **options: method(namespace, **options)
        return cast(Callable[..., Any], getattr(self._core, f"list_{stem}_for_all_namespaces"))

    def _workload_method(self, verb: str, plural: str) -> Callable[..., Any]:
        """The client's ``<verb>_namespaced_...`` method of a workload kind, taking (name,
        namespace[, body], **options) for built-in kinds and custom resources alike."""
        kind = KINDS[plural]
        if plural in APPS_STEMS:
            return cast(
                Callable[..., Any], getattr(self._apps, f"{verb}_namespaced_{APPS_STEMS[plural]}")
            )
        custom = getattr(
            self._custom, f"{'get' if verb == 'read' else verb}_namespaced_custom_object"
        )

        def method(name: str, namespace: str, *body: Any, **options: Any) -> Any:
            return custom(kind.group, kind.version, namespace, plural, name, *body, **options)

        return method

    def _custom_lister(
        self, group: str, version: str, plural: str, namespace: str | None
    ) -> Callable[..., Any]:
        """The list method of a custom resource in ``namespace`` (None: every namespace)."""
        if namespace:
            return lambda **options: self._custom.list_namespaced_custom_object(
                group, version, namespace, plural, **options
            )
        return lambda **options: self._custom.list_cluster_custom_object(
            group, version, plural, **options
        )

    def _lister(self, plural: str, namespace: str | None) -> Callable[..., Any]:
        kind = KINDS[plural]
        if plural not in APPS_STEMS:
            if namespace:
                return lambda **options: self._custom.list_namespaced_custom_object(
                    kind.group, kind.version, namespace, plural, **options
                )
            return lambda **options: self._custom.list_cluster_custom_object(
                kind.group, kind.version, plural, **options
            )
        stem = APPS_STEMS[plural]
        if namespace:
            method = getattr(self._apps, f"list_namespaced_{stem}")
            return lambda **options: method(namespace, **options)
        return cast(Callable[..., Any], getattr(self._apps, f"list_{stem}_for_all_namespaces"))


def plain_list(response: Any) -> dict[str, Any]:
    """A raw response's list (``_preload_content=False``) as plain dicts, decoded to the
    fields restarter reads (model/bodies.py): never the client's model objects, which cost
    two orders of magnitude more CPU than the parse."""
    return bodies.decode_list(response.data)


def whole(data: bytes) -> dict[str, Any]:
    """A whole JSON body as plain dicts (a source read for its data)."""
    return dict(json.loads(data))


def discard(data: bytes) -> dict[str, Any]:
    """An answer that is not read (its body was received whole: the connection is reusable)."""
    return {}
