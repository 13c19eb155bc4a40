"""The operator's requests throttled with 429 by API Priority and Fairness.

The operator runs as a ServiceAccount of its own (a bound token in its kubeconfig), so
a FlowSchema can match it and nothing else. That FlowSchema sends its requests to a
PriorityLevelConfiguration with the smallest share there is (nominalConcurrencyShares
1, no lending or borrowing) and one queue of length 1: the apiserver rejects with 429
whatever does not fit. Secret ``db`` (label ``restart-at=now``) with 50 dependents then
changes ``CHANGES`` times; each change must stamp and restart every dependent once.
The apiserver's ``apiserver_flowcontrol_rejected_requests_total`` for that priority
level proves the 429s happened.

Run with ``pytest tests/faults/test_apf_throttling.py -s``.
"""

from __future__ import annotations

import json
import re
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import yaml

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.faults import NO_PACING
from tests.faults.ledger import Ledger, eventually, report, restarts_without_replica_set
from tests.faults.test_sigkill_fan_out import (
    DEPENDENTS,
    checksum_of,
    create_dependents,
    pending_workloads,
)
from tests.integration.factories import secret
from tests.integration.test_operator_restarts import baseline, change_data

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

CHANGES = 3
SETTLE = 3.0
#: Seconds a change may take to be stamped and restarted everywhere while throttled.
SETTLE_TIMEOUT = 120.0
SERVICE_ACCOUNT = "restarter"


def rejected_requests(cluster: Cluster, priority_level: str) -> int:
    """Requests the apiserver rejected (429) at ``priority_level``, from its metrics."""
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{") and (
            f'priority_level="{priority_level}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


@pytest.fixture
def throttled_kubeconfig(
    cluster: Cluster, core: Core, namespace: str, tmp_path: Path
) -> Iterator[tuple[Path, str, str]]:
    """A kubeconfig for ServiceAccount ``restarter`` of the namespace, whose requests a
    FlowSchema sends to a tiny priority level: (kubeconfig, token, priority level)."""
    core.create_namespaced_service_account(namespace, {"metadata": {"name": SERVICE_ACCOUNT}})
    rbac = kubernetes.client.RbacAuthorizationV1Api(core.api_client)
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": SERVICE_ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}
            ],
        },
    )
    token = core.create_namespaced_service_account_token(
        SERVICE_ACCOUNT, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"] = [{"name": SERVICE_ACCOUNT, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = SERVICE_ACCOUNT
    path = tmp_path / "throttled.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)

    flowcontrol = kubernetes.client.FlowcontrolApiserverV1Api(core.api_client)
    name = f"restarter-throttled-{namespace}"
    flowcontrol.create_priority_level_configuration(
        {
            "metadata": {"name": name},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 1,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {
                        "type": "Queue",
                        "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1},
                    },
                },
            },
        }
    )
    flowcontrol.create_flow_schema(
        {
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                # Before the built-in "service-accounts" schema (9000).
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"name": SERVICE_ACCOUNT, "namespace": namespace},
                            }
                        ],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        }
    )
    try:
        yield path, token, name
    finally:
        flowcontrol.delete_flow_schema(name)
        flowcontrol.delete_priority_level_configuration(name)


def matched_priority_level(cluster: Cluster, namespace: str, token: str) -> str | None:
    """The priority level's UID the apiserver names for a request with ``token``."""
    context = ssl.create_default_context(cafile=str(cluster.pki_dir / "ca.crt"))
    request = urllib.request.Request(
        f"{cluster.server}/api/v1/namespaces/{namespace}/secrets",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        value = response.headers.get("X-Kubernetes-PF-PriorityLevel-UID")
        return str(value) if value else None


def test_throttled_with_429s_every_stamp_and_restart_still_lands(
    cluster: Cluster,
    api_client: kubernetes.client.ApiClient,
    core: Core,
    apps: Apps,
    namespace: str,
    tmp_path: Path,
    throttled_kubeconfig: tuple[Path, str, str],
) -> None:
    kubeconfig, token, level = throttled_kubeconfig
    flowcontrol = kubernetes.client.FlowcontrolApiserverV1Api(api_client)
    level_uid = flowcontrol.read_priority_level_configuration(level).metadata.uid
    wait_for(
        lambda: matched_priority_level(cluster, namespace, token) == level_uid,
        30,
        message="the operator's identity matched by the tiny priority level",
    )
    core.create_namespaced_secret(namespace, secret("db", {"password": "v0"}, "now"))
    create_dependents(apps, namespace, "db")
    args = ["--namespace", namespace, "--timer-interval", "1", *NO_PACING]
    rejected_before = rejected_requests(cluster, level)
    settled: list[float] = []
    unsettled: int | None = None
    with Ledger(api_client, namespace) as ledger:
        running = Operator(cluster, tmp_path / "operator.log", args, kubeconfig=kubeconfig).start()
        try:
            baseline(core, namespace, "db")
            for number in range(1, CHANGES + 1):
                previous = checksum_of(core, namespace, "db")
                started = time.monotonic()
                change_data(core, namespace, "db", f"v{number}")

                def landed(previous: str | None = previous, number: int = number) -> bool:
                    return (
                        checksum_of(core, namespace, "db") != previous
                        and not pending_workloads(apps, namespace)
                        and all(
                            len(ledger.restarts_of(f"app-{i:02d}")) >= number
                            for i in range(DEPENDENTS)
                        )
                    )

                if not eventually(landed, SETTLE_TIMEOUT):
                    unsettled = number
                    break
                settled.append(round(time.monotonic() - started, 1))
                # restartedAt has whole seconds: a restart for the next change within the
                # same second would write the same value and roll nothing (a separate
                # fault from throttling, kept out of this test).
                time.sleep(1.1)
            time.sleep(SETTLE)
            alive = running.process is not None and running.process.poll() is None
        finally:
            running.stop()
            log = running.log()
    rejected = rejected_requests(cluster, level) - rejected_before
    made = len(settled) + (unsettled is not None)
    restarts = {f"app-{i:02d}": ledger.restarts_of(f"app-{i:02d}") for i in range(DEPENDENTS)}
    report(
        "API Priority and Fairness 429s",
        {
            "changes": made,
            "dependents": DEPENDENTS,
            "rejected_429": rejected,
            "restarts_expected": made * DEPENDENTS,
            "restarts_seen": sum(len(values) for values in restarts.values()),
            "stamp_failures_logged": log.count("could not stamp"),
            "timer_ticks_failed": log.count("Timer 'pending_restart_deployments' failed"),
            "too_many_requests_logged": len(re.findall(r"429|Too Many Requests", log)),
            "seconds_to_settle": settled,
            "change_not_settled": unsettled,
            "never_stamped_or_restarted": sorted(
                name for name, values in restarts.items() if len(values) < made
            ),
        },
    )
    assert alive, log[-3000:]
    assert unsettled is None, f"change {unsettled} not stamped and restarted everywhere"
    assert token not in log
    assert rejected > 0, "no request of the operator was throttled"
    assert all(len(values) == CHANGES for values in restarts.values()), restarts
    # The last restart rolled out (kube-controller-manager makes ReplicaSets on its own
    # time, from the latest template).
    wait_for(
        lambda: not restarts_without_replica_set(apps, namespace, restarts),
        180,
        message="a ReplicaSet for the last restart of each Deployment",
        describe=lambda: restarts_without_replica_set(apps, namespace, restarts),
    )
    annotations = core.read_namespaced_secret("db", namespace).metadata.annotations
    assert set(annotations) == {keys.CHECKSUM, keys.KEY_DIGESTS}, json.dumps(sorted(annotations))
