"""Listing and watching, for the streams that keep restarter's views: consistent pages of
a list (metadata only where that is all that is read), then a watch from the list's
resourceVersion, with bookmarks, as a stream of lines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from restarter.model import bodies, csi
from restarter.services.kube.connecting import CONNECT_TIMEOUT
from restarter.services.kube.endpoints import (
    METADATA_LIST,
    METADATA_WATCH,
    Endpoints,
    plain_list,
    whole,
)
from restarter.services.kube.requesting import retrying_timed, typed_errors


class WatchStream:
    """A watch's open response: its lines (one JSON event each), then ``close``. A failure
    while it streams is a type of ``errors`` (``Unavailable``: the connection was lost)."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def lines(self) -> Iterator[str]:
        with typed_errors():
            yield from iter_resp_lines(self._response)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Give the connection back (the watch's server end may still be open)."""
        self._response.release_conn()


class Watcher(Endpoints):
    """Pages of lists and watches of workloads, sources (metadata only) and Namespaces."""

    def list_page(
        self, plural: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent (etcd) list of a workload kind; ``Expired`` when the
        continue token has expired."""
        lister = self._lister(plural, namespace)
        return bodies.decode_list(self._page(lister, continue_token, limit).data)

    def list_workload_metadata(
        self, plural: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a workload kind's list as metadata only (PartialObjectMetadataList),
        decoded to the fields read: never the client's model objects."""
        lister = self._lister(plural, namespace)
        return plain_list(self._page(lister, continue_token, limit, METADATA_LIST))

    def list_source_metadata(
        self, kind: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent list of Secrets or ConfigMaps, metadata only (names,
        labels, annotations, resourceVersion: never data)."""
        lister = self._source_lister(kind, namespace)
        return plain_list(self._page(lister, continue_token, limit, METADATA_LIST))

    def list_pod_statuses(
        self, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent list of the CSI driver's SecretProviderClassPodStatuses
        (object ids and versions: the driver writes no values there)."""
        lister = self._custom_lister(csi.GROUP, csi.VERSION, csi.POD_STATUSES, namespace)
        return whole(self._page(lister, continue_token, limit).data)

    def watch_pod_statuses(
        self, namespace: str | None, resource_version: str, timeout: int
    ) -> WatchStream:
        """A watch of SecretProviderClassPodStatuses from ``resource_version``."""
        lister = self._custom_lister(csi.GROUP, csi.VERSION, csi.POD_STATUSES, namespace)
        return self._watch(lister, resource_version, timeout)

    def list_namespaces(self, continue_token: str | None, limit: int) -> dict[str, Any]:
        """One page of a consistent list of Namespaces."""
        return plain_list(self._page(self._core.list_namespace, continue_token, limit))

    def watch(
        self, plural: str, namespace: str | None, resource_version: str, timeout: int
    ) -> WatchStream:
        """A watch of a workload kind from ``resource_version``, with bookmarks."""
        return self._watch(self._lister(plural, namespace), resource_version, timeout)

    def watch_namespaces(self, resource_version: str, timeout: int) -> WatchStream:
        """A watch of Namespaces from ``resource_version``, with bookmarks."""
        return self._watch(self._core.list_namespace, resource_version, timeout)

    def watch_source_metadata(
        self, kind: str, namespace: str | None, resource_version: str, timeout: int
    ) -> WatchStream:
        """A metadata-only watch of Secrets or ConfigMaps from ``resource_version``, with
        bookmarks."""
        lister = self._source_lister(kind, namespace)
        return self._watch(lister, resource_version, timeout, METADATA_WATCH)

    @staticmethod
    def _page(
        lister: Callable[..., Any],
        continue_token: str | None,
        limit: int,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One page of a consistent list, as the raw response."""
        options: dict[str, Any] = {"limit": limit}
        if continue_token:
            options["_continue"] = continue_token
        if headers:
            options["_headers"] = headers
        return retrying_timed(
            lambda timeout: lister(**options, _request_timeout=timeout, _preload_content=False),
            "list",
        )

    @staticmethod
    def _watch(
        lister: Callable[..., Any],
        resource_version: str,
        timeout: int,
        headers: dict[str, str] | None = None,
    ) -> WatchStream:
        """A watch from ``resource_version`` with bookmarks, as a raw stream."""
        options: dict[str, Any] = {"_headers": headers} if headers else {}
        with typed_errors():
            response = lister(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                # The server ends the watch after ``timeout``; the long read timeout only
                # catches one that never ends. A dead peer is noticed sooner, by keepalive
                # (connecting.socket_options).
                _request_timeout=(CONNECT_TIMEOUT, timeout + 30),
                _preload_content=False,
                **options,
            )
        return WatchStream(response)
