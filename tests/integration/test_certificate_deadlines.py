"""Certificate deadlines on the real control plane: a renewal restarts the dependents before
a window hours away when the certificate they run with would expire first; a Secret with no
certificate behaves as before; a change made while the operator was down still respects
the expiry recorded before it."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable

import kubernetes

from restarter.model import certificates, keys
from restarter_cluster.cert_manager import CertManager
from restarter_cluster.cluster import Cluster
from tests.certificates import self_signed
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, secret, window_hours_away
from tests.integration.test_cert_manager import (
    certificate,
    create,
    fingerprint,
    leaf,
    ready,
    renew,
    web_mounting_its_certificate,
)
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    rollout_finished,
    secret_and_dependent,
)
from tests.integration.test_plan_command import plan_json

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
Custom = kubernetes.client.CustomObjectsApi
OperatorFactory = Callable[..., Operator]


def deadlines(apps: Apps, namespace: str, name: str) -> dict[str, str]:
    annotations = apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}
    return {k: v for k, v in annotations.items() if k.startswith(keys.DEADLINE + "/")}


def not_after(core: Core, namespace: str, name: str) -> str | None:
    annotations = core.read_namespaced_secret(name, namespace).metadata.annotations or {}
    return annotations.get(keys.NOT_AFTER)


def restarted_message(core: Core, namespace: str, name: str) -> tuple[str, str]:
    found = wait_for(
        lambda: events(core, namespace, name, "Restarted"), 30, message="a Restarted Event"
    )
    return str(found[0].type), str(found[0].message)


def test_a_renewal_restarts_before_a_window_hours_away_when_the_old_certificate_expires_first(
    cluster: Cluster,
    cert_manager: CertManager,
    core: Core,
    apps: Apps,
    custom: Custom,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    web_mounting_its_certificate(cluster, apps, custom, namespace)
    operator()
    far = window_hours_away(6)
    # cert-manager's shortest duration (1 h); a 59 m margin puts the deadline a minute
    # after issuance, hours before the window.
    create(
        custom,
        namespace,
        certificate(
            "web-tls",
            "ca",
            dnsNames=["web.example.test"],
            duration="1h",
            secretTemplate={
                "labels": {keys.RESTART_AT_LABEL: far},
                "annotations": {keys.CERTIFICATE_MARGIN: "59m"},
            },
        ),
    )
    wait_for(lambda: ready(custom, namespace, "certificates", "web-tls"), 60, message="issued")
    baseline(core, namespace, "web-tls")
    first = leaf(core, namespace, "web-tls").not_valid_after_utc
    recorded = wait_for(lambda: not_after(core, namespace, "web-tls"), 30, message="not-after")
    assert recorded == certificates.format_instant(first)  # the leaf's, not the CA's

    before = fingerprint(core, namespace, "web-tls")
    renew(custom, namespace, "web-tls")
    wait_for(lambda: fingerprint(core, namespace, "web-tls") != before, 60, message="renewal")
    stamped = wait_for(lambda: deadlines(apps, namespace, "web"), 20, message="a deadline")
    deadline_at = int((first - dt.timedelta(minutes=59)).timestamp())
    assert stamped == {
        f"{keys.DEADLINE}/{deadline_at}": json.dumps(
            {"notAfter": recorded, "source": "Secret/web-tls"}, separators=(",", ":")
        )
    }
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2,
        150,
        interval=1,
        message="the restart at the certificate's deadline",
    )
    kind, message = restarted_message(core, namespace, "web")
    assert kind == "Normal"
    assert (
        f"before its window: the certificate it runs with (Secret/web-tls) expires at {recorded}"
        in message
    )
    web = apps.read_namespaced_deployment("web", namespace)
    restarted_at = dt.datetime.fromisoformat(
        web.spec.template.metadata.annotations[keys.KUBECTL_RESTARTED_AT]
    )
    assert restarted_at.timestamp() >= deadline_at
    assert pending(apps, namespace, "web") == {} and deadlines(apps, namespace, "web") == {}
    # The renewed certificate's expiry is now the one recorded.
    renewed = leaf(core, namespace, "web-tls").not_valid_after_utc
    assert not_after(core, namespace, "web-tls") == certificates.format_instant(renewed)


def test_a_secret_without_a_certificate_records_no_expiry_and_waits_for_its_window(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    secret_and_dependent(core, apps, namespace, window_hours_away(6))
    operator()
    baseline(core, namespace, "db")
    assert not_after(core, namespace, "db") is None
    change_data(core, namespace, "db", "b")
    wait_for(lambda: pending(apps, namespace, "web"), 20, message="marks")
    time.sleep(TICKS)
    assert deadlines(apps, namespace, "web") == {}
    assert len(replica_sets(apps, namespace, "web")) == 1
    assert not_after(core, namespace, "db") is None


def test_a_change_made_while_the_operator_was_down_respects_the_recorded_expiry(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    # The certificate the pods run with expired a minute ago; the window is hours away.
    expired = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    core.create_namespaced_secret(
        namespace, secret("tls", {"tls.crt": self_signed(expired).decode()}, window_hours_away(6))
    )
    apps.create_namespaced_deployment(
        namespace, deployment("web", volumes=[{"name": "tls", "secret": {"secretName": "tls"}}])
    )
    rollout_finished(cluster, namespace, "web")
    first = operator()
    baseline(core, namespace, "tls")
    recorded = not_after(core, namespace, "tls")
    assert recorded == certificates.format_instant(expired.replace(microsecond=0))
    first.stop()

    renewed = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    core.patch_namespaced_secret(
        "tls",
        namespace,
        {"data": {"tls.crt": base64.b64encode(self_signed(renewed)).decode()}},
    )
    operator()
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2,
        60,
        message="the restart at once for the expired certificate",
    )
    kind, message = restarted_message(core, namespace, "web")
    assert kind == "Warning"
    assert f"the certificate it runs with (Secret/tls) expired at {recorded}" in message
    assert not_after(core, namespace, "tls") == certificates.format_instant(
        renewed.replace(microsecond=0)
    )


def test_a_workload_pending_across_two_changes_keeps_the_first_deadline(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    running_with = now + dt.timedelta(hours=3)  # the certificate the pods start with
    core.create_namespaced_secret(
        namespace,
        secret("tls", {"tls.crt": self_signed(running_with).decode()}, window_hours_away(6)),
    )
    apps.create_namespaced_deployment(
        namespace, deployment("web", volumes=[{"name": "tls", "secret": {"secretName": "tls"}}])
    )
    operator()
    baseline(core, namespace, "tls")
    first_deadline = f"{keys.DEADLINE}/{int((running_with - dt.timedelta(hours=1)).timestamp())}"
    for days in (30, 60):
        renewed = base64.b64encode(self_signed(now + dt.timedelta(days=days))).decode()
        core.patch_namespaced_secret("tls", namespace, {"data": {"tls.crt": renewed}})
        wait_for(
            lambda days=days: (
                not_after(core, namespace, "tls")
                == certificates.format_instant(now + dt.timedelta(days=days))
            ),
            30,
            message="the renewed expiry recorded",
        )
    stamped = deadlines(apps, namespace, "web")
    assert len(stamped) == 2 and first_deadline in stamped  # each change's, the first kept
    (row,) = plan_json(cluster.kubeconfig, "-n", namespace)
    assert row["nextRestartUtc"] == certificates.format_instant(
        running_with - dt.timedelta(hours=1)
    )
    assert row["notes"][-1] == (
        "before its window: the certificate it runs with (Secret/tls) expires at "
        f"{certificates.format_instant(running_with)}"
    )
    assert len(replica_sets(apps, namespace, "web")) == 1
