"""kube-apiserver stopped and started again (same etcd, port and certificates) twice:
once during a fan-out, once while restarts are under way in an open window.

The control plane is the test's own, so no other test sees its apiserver go away. The
operator runs as its chart runs it, with ``--liveness``; when it exits or its health
endpoint stops answering (the chart's livenessProbe), the test starts it again as the
kubelet would, and counts how often.

- Injection 1: Secret ``far`` (window hours away), 50 dependents. Its data changes; after
  a random number of stamps the apiserver gets SIGTERM (a graceful stop), stays down
  for a random 3-8 s, starts again. Every dependent must carry exactly the mark of the
  change and none may restart.
- Injection 2: Secret ``soon`` (window open now), 50 other dependents. Its data changes;
  after a random number of restarts the apiserver gets SIGKILL, stays down 3-8 s,
  starts again. Every dependent must restart exactly once, and no mark stay.

Reproduce with ``RESTARTER_FAULT_SEED=<seed> pytest tests/faults/test_apiserver_restart.py -s``.
"""

from __future__ import annotations

import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port
from tests.conftest import Operator, wait_for
from tests.faults import NO_PACING
from tests.faults.ledger import RESTART, STAMP, Ledger, eventually, report, seed_from_env
from tests.faults.test_sigkill_fan_out import DEPENDENTS, create_dependents, replica_sets_per_owner
from tests.integration.factories import secret, window_hours_away, window_open_now
from tests.integration.test_operator_restarts import baseline, change_data

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api

#: Seconds the test's supervisor waits for /healthz before it counts a failed probe.
PROBE_TIMEOUT = 5.0
#: Failed probes in a row after which the operator is killed and started again (the
#: chart's livenessProbe uses the default failureThreshold, 3).
PROBE_FAILURES = 3
SETTLE = 3.0
#: Seconds a change may take to settle after the apiserver is back: more than kopf's
#: default 60 s back-off of a timer whose tick failed while the apiserver was down.
SETTLE_TIMEOUT = 100.0


@pytest.fixture
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane of this test's own: its apiserver is stopped on purpose."""
    running = Cluster(directory=tmp_path_factory.mktemp("own-cluster"), nodes=1).up()
    try:
        yield running
    finally:
        running.down()


class Supervisor:
    """Keeps one operator running as a kubelet would: restarted when it exits, killed
    and restarted after ``PROBE_FAILURES`` failed liveness probes in a row."""

    def __init__(self, cluster: Cluster, namespace: str, log_dir: Path) -> None:
        self.cluster, self.log_dir = cluster, log_dir
        self.port = free_port()
        self.args = [
            "--namespace",
            namespace,
            "--timer-interval",
            "1",
            "--liveness",
            f"http://127.0.0.1:{self.port}/healthz",
            *NO_PACING,
        ]
        self.starts = 0
        self.exits: list[int] = []
        self.probe_kills = 0
        self.failed_probes = 0
        self.operator: Operator | None = None

    def start(self) -> None:
        self.starts += 1
        log = self.log_dir / f"operator-{self.starts:02d}.log"
        self.operator = Operator(self.cluster, log, self.args).start()

    def healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def check(self) -> None:
        """One probe; the kubelet's reaction to an exit or to failed probes."""
        assert self.operator is not None and self.operator.process is not None
        code = self.operator.process.poll()
        if code is not None:
            self.exits.append(code)
            self.start()
            return
        if self.healthy():
            self.failed_probes = 0
            return
        self.failed_probes += 1
        if self.failed_probes >= PROBE_FAILURES:
            self.probe_kills += 1
            self.failed_probes = 0
            self.operator.process.kill()
            self.operator.process.wait()
            self.start()

    def stop(self) -> None:
        if self.operator:
            self.operator.stop()

    def logs(self) -> str:
        return "".join(
            path.read_text(errors="replace") for path in sorted(self.log_dir.glob("operator-*.log"))
        )


def supervised(supervisor: Supervisor, predicate: Callable[[], Any]) -> Callable[[], Any]:
    """The predicate, with a liveness probe before each poll; API errors count as not yet."""

    def check() -> Any:
        supervisor.check()
        try:
            return predicate()
        except Exception:  # the apiserver is still coming back
            return False

    return check


def marks_of(apps: Apps, namespace: str, prefix: str) -> dict[str, dict[str, str]]:
    return {
        body.metadata.name: {
            key: value
            for key, value in (body.metadata.annotations or {}).items()
            if key.startswith((keys.PENDING_MARK, keys.WINDOW_MARK))
        }
        for body in apps.list_namespaced_deployment(namespace).items
        if body.metadata.name.startswith(prefix)
    }


