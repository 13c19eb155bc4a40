"""The objects of ``bench/run many-sources`` and the state each run starts from.

K namespaces labelled ``LABEL=true``, each with one labelled Secret (``SOURCE``) and D
Deployments that all read it, like a trust bundle or a copied Secret in every namespace;
or, with ``Layout.bundle_kib``, one labelled ConfigMap of that many KiB of PEM CA
certificates that the Deployments mount, as trust-manager writes its bundles; plus
``PROBE_NAMESPACE`` with a Secret and a Deployment the harness changes to tell when an
operator is ready. Builders are pure; ``ensure`` and ``reset`` make the API calls.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench import bundles, workload
from bench.control_plane import wait_until
from bench.loading import MERGE_PATCH, Objects, concurrently, qualified
from bench.watching import DeploymentWatcher
from restarter.model import certificates, keys
from restarter.model.references import CONFIGMAP, SECRET

#: Namespace label both operators select on; ``true`` puts a namespace in the run.
LABEL = "bench.restarter.io/many-sources"
SELECTOR = f"{LABEL}=true"
#: Given to namespaces of an earlier, bigger run instead of ``true``: out of scope.
OUT_OF_SCOPE = "idle"
#: The labelled Secret of each namespace (trust-manager and reflector use one name in all).
SOURCE = "ca-bundle"
PROBE_NAMESPACE = "many-probe"
#: Label of the workload Deployments (``bench=workload``, as in the main bench).
WORKLOADS = "bench=workload"


#: Where a bundle's Deployments mount it.
BUNDLE_MOUNT = "/etc/ssl/bundle"
#: restarter's records on a source, taken off for its first sight (``reset``).
RECORDS = (keys.CHECKSUM, keys.KEY_DIGESTS, keys.NOT_AFTER, keys.CHANGE)


@dataclass(frozen=True)
class Layout:
    namespaces: int
    deployments: int
    """Per namespace."""

    bundle_kib: int = 0
    """0: each source is a small Secret; else a ConfigMap bundle of this many KiB."""

    first_sight: bool = False
    """Each run starts with no restarter records on the sources: its start is its first
    sight of them, as a new user's (else they carry the records of their data)."""

    @property
    def kind(self) -> str:
        """The sources' kind, as restarter names it (``secret`` or ``configmap``)."""
        return CONFIGMAP if self.bundle_kib else SECRET

    def namespace_names(self) -> list[str]:
        return [namespace_name(i) for i in range(self.namespaces)]

    def dependents(self) -> dict[str, list[str]]:
        """Per namespace, its Deployments as ``namespace/name``."""
        return {
            namespace: [f"{namespace}/{deployment_name(j)}" for j in range(self.deployments)]
            for namespace in self.namespace_names()
        }


def namespace_name(index: int) -> str:
    return f"many-{index:05d}"


def deployment_name(index: int) -> str:
    return f"app-{index:03d}"


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {LABEL: "true"}},
    }


def source(layout: Layout, namespace: str, window: str) -> dict[str, Any]:
    """The namespace's labelled source, carrying restarter's records (seen before)."""
    if layout.bundle_kib:
        data = {bundles.KEY: bundles.bundle(layout.bundle_kib)}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SOURCE, "labels": {keys.RESTART_AT_LABEL: window}},
            "data": data,
        }
        body["metadata"]["annotations"] = records(layout, SOURCE, data)
    else:
        body = workload.labelled_secret(SOURCE, window)
    body["metadata"]["namespace"] = namespace
    return body


def records(layout: Layout, name: str, data: dict[str, str]) -> dict[str, str]:
    """restarter's records of ``data``: checksum, per-key digests and, for a bundle, the
    earliest expiry of its certificates."""
    recorded = workload.recorded(name, data)
    if layout.bundle_kib:
        expiry = certificates.expiry_annotation(layout.kind, {"data": data})
        recorded |= {k: v for k, v in expiry.items() if v is not None}
    return recorded


