"""SecretProviderClasses of the Secrets Store CSI Driver as sources, on the real control
plane with the driver's own CRDs (read from its pinned module): the status objects are
written as the driver writes them (named after pod, namespace and class, owned by the pod,
``status.podName``, ``secretProviderClassName``, ``mounted``, ``objects``), since no driver
runs on the cluster tier's nodes.

A class that syncs into a TLS Secret (``secretObjects``) gives its change the certificate
deadline of the certificate the pods ran with, as a Secret's change does.

Without the CRDs the operator warns once (in its log, and with a Warning Event on its own
Pod, named by the downward API's variables) and carries on; once they are installed it picks
them up without a restart. Only the workload that mounts the class is marked, once for the
versions all its pods report, and restarts in the class's window; Reloader's annotations
select classes as Reloader's CSI integration does.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from restarter.model import certificates, csi, keys
from restarter_cluster import secrets_store_csi
from restarter_cluster.cluster import Cluster
from tests.certificates import private_key, self_signed
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, window_hours_away, window_open_now
from tests.integration.test_operator_restarts import TICKS, events, pending
from tests.integration.test_plan_command import plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
OperatorFactory = Callable[..., Operator]
NOT_SERVED = "the Secrets Store CSI Driver's CRDs are not installed"
SERVED = "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io are served"


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Iterator[Callable[[], None]]:
    """The driver's CRDs absent at the start of the file; ``install()`` applies them; they
    go again at its end, so later files see a cluster without them."""
    secrets_store_csi.uninstall_crds(cluster)
    yield lambda: secrets_store_csi.install_crds(cluster) and None
    secrets_store_csi.uninstall_crds(cluster)


def provider_class(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{csi.GROUP}/{csi.VERSION}",
        "kind": "SecretProviderClass",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"provider": "fake", "parameters": {"objects": "db-password"}},
    }


def mounting(name: str, provider: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    volume = {
        "name": "secrets",
        "csi": {
            "driver": csi.DRIVER,
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": provider},
        },
    }
    return deployment(name, volumes=[volume], annotations=annotations)


def live_pods(core: Core, namespace: str, app: str) -> list[Any]:
    found = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return sorted(
        (pod for pod in found if pod.metadata.deletion_timestamp is None),
        key=lambda pod: pod.metadata.name,
    )


def report(
    custom: Custom, namespace: str, pod: Any, provider: str, version: str, object_id: str = ""
) -> None:
    """Create or update the pod's status object as the driver does on a mount or rotation."""
    name = f"{pod.metadata.name}-{namespace}-{provider}"
    target = f"/var/lib/kubelet/pods/{pod.metadata.uid}/volumes/kubernetes.io~csi/secrets/mount"
    body = {
        "apiVersion": f"{csi.GROUP}/{csi.VERSION}",
        "kind": "SecretProviderClassPodStatus",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"internal.secrets-store.csi.k8s.io/node-name": "node-0"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.metadata.name,
                    "uid": pod.metadata.uid,
                }
            ],
        },
        "status": {
            "podName": pod.metadata.name,
            "secretProviderClassName": provider,
            "mounted": True,
            "targetPath": target,
            "objects": [{"id": object_id or "db-password", "version": version}],
        },
    }
    args = (csi.GROUP, csi.VERSION, namespace, csi.POD_STATUSES)
    try:
        current = custom.get_namespaced_custom_object(*args, name)
    except kubernetes.client.exceptions.ApiException:
        custom.create_namespaced_custom_object(*args, body)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    custom.replace_namespaced_custom_object(*args, name, body)


def recorded_versions(apps: Apps, namespace: str, name: str, provider: str) -> str | None:
    annotations = apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}
    return annotations.get(csi.versions_key(provider))


def restarts(apps: Apps, namespace: str, name: str) -> str | None:
    annotations = apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}
    return annotations.get(keys.RESTART_TS)


