"""The kopf handlers: each a decorator, a docstring and a call into a flow."""

from __future__ import annotations

import datetime as dt
from typing import Any

import kopf
import kubernetes

from restarter import keys
from restarter.decisions import has_pending
from restarter.kube import Api
from restarter.reconciling import reconcile_source, restart_if_due
from restarter.references import SOURCE_KINDS, WORKLOAD_KINDS, workload_references
from restarter.releasing import FinalizerReleaser, ReleaseFailed
from restarter.settings import Settings

#: Source kind → the kopf resource plural watched for it.
SOURCE_RESOURCES = {"secret": "secrets", "configmap": "configmaps"}


def index_id(plural: str) -> str:
    return f"{plural}_references"


def build_registry(settings: Settings, api: Api) -> kopf.OperatorRegistry:
    """Register every handler with the decorator arguments the settings give."""
    registry = kopf.OperatorRegistry()
    seen_checksums: dict[tuple[str, str, str], str] = {}

    @kopf.on.login(registry=registry, id="login")
    def login(**kwargs: Any) -> Any:
        """kopf's own connection uses the same credentials as the kubernetes client."""
        return kopf.login_via_client(**kwargs)

    for plural in WORKLOAD_KINDS:
        _register_workload(registry, plural, settings, api)

    for kind in SOURCE_KINDS:
        _register_source(registry, kind, settings, api, seen_checksums)

    @kopf.on.cleanup(registry=registry, id="release_finalizers")
    def release_finalizers(logger: Any, **_: Any) -> None:
        """On exit, let pending workloads be deleted while no operator runs.

        Their marks stay; the next start re-adds the finalizer with the timer.
        """
        apps = kubernetes.client.AppsV1Api(api.client)
        try:
            released = FinalizerReleaser(apps, settings.namespaces, logger.debug).release_all()
        except ReleaseFailed as error:
            logger.error(f"could not release the finalizer of pending workloads: {error}")
            return
        if released:
            logger.info(f"released the finalizer of {len(released)} pending workload(s)")

    return registry


def _register_workload(
    registry: kopf.OperatorRegistry, plural: str, settings: Settings, api: Api
) -> None:
    @kopf.index("apps", "v1", plural, registry=registry, id=index_id(plural))
    def workload_references_index(
        namespace: str, name: str, annotations: Any, spec: Any, **_: Any
    ) -> dict[Any, tuple[str, str]]:
        """(namespace, source kind, source name) → (plural, name) of workloads using it."""
        pod_spec = (spec.get("template") or {}).get("spec")
        found = workload_references(annotations, pod_spec)
        return {(namespace, ref.kind, ref.name): (plural, name) for ref in found}

    @kopf.timer(
        "apps",
        "v1",
        plural,
        id=f"pending_restart_{plural}",
        registry=registry,
        interval=settings.timer_interval,
        when=lambda annotations, **_: has_pending(annotations),
    )
    def pending_restart(body: Any, memo: Any, logger: Any, **_: Any) -> None:
        """A workload with pending marks: restart it when its window is open."""
        restart_if_due(plural, body, settings, api, dt.datetime.now(dt.UTC), memo, logger)


def _register_source(
    registry: kopf.OperatorRegistry,
    kind: str,
    settings: Settings,
    api: Api,
    seen_checksums: dict[tuple[str, str, str], str],
) -> None:
    @kopf.on.event(
        "v1",
        SOURCE_RESOURCES[kind],
        registry=registry,
        id=f"{kind}_event",
        labels={keys.RESTART_AT_LABEL: kopf.PRESENT},
    )
    def source_event(event: Any, body: Any, logger: Any, **kwargs: Any) -> None:
        """A labelled source was listed, added or modified: compare its checksum."""
        if event.get("type") == "DELETED":
            return
        key = (body["metadata"]["namespace"], kind, body["metadata"]["name"])
        dependents = [
            dependent
            for plural in WORKLOAD_KINDS
            for dependent in kwargs[index_id(plural)].get(key, [])
        ]
        now = dt.datetime.now(dt.UTC)
        reconcile_source(kind, body, dependents, settings, api, now, logger, seen_checksums)
