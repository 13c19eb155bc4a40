"""``restarter plan`` against the real control plane: its rows are the marks on the objects."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import pytz
import yaml

from restarter.model import keys, pending, windows
from restarter.model.windows import next_restart
from restarter_cluster.cluster import Cluster
from tests.conftest import REPO, Operator, wait_for
from tests.integration.factories import deployment, encoded, env_from_secret, secret

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]
HOUR = dt.timedelta(hours=1)
#: Used only to read marks without a zone of their own; every mark here carries one.
UNUSED_DEFAULT_ZONE = "UTC"


def plan(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m restarter plan`` as a user runs it, with this kubeconfig only."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "restarter", "plan", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def plan_json(kubeconfig: Path, *args: str) -> list[dict[str, Any]]:
    result = plan(kubeconfig, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def statefulset(name: str, env: list[dict[str, Any]]) -> dict[str, Any]:
    container = {"name": "app", "image": "registry.invalid/app:1", "env": env}
    return {
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]},
            },
        },
    }


def cron_configmap(name: str, expression: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {keys.RESTART_AT_LABEL: "cron"},
            "annotations": {keys.CRON: expression, keys.TIMEZONE: zone},
        },
        "data": {"mode": "one"},
    }


def checksum_recorded(read: Callable[[], Any]) -> bool:
    return keys.CHECKSUM in (read().metadata.annotations or {})


def pending_annotations(read: Callable[[], Any], sources: int) -> dict[str, str] | None:
    """The workload's annotations once it carries ``sources`` pending marks."""
    annotations: dict[str, str] = read().metadata.annotations or {}
    return annotations if len(pending.read(annotations).marks) == sources else None


def expected_rows(
    namespace: str, kind: str, name: str, annotations: dict[str, str], now: dt.datetime
) -> dict[str, dict[str, Any]]:
    """What plan must say about one workload, by source, computed from its annotations."""
    state = pending.read(annotations)
    last = state.last_restart(now)
    by_source = {}
    for mark in state.marks:
        assert mark.value is not None and mark.since is not None
        request = windows.from_mark(mark.value, UNUSED_DEFAULT_ZONE, HOUR)
        by_source[mark.source] = {
            "namespace": namespace,
            "kind": kind,
            "name": name,
            "mark": mark.token,
            "changedAt": f"{dt.datetime.fromtimestamp(mark.since, dt.UTC):%Y-%m-%dT%H:%M:%SZ}",
            "timezone": request.timezone,
            "window": request.describe(),
            "restart": next_restart(request.window(), now, last),
        }
    earliest = min(row["restart"] for row in by_source.values())
    for row in by_source.values():
        row["restart"] = earliest  # one rollout satisfies every source
    return by_source


def assert_rows_match(rows: list[dict[str, Any]], expected: dict[str, dict[str, Any]]) -> None:
    assert {row["source"] for row in rows} == set(expected)
    for row in rows:
        wanted = dict(expected[row["source"]])
        restart = wanted.pop("restart")
        assert {key: row[key] for key in wanted} == wanted
        assert row["nextRestartUtc"] == f"{restart.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
        local = dt.datetime.fromisoformat(row["nextRestart"])
        assert local == restart
        zone = pytz.timezone(row["timezone"])
        assert local.utcoffset() == restart.astimezone(zone).utcoffset()
        assert row["state"] == "waiting"