def pods_of(core: Core, namespace: str, app: str, count: int) -> list[Any]:
    return list(
        wait_for(
            lambda: (found := live_pods(core, namespace, app)) and len(found) == count and found,
            60,
            message=f"{count} pods of {app}",
        )
    )


def own_pod(core: Core, namespace: str) -> Any:
    """A Pod object standing for the operator's own (the tests run it as a process)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restarter-7d9f8c6b5-x2k4p"},
        "spec": {"containers": [{"name": "restarter", "image": "localhost/restarter-app:1"}]},
    }
    return core.create_namespaced_pod(namespace, body)


def described_events(core: Core, pod: Any) -> list[Any]:
    """restarter's Events among those ``kubectl describe pod`` lists (found by the involved
    object's kind, name, namespace and uid; the scheduler posts its own there too)."""
    selector = ",".join(
        (
            "involvedObject.kind=Pod",
            f"involvedObject.name={pod.metadata.name}",
            f"involvedObject.namespace={pod.metadata.namespace}",
            f"involvedObject.uid={pod.metadata.uid}",
        )
    )
    found = core.list_namespaced_event(pod.metadata.namespace, field_selector=selector).items
    return [event for event in found if event.reporting_component == "restarter"]


def test_crds_absent_are_said_once_with_a_warning_event_on_the_operators_own_pod(
    core: Core, namespace: str, operator: OperatorFactory, crds: Callable[[], None]
) -> None:
    pod = own_pod(core, namespace)
    env = {"POD_NAME": pod.metadata.name, "POD_NAMESPACE": namespace, "POD_UID": pod.metadata.uid}
    running = operator("--csi", "--namespace", "default", env=env)
    wait_for(lambda: described_events(core, pod), 30, message="the Warning on the Pod")
    time.sleep(TICKS)  # a second discovery, and a second namespace's stream: still one
    [event] = described_events(core, pod)
    assert (event.type, event.reason) == ("Warning", "CSINotServed")
    assert "CRDs are not installed" in event.message
    assert "carries on with Secrets and ConfigMaps" in event.message
    assert "as soon as the CRDs are installed" in event.message
    assert running.log().count(NOT_SERVED) == 2  # one line per namespace watched


def test_crds_installed_after_start_are_picked_up_and_only_the_mounting_workload_restarts_once(
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    crds: Callable[[], None],
) -> None:
    running = operator("--csi")
    wait_for(lambda: NOT_SERVED in running.log(), 30, message="the warning")
    assert running.log().count(NOT_SERVED) == 1
    crds()  # installed while the operator runs
    wait_for(lambda: SERVED in running.log(), 40, message="the CRDs picked up")
    args = (csi.GROUP, csi.VERSION, namespace, csi.CLASSES)
    custom.create_namespaced_custom_object(
        *args, provider_class("vault-db", {"restart-at": window_open_now()})
    )
    apps.create_namespaced_deployment(namespace, mounting("api", "vault-db"))
    apps.create_namespaced_deployment(namespace, deployment("web"))
    api_pods = pods_of(core, namespace, "api", 2)
    for pod in api_pods:
        report(custom, namespace, pod, "vault-db", "1")
    wait_for(
        lambda: recorded_versions(apps, namespace, "api", "vault-db"), 30, message="first sight"
    )
    time.sleep(TICKS)
    assert restarts(apps, namespace, "api") is None  # first sight restarts nothing
    # Rotation: the pods report the new version one after the other.
    report(custom, namespace, api_pods[0], "vault-db", "2")
    wait_for(lambda: restarts(apps, namespace, "api"), 60, message="the restart in the window")
    report(custom, namespace, api_pods[1], "vault-db", "2")
    first = restarts(apps, namespace, "api")
    time.sleep(TICKS)
    assert restarts(apps, namespace, "api") == first  # one change, one restart
    assert not pending(apps, namespace, "api")
    assert not pending(apps, namespace, "web") and restarts(apps, namespace, "web") is None
    assert recorded_versions(apps, namespace, "web", "vault-db") is None
    detected = events(core, namespace, "vault-db", "ChangeDetected")
    assert len(detected) == 1 and "db-password" in detected[0].message
    # The restarted pods mount the version already seen: nothing more.
    for pod in pods_of(core, namespace, "api", 2):
        report(custom, namespace, pod, "vault-db", "2")
    time.sleep(TICKS)
    assert restarts(apps, namespace, "api") == first
    log = running.log()
    assert "Traceback" not in log and " ERROR " not in log


