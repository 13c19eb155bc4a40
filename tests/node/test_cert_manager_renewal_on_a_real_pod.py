"""cert-manager renews a certificate that a real pod mounts: after its restart, the pod
reads the renewed certificate (compared by serial number), printed from its own volume."""

from __future__ import annotations

import re
from collections.abc import Callable

import kubernetes
from cryptography import x509

from restarter.model import keys
from restarter_cluster.cert_manager import CertManager
from restarter_cluster.node import RealNode
from tests.conftest import wait_for
from tests.integration.test_cert_manager import (
    ca_issuer,
    certificate,
    create,
    leaf,
    ready,
    renew,
)
from tests.integration.test_operator_restarts import baseline, events, replica_sets
from tests.node.conftest import Release, app_deployment, running_pods

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
PEM = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)


def _serial_printed_by(real_node: RealNode, namespace: str, pod: str) -> int | None:
    found = PEM.search(real_node.log(namespace, pod, "app"))
    return x509.load_pem_x509_certificate(found.group().encode()).serial_number if found else None


def _the_one_pod_serial(core: Core, real_node: RealNode, namespace: str) -> tuple[str, int]:
    def one() -> tuple[str, int] | None:
        pods = running_pods(core, namespace, "app")
        if len(pods) != 1:
            return None
        serial = _serial_printed_by(real_node, namespace, pods[0].metadata.name)
        return (pods[0].metadata.name, serial) if serial is not None else None

    return wait_for(one, 120, message="one app pod printing its certificate")  # type: ignore[no-any-return]


def test_a_real_pod_reads_the_renewed_certificate_after_its_restart(
    cert_manager: CertManager,
    install: Callable[..., Release],
    core: Core,
    apps: Apps,
    custom: Custom,
    real_node: RealNode,
    namespace: str,
) -> None:
    ca_issuer(custom, namespace)
    template = {"labels": {keys.RESTART_AT_LABEL: "now"}}
    create(
        custom,
        namespace,
        certificate("app-tls", "ca", dnsNames=["app.example.test"], secretTemplate=template),
    )
    wait_for(lambda: ready(custom, namespace, "certificates", "app-tls"), 60, message="issued")
    apps.create_namespaced_deployment(
        namespace, app_deployment("app", "app-tls", script="cat /secret/tls.crt", env=False)
    )
    first_pod, first_serial = _the_one_pod_serial(core, real_node, namespace)
    assert first_serial == leaf(core, namespace, "app-tls").serial_number
    install([namespace])
    baseline(core, namespace, "app-tls")

    renew(custom, namespace, "app-tls")
    wait_for(
        lambda: leaf(core, namespace, "app-tls").serial_number != first_serial,
        60,
        message="renewed certificate",
    )
    renewed = leaf(core, namespace, "app-tls").serial_number

    def restarted_pod_reads_renewed() -> bool:
        pod, serial = _the_one_pod_serial(core, real_node, namespace)
        return pod != first_pod and serial == renewed

    wait_for(restarted_pod_reads_renewed, 120, message="the new pod printing the renewed cert")
    assert len(replica_sets(apps, namespace, "app")) == 2
    assert len(events(core, namespace, "app", "Restarted")) == 1