@pytest.fixture
def empty_namespace(core: Core) -> Iterator[str]:
    name = f"plan-empty-{uuid.uuid4().hex[:5]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def test_plan_lists_every_pending_workload_as_its_marks_say(
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: OperatorFactory,
    empty_namespace: str,
    tmp_path: Path,
) -> None:
    started = dt.datetime.now(dt.UTC)
    warsaw, kolkata = pytz.timezone("Europe/Warsaw"), pytz.timezone("Asia/Kolkata")
    # Both windows open hours from now (never during the test): the Secret's in about
    # 6 h, the ConfigMap's cron hour 8-9 h away, so the Secret decides for the Deployment.
    far = (started.astimezone(warsaw) + dt.timedelta(hours=6)).strftime("%H.%M")
    cron = f"0 {(started.astimezone(kolkata) + dt.timedelta(hours=9)).hour} * * *"
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}, far))
    core.create_namespaced_config_map(namespace, cron_configmap("settings", cron, "Asia/Kolkata"))
    web = deployment("web", env=[env_from_secret("db")])
    web["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "settings"}}
    ]
    apps.create_namespaced_deployment(namespace, web)
    apps.create_namespaced_stateful_set(namespace, statefulset("store", [env_from_secret("db")]))
    operator("--timezone", "Europe/Warsaw")
    wait_for(
        lambda: checksum_recorded(lambda: core.read_namespaced_secret("db", namespace)),
        30,
        message="checksum on the Secret",
    )
    wait_for(
        lambda: checksum_recorded(lambda: core.read_namespaced_config_map("settings", namespace)),
        30,
        message="checksum on the ConfigMap",
    )

    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    core.patch_namespaced_config_map("settings", namespace, {"data": {"mode": "two"}})
    web_marks = wait_for(
        lambda: pending_annotations(
            lambda: apps.read_namespaced_deployment("web", namespace), sources=2
        ),
        30,
        message="two marks on the Deployment",
    )
    store_marks = wait_for(
        lambda: pending_annotations(
            lambda: apps.read_namespaced_stateful_set("store", namespace), sources=1
        ),
        30,
        message="a mark on the StatefulSet",
    )

    rows = plan_json(cluster.kubeconfig, "-n", namespace)
    now = dt.datetime.now(dt.UTC)
    expected_web = expected_rows(namespace, "Deployment", "web", web_marks, now)
    expected_store = expected_rows(namespace, "StatefulSet", "store", store_marks, now)
    assert [(row["kind"], row["name"]) for row in rows] == [
        ("Deployment", "web"),
        ("Deployment", "web"),
        ("StatefulSet", "store"),
    ]
    assert_rows_match([row for row in rows if row["name"] == "web"], expected_web)
    assert_rows_match([row for row in rows if row["name"] == "store"], expected_store)
    # The zones and windows the sources asked for, and the Secret's window first.
    by_source = {row["source"]: row for row in rows if row["name"] == "web"}
    assert by_source["Secret/db"]["window"] == f"{far} Europe/Warsaw (1h long)"
    assert by_source["ConfigMap/settings"]["window"] == f"cron '{cron}' Asia/Kolkata (1h long)"
    assert by_source["ConfigMap/settings"]["timezone"] == "Asia/Kolkata"
    assert by_source["ConfigMap/settings"]["notes"] == ["restarts with Secret/db"]
    restart = dt.datetime.fromisoformat(by_source["Secret/db"]["nextRestartUtc"])
    assert dt.timedelta(hours=5) < restart - started < dt.timedelta(hours=7)

    table = plan(cluster.kubeconfig, "-n", namespace)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("WORKLOAD ")
    for workload, source in [
        ("Deployment/web", "ConfigMap/settings"),
        ("Deployment/web", "Secret/db"),
        ("StatefulSet/store", "Secret/db"),
    ]:
        assert any(workload in line and source in line for line in lines[1:]), table.stdout

    everywhere = plan_json(cluster.kubeconfig, "-A")
    assert [row for row in everywhere if row["namespace"] == namespace] == rows
    all_table = plan(cluster.kubeconfig, "-A")
    assert all_table.stdout.startswith("NAMESPACE ")
    assert f"{namespace} " in all_table.stdout

    # Without -n: the kubeconfig context's namespace.
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    with_namespace = tmp_path / "kubeconfig"
    with_namespace.write_text(yaml.safe_dump(config))
    assert plan_json(with_namespace) == rows

    empty = plan(cluster.kubeconfig, "-n", empty_namespace)
    assert (empty.returncode, empty.stdout) == (
        0,
        f"no pending workloads in namespace {empty_namespace}\n",
    )
    assert plan_json(cluster.kubeconfig, "-n", empty_namespace) == []


def test_plan_reports_an_unreachable_cluster_in_one_line(tmp_path: Path, cluster: Cluster) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens on discard
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(yaml.safe_dump(config))
    result = plan(unreachable, "-n", "default")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("restarter plan: cannot reach the API server")
    assert len(result.stderr.strip().splitlines()) == 1