def test_reloaders_annotations_select_the_classes_they_name(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    crds: Callable[[], None],
) -> None:
    crds()
    args = (csi.GROUP, csi.VERSION, namespace, csi.CLASSES)
    custom.create_namespaced_custom_object(*args, provider_class("vault-db"))  # no label
    reload = {"secretproviderclass.reloader.stakater.com/reload": "vault-db"}
    auto = {"secretproviderclass.reloader.stakater.com/auto": "true"}
    apps.create_namespaced_deployment(namespace, mounting("listed", "vault-db", reload))
    apps.create_namespaced_deployment(namespace, mounting("auto", "vault-db", auto))
    apps.create_namespaced_deployment(namespace, mounting("plain", "vault-db"))
    # A far window, so that the marks stay to be looked at.
    operator("--csi", "--reloader-annotations", "--reloader-window", window_hours_away())
    names = ("listed", "auto", "plain")
    for name in names:
        for pod in pods_of(core, namespace, name, 2):
            report(custom, namespace, pod, "vault-db", "1")
    first = {
        name: wait_for(
            lambda n=name: recorded_versions(apps, namespace, n, "vault-db"), 30, message=name
        )
        for name in names
    }
    for name in names:
        for pod in live_pods(core, namespace, name):
            report(custom, namespace, pod, "vault-db", "2")
    for name in ("listed", "auto"):
        wait_for(lambda n=name: pending(apps, namespace, n), 30, message=f"{name} marked")
    marks = pending(apps, namespace, "auto")
    window = json.loads(next(v for k, v in marks.items() if k.startswith(keys.WINDOW_MARK)))
    assert window["source"] == "SecretProviderClass/vault-db"
    # restarter plan says what is pending, from which class, which objects and whose window.
    rows = {row["name"]: row for row in plan_json(cluster.kubeconfig, "-n", namespace)}
    assert set(rows) == {"listed", "auto"}
    assert rows["auto"]["source"] == "SecretProviderClass/vault-db"
    assert rows["auto"]["changedKeys"] == ["db-password"]
    assert rows["auto"]["windowFrom"] == "reloader-default"
    # Asked by nobody: recorded, not marked.
    wait_for(
        lambda: recorded_versions(apps, namespace, "plain", "vault-db") != first["plain"],
        30,
        message="the new version recorded on plain",
    )
    time.sleep(TICKS)
    assert not pending(apps, namespace, "plain")