def dependent(layout: Layout, namespace: str, name: str) -> dict[str, Any]:
    """A Helm chart's Deployment (``--body realistic``) reading the namespace's Secret, or
    mounting its bundle."""
    body = workload.realistic_deployment(name, [SOURCE])
    body["metadata"]["namespace"] = namespace
    body["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = namespace
    if layout.bundle_kib:
        spec = body["spec"]["template"]["spec"]
        app = spec["containers"][0]
        del app["envFrom"]
        app["volumeMounts"] = [{"name": "ca-bundle", "mountPath": BUNDLE_MOUNT}]
        spec["volumes"] = [{"name": "ca-bundle", "configMap": {"name": SOURCE}}]
    return body


def probe_objects(window: str) -> list[dict[str, Any]]:
    secret = workload.labelled_secret(workload.PROBE_SECRET, window)
    deployment = workload.deployment(workload.PROBE_DEPLOYMENT, [workload.PROBE_SECRET])
    for body in (secret, deployment):
        body["metadata"]["namespace"] = PROBE_NAMESPACE
    return [secret, deployment]


def changed_data(layout: Layout, namespace: str, token: str) -> dict[str, str]:
    """New ``data`` for a namespace's source, different in every run (``token``): a bundle
    with its last certificate replaced, the same in every namespace (as trust-manager
    writes one bundle everywhere)."""
    if layout.bundle_kib:
        return {bundles.KEY: _rotated(layout.bundle_kib, token)}
    return {"value": base64.b64encode(f"{namespace}-{token}".encode()).decode()}


@functools.cache
def _rotated(kib: int, token: str) -> str:
    return bundles.rotated(bundles.bundle(kib), token)


# -- creating what is missing --------------------------------------------------------------


def ensure(objects: Objects, watcher: DeploymentWatcher, layout: Layout) -> dict[str, float]:
    """Create what the layout needs and is not there yet; take the namespaces of an
    earlier, bigger layout out of scope and delete Deployments beyond D. Seconds per step."""
    timings: dict[str, float] = {}
    far = workload_far_window()
    wanted = [PROBE_NAMESPACE, *layout.namespace_names()]
    labelled = {
        metadata["name"]: (metadata.get("labels") or {}).get(LABEL)
        for metadata in objects.metadata("Namespace", LABEL)
    }
    timings["namespaces"] = objects.create_all(
        (namespace(name) for name in wanted if name not in labelled), namespace=None
    )
    in_scope = set(wanted)
    relabel = [
        (name, "true" if name in in_scope else OUT_OF_SCOPE)
        for name, value in labelled.items()
        if (value == "true") != (name in in_scope)
    ]
    concurrently(lambda item: _label_namespace(objects, *item), relabel)

    existing = objects.existing("Secret", keys.RESTART_AT_LABEL)
    if layout.bundle_kib:
        existing |= objects.existing("ConfigMap", keys.RESTART_AT_LABEL)
    probe_secret, probe_deployment = probe_objects(far)
    sources = (source(layout, name, far) for name in layout.namespace_names())
    timings["sources"] = objects.create_all(
        (
            body
            for body in itertools.chain(sources, [probe_secret])
            if qualified(body["metadata"]) not in existing
        ),
        namespace=None,
    )

    deployments = objects.existing("Deployment")
    wanted_deployments = {name for names in layout.dependents().values() for name in names}
    missing = sorted(wanted_deployments - deployments)
    timings["deployments"] = objects.create_all(
        (dependent(layout, *name.split("/")) for name in missing), apply=True, namespace=None
    )
    if qualified(probe_deployment["metadata"]) not in deployments:
        objects.create_all([probe_deployment], namespace=None)
    extra = [
        name
        for name in deployments - wanted_deployments
        if name.split("/")[0] in in_scope and name.split("/")[0] != PROBE_NAMESPACE
    ]
    concurrently(lambda name: objects.apps.delete_namespaced_deployment(*_split(name)), extra)
    timings["created deployments"] = float(len(missing))

    started = time.monotonic()
    wait_until(lambda: watcher.settled(wanted_deployments), 1800, "the deployment controller")
    timings["controllers settle"] = time.monotonic() - started
    return timings


def workload_far_window() -> str:
    """A window 12 h away: a Secret created or reset with it restarts nothing in a run."""
    return time.strftime("%H.%M", time.gmtime(time.time() + 12 * 3600))


def _split(name: str) -> tuple[str, str]:
    namespace, _, short = name.partition("/")
    return short, namespace


def _label_namespace(objects: Objects, name: str, value: str) -> None:
    patch = {"metadata": {"labels": {LABEL: value}}}
    objects.core.patch_namespace(name, patch, _content_type=MERGE_PATCH, _preload_content=False)


# -- every run from the same state ---------------------------------------------------------


def reset(objects: Objects, layout: Layout) -> int:
    """Every source carries the records of its current data (as if restarter had seen
    every earlier change: Reloader's runs change them too), or none with
    ``layout.first_sight``, and the far window; no Deployment carries restarter's marks,
    pending label or finalizer. Returns how many objects needed a patch."""
    far = workload_far_window()
    patches: list[tuple[str, str, dict[str, Any]]] = []
    kinds = ["Secret", "ConfigMap"] if layout.bundle_kib else ["Secret"]
    for kind in kinds:
        for body in _labelled(objects, kind):
            metadata = body["metadata"]
            annotations = metadata.get("annotations") or {}
            wanted: dict[str, str | None]
            if layout.first_sight and metadata["name"] == SOURCE:
                wanted = dict.fromkeys(key for key in RECORDS if key in annotations)
            elif kind == "ConfigMap":
                wanted = {**records(layout, metadata["name"], body.get("data") or {})}
            else:
                wanted = {**workload.recorded(metadata["name"], body.get("data") or {})}
            if all(annotations.get(k) == v for k, v in wanted.items()):
                wanted = {}
            label = {keys.RESTART_AT_LABEL: far}
            patch = {"metadata": {"annotations": wanted, "labels": label}}
            patches.append((kind, qualified(metadata), patch))
    for metadata in objects.metadata("Deployment", WORKLOADS):
        patch = _unmarked(metadata)
        if patch:
            patches.append(("Deployment", qualified(metadata), patch))
    concurrently(lambda item: _patch(objects, *item), patches)
    return len(patches)


#: Sources per page of the harness's own list (a page of bundles is tens of MB).
LIST_PAGE = 100


def _labelled(objects: Objects, kind: str) -> Iterator[dict[str, Any]]:
    lister = (
        objects.core.list_secret_for_all_namespaces
        if kind == "Secret"
        else objects.core.list_config_map_for_all_namespaces
    )
    token = None
    while True:
        response = lister(
            label_selector=keys.RESTART_AT_LABEL,
            limit=LIST_PAGE,
            _continue=token,
            _preload_content=False,
        )
        page = json.loads(response.data)
        yield from page.get("items") or []
        token = page["metadata"].get("continue")
        if not token:
            return


def _unmarked(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The patch that takes restarter's marks, pending label and finalizer off, if any."""
    annotations = metadata.get("annotations") or {}
    marks = [k for k in annotations if k.startswith(keys.MARK_PREFIXES)]
    finalizers = metadata.get("finalizers") or []
    pending = keys.PENDING_LABEL in (metadata.get("labels") or {})
    if not marks and keys.FINALIZER not in finalizers and not pending:
        return None
    patch: dict[str, Any] = {"metadata": {"annotations": dict.fromkeys(marks)}}
    if pending:
        patch["metadata"]["labels"] = {keys.PENDING_LABEL: None}
    if keys.FINALIZER in finalizers:
        patch["metadata"]["finalizers"] = [f for f in finalizers if f != keys.FINALIZER]
    return patch


def _patch(objects: Objects, kind: str, name: str, patch: dict[str, Any]) -> None:
    short, namespace = _split(name)
    call = {
        "Secret": objects.core.patch_namespaced_secret,
        "ConfigMap": objects.core.patch_namespaced_config_map,
        "Deployment": objects.apps.patch_namespaced_deployment,
    }[kind]
    call(short, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False)
