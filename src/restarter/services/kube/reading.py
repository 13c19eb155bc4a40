"""Reading objects: one by name (None when it is gone), and lists by label selector,
decoded to plain dicts; a source's data only where it is asked for."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from restarter.model import bodies, csi
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.services.kube.endpoints import (
    METADATA_LIST,
    METADATA_WATCH,
    Endpoints,
    plain_list,
    whole,
)
from restarter.services.kube.errors import NotFound
from restarter.services.kube.requesting import retrying_timed


class Reader(Endpoints):
    """GETs and label-selected lists; each failure is a type of ``errors``."""

    def read_source(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret or ConfigMap as it is now (held in memory only), or None if gone."""
        return self._read(self._source_method("read", kind), namespace, name)

    def read_source_metadata(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret's or ConfigMap's metadata alone (PartialObjectMetadata: never its data),
        or None if gone."""
        method = self._source_method("read", kind)

        def metadata_only(name: str, namespace: str, **options: Any) -> Any:
            return method(name, namespace, _headers=METADATA_WATCH, **options)

        return self._read(metadata_only, namespace, name, bodies.decode_object)

    def read_workload(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Deployment, StatefulSet, DaemonSet or Rollout as it is now, or None if gone."""
        return self._read(
            self._workload_method("read", plural), namespace, name, bodies.decode_object
        )

    def read_namespace(self, name: str) -> dict[str, Any] | None:
        """A Namespace as it is now (for its ``restarter.io/hold``), or None if gone."""

        def namespace(name: str, _namespace: str, **options: Any) -> Any:
            return self._core.read_namespace(name, **options)

        return self._read(namespace, "", name)

    def served(self, plural: str) -> bool:
        """True when the API server serves the kind (its group version's discovery lists
        it): how restarter notices that the Rollout CRD was installed. Discovery needs no
        RBAC rule of its own."""
        kind = KINDS[plural]

        def discovery(_name: str, _namespace: str, **options: Any) -> Any:
            return self._custom.get_api_resources(kind.group, kind.version, **options)

        found = self._read(discovery, "", "")
        return found is not None and any(
            item.get("name") == plural for item in found.get("resources") or []
        )

    def served_resource(self, group: str, version: str, plural: str) -> bool:
        """True when the API server's discovery of ``group/version`` lists ``plural``."""

        def discovery(_name: str, _namespace: str, **options: Any) -> Any:
            return self._custom.get_api_resources(group, version, **options)

        found = self._read(discovery, "", "")
        return found is not None and any(
            item.get("name") == plural for item in found.get("resources") or []
        )

    def read_provider_class(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A SecretProviderClass's metadata (its ``restart-at`` label and window
        annotations) and the Secrets it syncs into (``spec.secretObjects``: names and keys,
        no values), or None if gone."""

        def provider_class(name: str, namespace: str, **options: Any) -> Any:
            return self._custom.get_namespaced_custom_object(
                csi.GROUP, csi.VERSION, namespace, csi.CLASSES, name, **options
            )

        found = self._read(provider_class, namespace, name)
        if found is None:
            return None
        synced = (found.get("spec") or {}).get("secretObjects") or []
        return {"metadata": found.get("metadata") or {}, "spec": {"secretObjects": synced}}

    def list_workloads(self, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        """Every workload of a kind in ``namespace`` (None: every namespace), as plain dicts."""
        lister = self._lister(plural, namespace)
        listing = retrying_timed(
            lambda timeout: lister(_request_timeout=timeout, _preload_content=False), "list"
        )
        return list(plain_list(listing).get("items") or [])

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The pods in ``namespace`` that ``selector`` selects, whole (their statuses: how
        the circuit breaker tells a crash-looping pod)."""
        response: Any = retrying_timed(
            lambda timeout: self._core.list_namespaced_pod(
                namespace,
                label_selector=selector,
                _request_timeout=timeout,
                _preload_content=False,
            ),
            "list",
        )
        return list(whole(response.data).get("items") or [])

    def selected_pods(self, namespace: str | None, selector: str) -> list[str]:
        """``namespace/name`` of every pod matching ``selector`` (None: in any namespace),
        listed as metadata only."""
        lister: Callable[..., Any]
        if namespace:
            lister = functools.partial(self._core.list_namespaced_pod, namespace)
        else:
            lister = self._core.list_pod_for_all_namespaces
        return sorted(
            f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            for metadata in self._selected_metadata(lister, selector)
        )

    def pod_names(self, namespace: str, selector: str) -> list[str]:
        """The names of the pods in ``namespace`` that ``selector`` selects, sorted."""
        lister = functools.partial(self._core.list_namespaced_pod, namespace)
        return sorted(
            str(metadata.get("name") or "?")
            for metadata in self._selected_metadata(lister, selector)
        )

    def labelled_names(
        self, resource: str, namespace: str | None, label: str
    ) -> list[dict[str, Any]]:
        """The metadata of every workload (by plural) or source (``secret``,
        ``configmap``) in ``namespace`` that carries ``label``: never a source's data."""
        if resource in WORKLOAD_KINDS:
            lister = self._lister(resource, namespace)
        else:
            lister = self._source_lister(resource, namespace)
        return self._selected_metadata(lister, label)

    def _selected_metadata(self, lister: Callable[..., Any], selector: str) -> list[dict[str, Any]]:
        """The metadata of every object ``lister`` lists under a label selector (a
        metadata-only list: never a source's data)."""
        response = retrying_timed(
            lambda timeout: lister(
                label_selector=selector,
                _headers=METADATA_LIST,
                _request_timeout=timeout,
                _preload_content=False,
            ),
            "list",
        )
        return [item["metadata"] for item in plain_list(response).get("items") or []]

    def _read(
        self,
        method: Callable[..., Any],
        namespace: str,
        name: str,
        decode: Callable[[bytes], dict[str, Any]] = whole,
    ) -> dict[str, Any] | None:
        try:
            found = retrying_timed(
                lambda timeout: method(
                    name, namespace, _request_timeout=timeout, _preload_content=False
                ),
                "get",
            )
        except NotFound:
            return None
        return decode(found.data)
