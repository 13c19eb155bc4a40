"""The kopf handlers: each a decorator, a docstring and a call into a flow."""

from __future__ import annotations

import datetime as dt
from typing import Any

import kopf

from restarter import keys
from restarter.decisions import has_pending
from restarter.kube import Api
from restarter.reconciling import reconcile_secret, restart_if_due
from restarter.references import SECRET, references
from restarter.settings import Settings


def build_registry(settings: Settings, api: Api) -> kopf.OperatorRegistry:
    """Register every handler with the decorator arguments the settings give."""
    registry = kopf.OperatorRegistry()
    seen_checksums: dict[tuple[str, str], str] = {}

    @kopf.on.login(registry=registry, id="login")
    def login(**kwargs: Any) -> Any:
        """kopf's own connection uses the same credentials as the kubernetes client."""
        return kopf.login_via_client(**kwargs)

    @kopf.index("apps", "v1", "deployments", registry=registry, id="deployment_references")
    def deployment_references(namespace: str, name: str, spec: Any, **_: Any) -> dict[Any, str]:
        """(namespace, kind, source name) → names of Deployments whose pods use it."""
        pod_spec = (spec.get("template") or {}).get("spec")
        return {(namespace, ref.kind, ref.name): name for ref in references(pod_spec)}

    @kopf.on.event(
        "v1",
        "secrets",
        registry=registry,
        id="secret_event",
        labels={keys.RESTART_AT_LABEL: kopf.PRESENT},
    )
    def secret_event(
        event: Any, body: Any, logger: Any, deployment_references: kopf.Index[Any, str], **_: Any
    ) -> None:
        """A labelled Secret was listed, added or modified: compare its checksum."""
        if event.get("type") == "DELETED":
            return
        key = (body["metadata"]["namespace"], SECRET, body["metadata"]["name"])
        dependents = list(deployment_references.get(key, []))
        now = dt.datetime.now(dt.UTC)
        reconcile_secret(body, dependents, settings, api, now, logger, seen_checksums)

    @kopf.timer(
        "apps",
        "v1",
        "deployments",
        id="pending_restart",
        registry=registry,
        interval=settings.timer_interval,
        when=lambda annotations, **_: has_pending(annotations),
    )
    def pending_restart(body: Any, memo: Any, logger: Any, **_: Any) -> None:
        """A Deployment with pending marks: restart it when its window is open."""
        restart_if_due(body, settings, api, dt.datetime.now(dt.UTC), memo, logger)

    @kopf.on.cleanup(registry=registry, id="release_finalizers")
    def release_finalizers(logger: Any, **_: Any) -> None:
        """On exit, let pending Deployments be deleted while no operator runs.

        Their marks stay; the next start re-adds the finalizer with the timer.
        """
        released = api.release_finalizer(keys.FINALIZER, settings.namespaces)
        if released:
            logger.info(f"released the finalizer of {len(released)} pending Deployment(s)")

    return registry
