"""Creating and changing objects in bulk through a thread pool (the apiserver is the limit)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from bench.workload import NAMESPACE
from restarter_cluster.cluster import Cluster

MERGE_PATCH = "application/merge-patch+json"
#: Lists answered with metadata only: what exists, without parsing whole bodies.
METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
THREADS = 12
KUBECTL_PROCESSES = 3
KUBECTL_CHUNK = 1000


class Objects:
    """The harness's writes; responses are not deserialised (that would cost more CPU
    than the apiserver spends on them)."""

    def __init__(self, client: kubernetes.client.ApiClient, cluster: Cluster) -> None:
        self.client, self.cluster = client, cluster
        self.core = kubernetes.client.CoreV1Api(client)
        self.apps = kubernetes.client.AppsV1Api(client)

    def ensure_namespace(self) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as error:
            if error.status != 409:
                raise

    def create(self, body: dict[str, Any]) -> bool:
        """Create one object; False if it already exists."""
        create = {
            "Secret": self.core.create_namespaced_secret,
            "ConfigMap": self.core.create_namespaced_config_map,
            "Deployment": self.apps.create_namespaced_deployment,
        }[body["kind"]]
        try:
            create(NAMESPACE, body, _preload_content=False)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def create_all(
        self,
        bodies: Iterable[dict[str, Any]],
        apply: bool = False,
        namespace: str | None = NAMESPACE,
    ) -> float:
        """Create every object (existing ones are left alone); return the seconds it took.

        Through kubectl, a few processes at a time: the Python client spends more CPU
        per object than the apiserver does, and the machine has two cores. With ``apply``,
        ``kubectl apply`` (client-side) creates them: managedFields and
        ``last-applied-configuration`` as a user's apply leaves them. With ``namespace``
        None, each body names its own namespace (or is cluster-scoped).
        """
        started = time.monotonic()
        chunks = list(_chunks(list(bodies), KUBECTL_CHUNK))
        verb = "apply" if apply else "create"
        with ThreadPoolExecutor(KUBECTL_PROCESSES) as pool:
            for _ in pool.map(lambda chunk: self._kubectl(verb, chunk, namespace), chunks):
                pass
        return time.monotonic() - started

    def _kubectl(self, verb: str, items: list[dict[str, Any]], namespace: str | None) -> None:
        document = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        scope = ["-n", namespace] if namespace else []
        done = self.cluster.kubectl(
            verb,
            *scope,
            "-o",
            "name",
            "-f",
            "-",
            input=document,
            check=False,
            timeout=900,
        )
        errors = [line for line in done.stderr.splitlines() if "AlreadyExists" not in line]
        if done.returncode != 0 and errors:
            raise RuntimeError(f"kubectl {verb} failed: {done.stderr[-2000:]}")

    def patch_secret(self, name: str, patch: dict[str, Any]) -> str:
        """Merge-patch a Secret; return its new resourceVersion."""
        response = self.core.patch_namespaced_secret(
            name, NAMESPACE, patch, _content_type=MERGE_PATCH, _preload_content=False
        )
        return str(json.loads(response.data)["metadata"]["resourceVersion"])

    def patch_deployment(self, name: str, patch: dict[str, Any]) -> None:
        self.apps.patch_namespaced_deployment(
            name, NAMESPACE, patch, _content_type=MERGE_PATCH, _preload_content=False
        )

    def deployments(self) -> list[dict[str, Any]]:
        """Every Deployment of the namespace as plain dicts (paged)."""
        items: list[dict[str, Any]] = []
        token = None
        while True:
            response = self.apps.list_namespaced_deployment(
                NAMESPACE, limit=1000, _continue=token, _preload_content=False
            )
            page = json.loads(response.data)
            items.extend(page["items"])
            token = page["metadata"].get("continue")
            if not token:
                return items

    def count(self, kind: str, label_selector: str) -> int:
        lister = {
            "Secret": self.core.list_namespaced_secret,
            "ConfigMap": self.core.list_namespaced_config_map,
            "Deployment": self.apps.list_namespaced_deployment,
        }[kind]
        total, token = 0, None
        while True:
            response = lister(
                NAMESPACE,
                label_selector=label_selector,
                limit=5000,
                _continue=token,
                _preload_content=False,
            )
            page = json.loads(response.data)
            total += len(page["items"])
            token = page["metadata"].get("continue")
            if not token:
                return total

    def metadata(self, kind: str, label_selector: str = "") -> list[dict[str, Any]]:
        """The metadata of every object of ``kind`` in any namespace, read as metadata
        only (paged): what exists, its labels, annotations and finalizers."""
        lister = {
            "Namespace": self.core.list_namespace,
            "Secret": self.core.list_secret_for_all_namespaces,
            "ConfigMap": self.core.list_config_map_for_all_namespaces,
            "Deployment": self.apps.list_deployment_for_all_namespaces,
        }[kind]
        found: list[dict[str, Any]] = []
        token = None
        while True:
            response = lister(
                label_selector=label_selector,
                limit=1000,
                _continue=token,
                _headers=METADATA_ONLY,
                _preload_content=False,
            )
            page = json.loads(response.data)
            found.extend(item["metadata"] for item in page.get("items") or [])
            token = page["metadata"].get("continue")
            if not token:
                return found

    def existing(self, kind: str, label_selector: str = "") -> set[str]:
        """``namespace/name`` of every object of ``kind`` (``name`` for a Namespace)."""
        return {qualified(metadata) for metadata in self.metadata(kind, label_selector)}


def qualified(metadata: dict[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])


def _chunks(items: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def concurrently(call: Callable[[Any], object], items: Iterable[Any]) -> float:
    """Run ``call`` on every item in the pool; return the seconds it took."""
    started = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        for _ in pool.map(call, items, chunksize=16):
            pass
    return time.monotonic() - started
