"""Beyond HH.MM and Deployments, on the real control plane: ConfigMaps, StatefulSets,
DaemonSets, cron and per-source windows, ``now``, opt-out and declared dependencies."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
import pytz

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import (
    configmap,
    daemonset,
    deployment,
    encoded,
    env_from_secret,
    secret,
    statefulset,
    window_hours_away,
    window_open_now,
)
from tests.integration.test_operator_restarts import (
    TICKS,
    baseline,
    change_data,
    events,
    pending,
    replica_sets,
    rollout_finished,
)

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]


def marks_of(obj: Any) -> dict[str, str]:
    return {
        key: value
        for key, value in (obj.metadata.annotations or {}).items()
        if key.startswith((keys.PENDING_MARK, keys.WINDOW_MARK))
    }


def revisions(apps: Apps, namespace: str, owner: str) -> list[Any]:
    """ControllerRevisions of a StatefulSet or DaemonSet: one per pod-template version."""
    return [
        revision
        for revision in apps.list_namespaced_controller_revision(namespace).items
        if any(ref.name == owner for ref in revision.metadata.owner_references or [])
    ]


def configmap_baseline(core: Core, namespace: str, name: str) -> None:
    def recorded() -> bool:
        annotations = core.read_namespaced_config_map(name, namespace).metadata.annotations
        return keys.CHECKSUM in (annotations or {})

    wait_for(recorded, 30, message=f"checksum on ConfigMap {name}")


def cron_now(offset_hours: int = 0) -> str:
    """A daily cron expression for the current UTC minute, shifted by whole hours."""
    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=offset_hours)
    return f"{at.minute} {at.hour} * * *"


def test_a_binary_data_change_of_a_configmap_restarts_its_deployment(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_config_map(
        namespace, configmap("assets", window_open_now(), binary={"logo.png": "v1"})
    )
    volume = {"name": "assets", "configMap": {"name": "assets"}}
    apps.create_namespaced_deployment(namespace, deployment("web", volumes=[volume]))
    rollout_finished(cluster, namespace, "web")
    operator()
    configmap_baseline(core, namespace, "assets")
    assert pending(apps, namespace, "web") == {}

    core.patch_namespaced_config_map(
        "assets", namespace, {"binaryData": encoded({"logo.png": "v2"})}
    )
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart")
    rollout_finished(cluster, namespace, "web")
    assert pending(apps, namespace, "web") == {}
    assert events(core, namespace, "assets", "ChangeDetected")
    stored = core.read_namespaced_config_map("assets", namespace).metadata.annotations
    assert set(stored) == {keys.CHECKSUM, keys.KEY_DIGESTS}  # no kopf state on the source


def test_statefulset_and_daemonset_dependents_are_stamped_and_restarted(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_open_now()))
    env = [env_from_secret("db")]
    apps.create_namespaced_stateful_set(namespace, statefulset("store", env=env, replicas=1))
    apps.create_namespaced_daemon_set(namespace, daemonset("agent", env=env))
    for owner in ("store", "agent"):
        wait_for(lambda owner=owner: revisions(apps, namespace, owner), 30, message="revision")
    operator()
    baseline(core, namespace, "db")

    change_data(core, namespace, "db", "b")
    for owner in ("store", "agent"):
        wait_for(
            lambda owner=owner: len(revisions(apps, namespace, owner)) == 2,
            30,
            message=f"the new revision of {owner}",
        )
        wait_for(
            lambda owner=owner: events(core, namespace, owner, "Restarted"),
            10,
            message=f"the Restarted Event of {owner}",
        )
    time.sleep(TICKS)
    for owner in ("store", "agent"):
        assert len(revisions(apps, namespace, owner)) == 2  # restarted once, not again
        assert len(events(core, namespace, owner, "Restarted")) == 1
    store = apps.read_namespaced_stateful_set("store", namespace)
    agent = apps.read_namespaced_daemon_set("agent", namespace)
    for workload in (store, agent):
        assert marks_of(workload) == {}
        assert keys.KUBECTL_RESTARTED_AT in workload.spec.template.metadata.annotations
        assert workload.metadata.annotations[keys.RESTART_TS].isdigit()
    wait_for(
        lambda: not apps.read_namespaced_stateful_set("store", namespace).metadata.finalizers,
        20,
        message="finalizer removed from the StatefulSet",
    )


@pytest.mark.parametrize(
    ("offset_hours", "restarts"),
    [pytest.param(0, True, id="open-now"), pytest.param(6, False, id="six-hours-away")],
)
def test_a_cron_window_restarts_only_when_open(
    offset_hours: int,
    restarts: bool,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    expression = cron_now(offset_hours)
    core.create_namespaced_secret(
        namespace, secret("db", {"password": "a"}, "cron", {keys.CRON: expression})
    )
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    if restarts:
        wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart")
        assert pending(apps, namespace, "web") == {}
        return
    marks = wait_for(lambda: pending(apps, namespace, "web"), 20, message="marks")
    mark = json.loads(marks[keys.window_key("secret", "db")])
    assert mark.pop("change").isdigit()  # the Secret's resourceVersion
    assert mark == {
        "at": "cron",
        "cron": expression,
        "keys": ["password"],
        "length": "1h",
        "source": "Secret/db",
        "timezone": "UTC",
    }
    time.sleep(TICKS)
    assert len(replica_sets(apps, namespace, "web")) == 1
    scheduled = events(core, namespace, "web", "RestartScheduled")
    assert f"cron '{expression}'" in scheduled[0].message


def test_a_secrets_own_zone_decides_when_its_window_is_open(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    """The operator runs in UTC; the Secret asks for this minute in Kolkata (UTC+05:30)."""
    kolkata_now = dt.datetime.now(pytz.timezone("Asia/Kolkata")).strftime("%H.%M")
    annotations = {keys.TIMEZONE: "Asia/Kolkata", keys.WINDOW_LENGTH: "30m"}
    core.create_namespaced_secret(
        namespace, secret("db", {"password": "a"}, kolkata_now, annotations)
    )
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    operator("--timezone", "UTC")
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart")
    scheduled = events(core, namespace, "web", "RestartScheduled")
    assert f"{kolkata_now} Asia/Kolkata (30m long)" in scheduled[0].message


def test_restart_at_now_restarts_at_the_next_tick(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, "now"))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: len(replica_sets(apps, namespace, "web")) == 2, 30, message="restart")
    assert pending(apps, namespace, "web") == {}


def test_opted_out_and_declared_dependents(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    """``ignore`` keeps a Deployment that uses the Secret out; ``secrets`` pulls one in."""
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    env = [env_from_secret("db")]
    apps.create_namespaced_deployment(namespace, deployment("uses", env=env))
    apps.create_namespaced_deployment(
        namespace, deployment("opted-out", env=env, annotations={keys.IGNORE: "true"})
    )
    apps.create_namespaced_deployment(
        namespace, deployment("reads-via-api", annotations={keys.DEPENDS_ON_SECRETS: "db"})
    )
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    for name in ("uses", "reads-via-api"):
        wait_for(lambda name=name: pending(apps, namespace, name), 20, message=f"marks on {name}")
    time.sleep(TICKS)
    assert pending(apps, namespace, "opted-out") == {}
    scheduled = events(core, namespace, "db", "ChangeDetected")[0].message
    assert "Deployment reads-via-api" in scheduled and "opted-out" not in scheduled


def test_opting_out_while_pending_drops_the_marks_without_a_restart(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, secret("db", {"password": "a"}, window_hours_away()))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    operator()
    baseline(core, namespace, "db")
    change_data(core, namespace, "db", "b")
    wait_for(lambda: pending(apps, namespace, "web"), 20, message="marks")

    apps.patch_namespaced_deployment(
        "web", namespace, {"metadata": {"annotations": {keys.IGNORE: "true"}}}
    )
    wait_for(lambda: pending(apps, namespace, "web") == {}, 20, message="marks dropped")
    assert events(core, namespace, "web", "RestartSkipped")
    assert len(replica_sets(apps, namespace, "web")) == 1
    web = apps.read_namespaced_deployment("web", namespace)
    assert keys.RESTART_TS not in web.metadata.annotations
    wait_for(
        lambda: not apps.read_namespaced_deployment("web", namespace).metadata.finalizers,
        20,
        message="finalizer removed",
    )


@pytest.mark.parametrize(
    ("label", "annotations", "reason"),
    [
        pytest.param("cron", {keys.CRON: "61 3 * * *"}, "not a valid cron", id="cron-61"),
        pytest.param("03.00", {keys.WINDOW_LENGTH: "2h30"}, "not like 1h", id="length-2h30"),
        pytest.param("03.00", {keys.TIMEZONE: "Nope/Nowhere"}, "unknown time zone", id="zone"),
    ],
)
def test_a_bad_schedule_warns_stamps_nothing_and_leaves_others_working(
    label: str,
    annotations: dict[str, str],
    reason: str,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
) -> None:
    core.create_namespaced_secret(namespace, secret("bad", {"password": "a"}, label, annotations))
    core.create_namespaced_config_map(
        namespace, configmap("good", window_hours_away(), data={"level": "info"})
    )
    apps.create_namespaced_deployment(
        namespace, deployment("uses-bad", env=[env_from_secret("bad")])
    )
    good_env = {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "good", "key": "level"}}}
    apps.create_namespaced_deployment(namespace, deployment("uses-good", env=[good_env]))
    running = operator()
    configmap_baseline(core, namespace, "good")
    change_data(core, namespace, "bad", "b")
    core.patch_namespaced_config_map("good", namespace, {"data": {"level": "debug"}})
    warnings = wait_for(
        lambda: events(core, namespace, "bad", "InvalidWindow"), 20, message="Warning Event"
    )
    assert warnings[0].type == "Warning" and reason in warnings[-1].message
    wait_for(lambda: pending(apps, namespace, "uses-good"), 20, message="good ConfigMap stamped")
    assert pending(apps, namespace, "uses-bad") == {}
    assert running.process is not None and running.process.poll() is None