def test_apiserver_stopped_during_a_fan_out_and_during_a_window_loses_and_doubles_nothing(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    # The test's own clients retry while the apiserver is down: keep their noise out.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    seed = seed_from_env()
    rng = random.Random(seed)
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(own_cluster.kubeconfig), client_configuration=configuration
    )
    client = kubernetes.client.ApiClient(configuration)
    core, apps = kubernetes.client.CoreV1Api(client), kubernetes.client.AppsV1Api(client)
    namespace = "apiserver-restart"
    core.create_namespace({"metadata": {"name": namespace}})
    wait_for(
        lambda: core.list_namespaced_service_account(namespace).items,
        30,
        message="default ServiceAccount",
    )
    core.create_namespaced_secret(namespace, secret("far", {"password": "a"}, window_hours_away()))
    core.create_namespaced_secret(namespace, secret("soon", {"password": "a"}, window_open_now()))
    create_dependents(apps, namespace, "far", prefix="far")
    create_dependents(apps, namespace, "soon", prefix="soon")
    wait_for(
        lambda: sum(replica_sets_per_owner(apps, namespace).values()) == 2 * DEPENDENTS,
        60,
        message="a ReplicaSet per Deployment",
    )
    supervisor = Supervisor(own_cluster, namespace, tmp_path)
    injections: list[dict[str, Any]] = []
    outcomes: dict[str, bool] = {}

    def inject(
        ledger: Ledger, source: str, kind: str, prefix: str, graceful: bool
    ) -> dict[str, Any]:
        after = rng.randrange(1, DEPENDENTS)
        down_for = round(rng.uniform(3, 8), 1)
        stamps, restarts = ledger.stamps, ledger.restarts
        stopped = ledger.arm(
            after,
            lambda: own_cluster.stop_apiserver(graceful=graceful),
            kinds=(kind,),
            names=lambda name: name.startswith(prefix),
        )
        change_data(core, namespace, source, "b")
        assert stopped.wait(60), f"{after} {kind}s of {source} never seen"
        at_stop = {"stamps": ledger.stamps - stamps, "restarts": ledger.restarts - restarts}
        time.sleep(down_for)
        own_cluster.start_apiserver()
        return {
            "during": f"{kind}s of {source}",
            "signal": "SIGTERM" if graceful else "SIGKILL",
            "stopped_after": after,
            "seen_before_stop": at_stop,
            "down_seconds": down_for,
        }

    with Ledger(client, namespace) as ledger:
        supervisor.start()
        try:
            first = {name: baseline(core, namespace, name) for name in ("far", "soon")}

            def recorded(name: str) -> bool:
                annotations = core.read_namespaced_secret(name, namespace).metadata.annotations
                return (annotations or {}).get(keys.CHECKSUM) != first[name]

            # 1: during the fan-out of a change whose window is hours away.
            injections.append(inject(ledger, "far", STAMP, "far-", graceful=True))
            outcomes["far settled"] = eventually(
                supervised(
                    supervisor,
                    lambda: (
                        recorded("far")
                        and all(
                            keys.pending_key("secret", "far") in marks
                            for marks in marks_of(apps, namespace, "far-").values()
                        )
                    ),
                ),
                SETTLE_TIMEOUT,
            )

            # 2: while the window of the other change is open and restarts are under way.
            injections.append(inject(ledger, "soon", RESTART, "soon-", graceful=False))
            outcomes["soon settled"] = eventually(
                supervised(
                    supervisor,
                    lambda: (
                        recorded("soon")
                        and not any(marks_of(apps, namespace, "soon-").values())
                        and all(ledger.restarts_of(f"soon-{i:02d}") for i in range(DEPENDENTS))
                    ),
                ),
                SETTLE_TIMEOUT,
            )
            for _ in range(int(SETTLE)):
                supervisor.check()
                time.sleep(1)
            far_marks = marks_of(apps, namespace, "far-")
            checksums_recorded = {name: recorded(name) for name in ("far", "soon")}
        finally:
            supervisor.stop()

    names = [f"{prefix}-{i:02d}" for prefix in ("far", "soon") for i in range(DEPENDENTS)]
    restarts = {name: ledger.restarts_of(name) for name in names}
    logs = supervisor.logs()
    soon_marks = marks_of(apps, namespace, "soon-")
    anomalies = {
        name: {"restarts": len(restarts[name]), "marks": sorted(soon_marks.get(name, {}))}
        for name in names
        if name.startswith("soon-") and (len(restarts[name]) != 1 or soon_marks.get(name))
    }
    figures = {
        "seed": seed,
        "settled": outcomes,
        "soon_anomalies": anomalies,
        "injections": injections,
        "changes": 2,
        "stamps_expected": 2 * DEPENDENTS,
        "far_stamped": sum(1 for marks in far_marks.values() if marks),
        "restarts_expected": DEPENDENTS,
        "restarts_seen": sum(len(values) for values in restarts.values()),
        "doubles": {name: values for name, values in restarts.items() if len(values) > 1},
        "operator_starts": supervisor.starts,
        "operator_exits": supervisor.exits,
        "probe_kills": supervisor.probe_kills,
        "stamp_failures_logged": logs.count("could not stamp"),
        "timer_ticks_failed": logs.count("Timer 'pending_restart_deployments' failed"),
        "source_check_failed": logs.count("could not check secret"),
        "ledger_reconnects": ledger.reconnects,
    }
    report("kube-apiserver stopped and started", figures)
    assert all(outcomes.values()), figures
    assert all(checksums_recorded.values()), checksums_recorded
    # Injection 1: every dependent of far stamped for the change, none restarted yet.
    assert all(keys.pending_key("secret", "far") in marks for marks in far_marks.values())
    assert not any(restarts[f"far-{i:02d}"] for i in range(DEPENDENTS))
    # Injection 2: every dependent of soon restarted exactly once.
    assert all(len(restarts[f"soon-{i:02d}"]) == 1 for i in range(DEPENDENTS)), restarts

    # kube-controller-manager creates the ReplicaSets on its own time: wait for them.
    def replica_sets_settled() -> bool:
        counts = replica_sets_per_owner(apps, namespace)
        return all(
            counts[f"soon-{i:02d}"] == 2 and counts[f"far-{i:02d}"] == 1 for i in range(DEPENDENTS)
        )

    wait_for(replica_sets_settled, 60, message="2 ReplicaSets per soon-*, 1 per far-*")
