"""cert-manager end to end: a real renewal of a CA-issued Certificate restarts its
Deployment once, when the window in the Secret's own zone opens; cert-manager's
metadata-only rewrites of the Secret restart nothing."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytz
from cryptography import x509

from restarter.model import keys
from restarter_cluster.cert_manager import CertManager
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    events,
    pending,
    replica_sets,
    rollout_finished,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
OperatorFactory = Callable[..., Operator]

GROUP, VERSION = "cert-manager.io", "v1"
ZONE = "Asia/Kolkata"  # UTC+05:30: the window is read in the Secret's zone, not UTC


def issuer(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Issuer",
        "metadata": metadata,
        "spec": spec,
    }


def certificate(name: str, issuer_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Certificate",
        "metadata": {"name": name},
        "spec": {
            "secretName": name,
            "issuerRef": {"name": issuer_name, "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
            **spec,
        },
    }


def create(custom: Custom, namespace: str, body: dict[str, Any]) -> None:
    plural = body["kind"].lower() + "s"
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else None


def ready(custom: Custom, namespace: str, plural: str, name: str) -> bool:
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    state = condition(obj, "Ready")
    return bool(state and state["status"] == "True")


def ca_issuer(custom: Custom, namespace: str) -> None:
    """Issuer ``ca`` signing with a CA keypair that a self-signed Issuer made."""
    create(custom, namespace, issuer("selfsigned", {"selfSigned": {}}))
    create(
        custom,
        namespace,
        certificate("root-ca", "selfsigned", isCA=True, commonName="restarter test CA"),
    )
    create(custom, namespace, issuer("ca", {"ca": {"secretName": "root-ca"}}))
    wait_for(lambda: ready(custom, namespace, "issuers", "ca"), 60, message="CA Issuer Ready")


def web_mounting_its_certificate(
    cluster: Cluster, apps: Apps, custom: Custom, namespace: str
) -> None:
    """The CA Issuer, and Deployment ``web`` mounting Secret ``web-tls`` (its certificate,
    not issued yet), rolled out."""
    ca_issuer(custom, namespace)
    apps.create_namespaced_deployment(
        namespace,
        deployment("web", volumes=[{"name": "tls", "secret": {"secretName": "web-tls"}}]),
    )
    rollout_finished(cluster, namespace, "web")


def renew(custom: Custom, namespace: str, name: str) -> None:
    """What ``cmctl renew`` does: set the Certificate's Issuing condition to True."""
    cert = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "certificates", name)
    conditions = [c for c in cert["status"].get("conditions", []) if c["type"] != "Issuing"]
    conditions.append(
        {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "observedGeneration": cert["metadata"]["generation"],
        }
    )
    cert["status"]["conditions"] = conditions
    custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "certificates", name, cert
    )


def fingerprint(core: Core, namespace: str, name: str) -> str:
    """SHA-256 over the Secret's data: compares contents without showing them."""
    data = core.read_namespaced_secret(name, namespace).data or {}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def leaf(core: Core, namespace: str, name: str) -> x509.Certificate:
    pem = core.read_namespaced_secret(name, namespace).data["tls.crt"]
    return x509.load_pem_x509_certificate(base64.b64decode(pem))


