"""The naive baseline: what the simplest published kopf examples do.

Every Secret of the namespace is watched (no label selector). When a Secret's data
changes, every Deployment of the namespace is listed and each one using the Secret is
restarted at once (``restartedAt`` patched, as ``kubectl rollout restart`` does). It
keeps a digest of each Secret's data in memory so that metadata-only updates and
re-lists restart nothing: without that it would not be comparable at all.

Run: ``python -m bench.naive --namespace NS``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
from typing import Any

import kopf
import kubernetes

#: Annotation the baseline writes on a Deployment: the resourceVersion of the Secret it acted on.
STAMP_PREFIX = "naive.bench/secret."
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def uses_secret(pod_spec: Any, secret: str) -> bool:
    """Does a pod spec (kubernetes client model) read the Secret through env or a volume?"""
    for volume in pod_spec.volumes or []:
        if volume.secret and volume.secret.secret_name == secret:
            return True
        for source in (volume.projected.sources or []) if volume.projected else []:
            if source.secret and source.secret.name == secret:
                return True
    for container in (pod_spec.containers or []) + (pod_spec.init_containers or []):
        for env_from in container.env_from or []:
            if env_from.secret_ref and env_from.secret_ref.name == secret:
                return True
        for env in container.env or []:
            reference = env.value_from.secret_key_ref if env.value_from else None
            if reference and reference.name == secret:
                return True
    return False


def register(apps: kubernetes.client.AppsV1Api) -> None:
    digests: dict[tuple[str, str], str] = {}

    @kopf.on.login()
    def login(**kwargs: Any) -> Any:
        return kopf.login_via_client(**kwargs)

    @kopf.on.event("v1", "secrets")
    def secret_event(event: Any, body: Any, namespace: str, name: str, **_: Any) -> None:
        data = json.dumps(dict(body.get("data") or {}), sort_keys=True)
        digest = hashlib.sha256(data.encode()).hexdigest()
        previous = digests.get((namespace, name))
        digests[namespace, name] = digest
        if event.get("type") != "MODIFIED" or previous in (None, digest):
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {
            "metadata": {"annotations": {STAMP_PREFIX + name: body["metadata"]["resourceVersion"]}},
            "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}},
        }
        for deployment in apps.list_namespaced_deployment(namespace).items:
            if uses_secret(deployment.spec.template.spec, name):
                apps.patch_namespaced_deployment(deployment.metadata.name, namespace, patch)


def main() -> None:
    parser = argparse.ArgumentParser(prog="naive", description=__doc__)
    parser.add_argument("--namespace", required=True)
    args = parser.parse_args()
    kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    register(kubernetes.client.AppsV1Api())
    kopf.configure(verbose=False)
    kopf.run(standalone=True, namespaces=[args.namespace], clusterwide=False)


if __name__ == "__main__":
    main()
