"""The chart's pod, from the image built here, as a real container: what it runs as and that
its probes keep passing. Read from the running container, not from the manifest."""

from __future__ import annotations

import datetime as dt
import re
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

import kubernetes
import yaml

from restarter_cluster import images
from restarter_cluster.netns_proxy import inside
from restarter_cluster.node import RealNode
from tests.conftest import REPO, wait_for
from tests.node.conftest import Release, cgroup_file

Core = kubernetes.client.CoreV1Api
#: The chart's liveness probe, with its period shortened from 30 s to 5 s (the endpoint and
#: the kubelet are the same; only the spacing is not the point): 3 failures restart the
#: container, so 60 s covers the first probe and eleven more, against four in 150 s with
#: the chart's default timing.
# Probes every 5 s from 15 s after the start (the chart's default: 30 s, then every 30 s):
# a loaded node took over 5 s to import and start kopf before it served /healthz.
FAST_PROBE = [
    "--set",
    "livenessProbe.initialDelaySeconds=15",
    "--set",
    "livenessProbe.periodSeconds=5",
]
PROBED_FOR = dt.timedelta(seconds=60)


def _status_field(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _root_mount_options(pid: int) -> list[str]:
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no root mount for pid {pid}")


def _chart_memory_limit() -> int:
    limit = yaml.safe_load((REPO / "charts/restarter/values.yaml").read_text())["resources"][
        "limits"
    ]["memory"]
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", limit).groups()  # type: ignore[union-attr]
    return int(number) * {"Mi": 2**20, "Gi": 2**30}[unit]


def test_the_operator_pod_runs_the_built_image_as_uid_10001_read_only_with_its_limit(
    install: Callable[..., Release], real_node: RealNode, namespace: str
) -> None:
    release = install([namespace])
    pod = release.pods()[0]
    status = pod.status.container_statuses[0]
    assert pod.spec.node_name == "real-node"
    assert status.image == images.restarter_image()
    # The imported image, never pulled. (Its image id is not the test: once a registry test
    # on the same node pulled the same image by digest, the runtime names it by that digest.)
    selector = f"involvedObject.name={pod.metadata.name}"
    events = release.core.list_namespaced_event(release.namespace, field_selector=selector)
    assert "Pulling" not in [event.reason for event in events.items]
    pulled = [event.message for event in events.items if event.reason == "Pulled"]
    assert pulled and all("already present on machine" in message for message in pulled), pulled
    pid = real_node.container_pid(status.container_id)

    assert _status_field(pid, "Uid").split() == ["10001"] * 4
    assert _status_field(pid, "Gid").split() == ["10001"] * 4
    assert "ro" in _root_mount_options(pid)
    assert int(_status_field(pid, "CapEff"), 16) == 0  # capabilities: drop [ALL]
    assert _status_field(pid, "NoNewPrivs") == "1"  # allowPrivilegeEscalation: false
    assert _status_field(pid, "Seccomp") == "2"  # RuntimeDefault: a filter is installed
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"/opt/restarter/bin/restarter" in cmdline[1]  # the venv's entry point
    limit = cgroup_file(real_node, status.container_id, "memory", "memory.limit_in_bytes")
    assert int(limit.read_text()) == _chart_memory_limit()  # enforced by a real cgroup
    wait_for(
        lambda: "Initial authentication has finished" in release.log(pod.metadata.name),
        60,
        message="kopf started in the pod's log",
    )


def test_the_operator_pod_passes_its_liveness_probe_for_minutes_without_a_restart(
    install: Callable[..., Release], core: Core, namespace: str
) -> None:
    release = install([namespace], *FAST_PROBE)
    pod = release.pods()[0]
    assert pod.spec.containers[0].liveness_probe.period_seconds == 5
    started = pod.status.container_statuses[0].state.running.started_at

    def probed_long_enough() -> bool:
        return dt.datetime.now(dt.UTC) - started >= PROBED_FOR

    wait_for(probed_long_enough, PROBED_FOR.total_seconds() + 30, interval=2, message="150 s")
    pod = core.read_namespaced_pod(pod.metadata.name, release.namespace)
    status = pod.status.container_statuses[0]
    assert status.restart_count == 0
    assert status.state.running.started_at == started
    assert status.ready
    events = core.list_namespaced_event(
        release.namespace, field_selector=f"involvedObject.name={pod.metadata.name}"
    ).items
    assert [e.message for e in events if e.reason == "Unhealthy"] == []
    # What kubelet probes answers, at the pod's IP on the bridge inside the node's namespace.
    assert pod.status.pod_ip.startswith("10.89.0.")
    assert _get_inside(release.node, f"http://{pod.status.pod_ip}:8080/healthz") == 200


def _get_inside(real_node: RealNode, url: str) -> int:
    """GET from a thread that entered the node's network namespace (as kubelet's probe)."""
    answer: list[int] = []

    def get() -> None:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with inside(real_node.netns_path), direct.open(url, timeout=5) as response:
            answer.append(response.status)

    thread = threading.Thread(target=get)
    thread.start()
    thread.join(10)
    assert answer, f"no answer from {url}"
    return answer[0]