def next_window(zone: str, lead: dt.timedelta) -> tuple[str, dt.datetime]:
    """HH.MM of the first whole minute at least ``lead`` from now in ``zone``, and its UTC start."""
    local = dt.datetime.now(pytz.timezone(zone)) + lead
    start = (local + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    return start.strftime("%H.%M"), start.astimezone(dt.UTC)


def test_a_renewed_certificate_restarts_its_deployment_once_in_the_window_of_its_zone(
    cluster: Cluster,
    cert_manager: CertManager,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    web_mounting_its_certificate(cluster, apps, custom, namespace)
    running = operator("--timezone", "UTC")
    window, opens = next_window(ZONE, dt.timedelta(seconds=60))
    create(
        custom,
        namespace,
        certificate(
            "web-tls",
            "ca",
            dnsNames=["web.example.test"],
            secretTemplate={
                "labels": {keys.RESTART_AT_LABEL: window},
                "annotations": {keys.TIMEZONE: ZONE},
            },
        ),
    )

    # First issuance: the Secret appears labelled, signed by the CA; it is the baseline.
    wait_for(lambda: ready(custom, namespace, "certificates", "web-tls"), 60, message="issued")
    first_checksum = baseline(core, namespace, "web-tls")
    issued = core.read_namespaced_secret("web-tls", namespace)
    assert issued.metadata.labels[keys.RESTART_AT_LABEL] == window
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(issued.data)
    assert leaf(core, namespace, "web-tls").issuer == leaf(core, namespace, "root-ca").subject
    first = fingerprint(core, namespace, "web-tls")
    time.sleep(TICKS)
    assert pending(apps, namespace, "web") == {}
    assert len(replica_sets(apps, namespace, "web")) == 1

    # A renewal (new key and certificate) stamps the Deployment; the window is not open yet.
    renew(custom, namespace, "web-tls")
    wait_for(lambda: fingerprint(core, namespace, "web-tls") != first, 60, message="renewed data")
    marks = wait_for(lambda: pending(apps, namespace, "web"), 20, message="pending marks")
    mark = json.loads(marks[keys.window_key("secret", "web-tls")])
    assert mark.pop("change").isdigit()  # the Secret's resourceVersion, nothing of its data
    # The keys the renewal rewrote, by name (the issuer and the key's rotation policy decide
    # whether ca.crt and tls.key change too).
    changed = set(mark.pop("keys"))
    assert "tls.crt" in changed and changed <= {"ca.crt", "tls.crt", "tls.key"}
    assert mark == {
        "at": window,
        "timezone": ZONE,
        "length": "1h",
        "source": "Secret/web-tls",
    }
    assert marks[keys.pending_key("secret", "web-tls")].isdigit()
    web = apps.read_namespaced_deployment("web", namespace)
    # Until its window opens no timer holds it: no pending label, no finalizer.
    assert keys.PENDING_LABEL not in (web.metadata.labels or {})
    assert keys.FINALIZER not in (web.metadata.finalizers or [])
    # Posted by the stamp's own thread right after the stamp: it may trail the marks.
    wait_for(
        lambda: events(core, namespace, "web", "RestartScheduled"),
        20,
        message="the RestartScheduled Event",
    )
    wait_for(
        lambda: baseline(core, namespace, "web-tls") != first_checksum,
        20,
        message="the renewed data's checksum recorded",
    )
    assert dt.datetime.now(dt.UTC) < opens, "setup outlasted the lead: the window opened early"
    assert len(replica_sets(apps, namespace, "web")) == 1

    # The window opens: one restart, marks and label gone in the same write.
    wait_time = (opens - dt.datetime.now(dt.UTC)).total_seconds() + 30
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2,
        wait_time,
        interval=1,
        message="the restart when the window opens",
    )
    rollout_finished(cluster, namespace, "web")
    web = apps.read_namespaced_deployment("web", namespace)
    restarted_at = dt.datetime.fromisoformat(
        web.spec.template.metadata.annotations[keys.KUBECTL_RESTARTED_AT]
    )
    assert restarted_at >= opens
    assert pending(apps, namespace, "web") == {}
    assert keys.PENDING_LABEL not in (web.metadata.labels or {})
    assert len(events(core, namespace, "web", "Restarted")) == 1

    # cert-manager rewrites the Secret's metadata (a new template annotation) without new
    # data: inside the open window, nothing is stamped and nothing restarts.
    renewed = fingerprint(core, namespace, "web-tls")
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "certificates",
        "web-tls",
        {"spec": {"secretTemplate": {"annotations": {"team": "payments"}}}},
    )
    wait_for(
        lambda: (
            (core.read_namespaced_secret("web-tls", namespace).metadata.annotations or {}).get(
                "team"
            )
            == "payments"
        ),
        30,
        message="cert-manager's annotation rewrite",
    )
    time.sleep(TICKS)
    assert fingerprint(core, namespace, "web-tls") == renewed
    assert pending(apps, namespace, "web") == {}
    assert len(replica_sets(apps, namespace, "web")) == 2
    assert len(events(core, namespace, "web", "Restarted")) == 1

    # Neither the operator's log nor the Secret's annotations carry any of its data.
    stored = core.read_namespaced_secret("web-tls", namespace)
    log = running.log()
    assert not any(value[:32] in log for value in stored.data.values())
    assert "PRIVATE KEY" not in log
    assert not [key for key in stored.metadata.annotations if "kopf" in key]