def tls_secret(name: str, expires: dt.datetime) -> dict[str, Any]:
    """The Secret the driver syncs a class's certificate and key into."""
    data = {"tls.crt": self_signed(expires), "tls.key": private_key()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/tls",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


def syncing_class(name: str, secret: str, labels: dict[str, str], margin: str) -> dict[str, Any]:
    body = provider_class(name, labels)
    body["metadata"]["annotations"] = {keys.CERTIFICATE_MARGIN: margin}
    body["spec"]["parameters"] = {"objects": "tls-cert,tls-key"}
    body["spec"]["secretObjects"] = [
        {
            "secretName": secret,
            "type": "kubernetes.io/tls",
            "data": [
                {"objectName": "tls-cert", "key": "tls.crt"},
                {"objectName": "tls-key", "key": "tls.key"},
            ],
        }
    ]
    return body


def test_a_class_synced_into_a_tls_secret_restarts_by_the_certificate_deadline(
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
    crds: Callable[[], None],
) -> None:
    crds()
    # The certificate the pods start with expires 59 m 40 s from now; a 59 m margin puts
    # its deadline 40 s away, hours before the class's window.
    old = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=59, seconds=40)).replace(microsecond=0)
    core.create_namespaced_secret(namespace, tls_secret("shop-tls", old))
    labels = {keys.RESTART_AT_LABEL: window_hours_away(6)}
    args = (csi.GROUP, csi.VERSION, namespace, csi.CLASSES)
    custom.create_namespaced_custom_object(
        *args, syncing_class("vault-tls", "shop-tls", labels, "59m")
    )
    apps.create_namespaced_deployment(namespace, mounting("web", "vault-tls"))
    running = operator("--csi")
    web_pods = pods_of(core, namespace, "web", 2)
    for pod in web_pods:
        report(custom, namespace, pod, "vault-tls", "1", "tls-cert")
    expiry_key = csi.not_after_key("vault-tls")
    recorded = wait_for(
        lambda: annotations_of(apps, namespace, "web").get(expiry_key), 30, message="first sight"
    )
    assert json.loads(recorded) == {
        "notAfter": certificates.format_instant(old),
        "secret": "shop-tls",
    }
    # Rotation: as the driver may, it syncs the renewed certificate into the Secret before
    # restarter reads the new versions; the pods still run the old one.
    renewed = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=90)
    core.replace_namespaced_secret("shop-tls", namespace, tls_secret("shop-tls", renewed))
    for pod in web_pods:
        report(custom, namespace, pod, "vault-tls", "2", "tls-cert")
    stamped = wait_for(lambda: deadlines(apps, namespace, "web"), 20, message="a deadline")
    deadline_at = int((old - dt.timedelta(minutes=59)).timestamp())
    source = "Secret/shop-tls synced from SecretProviderClass/vault-tls"
    assert stamped == {
        f"{keys.DEADLINE}/{deadline_at}": json.dumps(
            {"notAfter": certificates.format_instant(old), "source": source},
            separators=(",", ":"),
        )
    }
    [scheduled] = events(core, namespace, "web", "RestartScheduled")
    assert f"before its window: the certificate it runs with ({source}) expires at" in (
        scheduled.message
    )
    wait_for(lambda: restarts(apps, namespace, "web"), 90, message="the restart by the deadline")
    web = apps.read_namespaced_deployment("web", namespace)
    restarted_at = dt.datetime.fromisoformat(
        web.spec.template.metadata.annotations[keys.KUBECTL_RESTARTED_AT]
    )
    assert restarted_at.timestamp() >= deadline_at
    # What `kubectl describe deployment web` shows.
    [restarted] = wait_for(
        lambda: events(core, namespace, "web", "Restarted"), 30, message="a Restarted Event"
    )
    assert restarted.type == "Normal"
    assert (
        f"before its window: the certificate it runs with ({source}) expires at "
        f"{certificates.format_instant(old)}" in restarted.message
    )
    assert not pending(apps, namespace, "web") and not deadlines(apps, namespace, "web")
    # The renewed certificate's expiry is the one recorded for the next change.
    assert json.loads(annotations_of(apps, namespace, "web")[expiry_key]) == {
        "notAfter": certificates.format_instant(renewed),
        "secret": "shop-tls",
    }
    # Never a value: not the key, not the certificate, in the log or any Event.
    log = running.log()
    secret_values = [base64.b64encode(private_key()).decode(), "PRIVATE KEY", "BEGIN CERTIFICATE"]
    said = log + "".join(str(e.message) for e in core.list_namespaced_event(namespace).items)
    assert not [value for value in secret_values if value in said]
    assert "Traceback" not in log and " ERROR " not in log


def annotations_of(apps: Apps, namespace: str, name: str) -> dict[str, str]:
    return dict(apps.read_namespaced_deployment(name, namespace).metadata.annotations or {})


def deadlines(apps: Apps, namespace: str, name: str) -> dict[str, str]:
    found = annotations_of(apps, namespace, name)
    return {k: v for k, v in found.items() if k.startswith(keys.DEADLINE + "/")}
