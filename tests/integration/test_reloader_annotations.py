"""Reloader's workload annotations, honoured with ``--reloader-annotations``: the cases of
Reloader's own end-to-end tests (auto, typed auto, named and regex reload lists,
exclude, ignore on a source, search and match, annotations on the pod template), on the
real control plane, with a window added: a workload that also carries
``restarter.io/restart-at`` restarts in that window, the others at the default ``now``.
Then the rules where Reloader 1.4.21's code reads its annotations more strictly or more
loosely than a plain reading would: every reload entry an expression ``^entry$``,
``ignore`` only as the exact string "true" and only on a source, exclude lists first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes

from restarter.model import keys
from restarter_cluster.cluster import Cluster
from tests.conftest import Operator, wait_for
from tests.integration.factories import deployment, encoded, window_hours_away
from tests.integration.test_operator_restarts import events, pending, replica_sets
from tests.integration.test_workload_opt_in import change_detected

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

RELOADER = {"RESTARTER_RELOADER_ANNOTATIONS": "true"}
AUTO = {"reloader.stakater.com/auto": "true"}


def uses(*sources: tuple[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """envFrom of each (kind, name)."""
    refs = [
        {"secretRef": {"name": name}} if kind == "secret" else {"configMapRef": {"name": name}}
        for kind, name in sources
    ]
    return {"envFrom": refs, "annotations": annotations or {}}


def workload(
    name: str,
    *sources: tuple[str, str],
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = deployment(name, annotations=annotations or {}, replicas=1)
    if sources:
        body["spec"]["template"]["spec"]["containers"][0]["envFrom"] = uses(*sources)["envFrom"]
    if pod_annotations:
        body["spec"]["template"]["metadata"]["annotations"] = pod_annotations
    return body


def source(kind: str, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata = {"name": name, "annotations": annotations or {}}
    if kind == "secret":
        return {"kind": "Secret", "metadata": metadata, "data": encoded({"v": "1"})}
    return {"kind": "ConfigMap", "metadata": metadata, "data": {"v": "1"}}


def labelled(body: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    body["metadata"]["labels"] = labels
    return body


def change(core: Core, namespace: str, kind: str, name: str, value: str) -> None:
    if kind == "secret":
        core.patch_namespaced_secret(name, namespace, {"data": encoded({"v": value})})
    else:
        core.patch_namespaced_config_map(name, namespace, {"data": {"v": value}})


def restarter_annotations(core: Core, namespace: str, kind: str, name: str) -> list[str]:
    read = core.read_namespaced_secret if kind == "secret" else core.read_namespaced_config_map
    return [k for k in (read(name, namespace).metadata.annotations or {}) if "restarter" in k]


def change_each(
    core: Core,
    apps: Apps,
    namespace: str,
    names: list[str],
    steps: list[tuple[tuple[str, str], set[str]]],
) -> dict[str, int]:
    """Change each source in turn and wait for the workloads it must restart; after each
    change, no other workload has restarted. The restarts of each workload."""
    restarts = dict.fromkeys(names, 0)
    for (kind, name), restarted in steps:
        change(core, namespace, kind, name, "2")
        change_detected(core, namespace, name, 1)
        for workload_name in restarted:
            restarts[workload_name] += 1
        wait_for(
            lambda restarted=restarted: all(
                len(replica_sets(apps, namespace, n)) == 1 + restarts[n] for n in restarted
            ),
            60,
            message=f"the restarts for {name}",
            describe=lambda: {n: len(replica_sets(apps, namespace, n)) for n in names},
        )
        # Every stamp of the change was answered before ChangeDetected: nothing else moves.
        for workload_name in names:
            assert (
                len(replica_sets(apps, namespace, workload_name)) == 1 + restarts[workload_name]
            ), (name, workload_name)
    return restarts


SECRET, CONFIGMAP = "secret", "configmap"
CM, SEC = (CONFIGMAP, "cm"), (SECRET, "sec")


def test_reloaders_annotation_cases_restart_what_reloader_would_in_a_window(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    far = window_hours_away(6)
    sources = [
        source(CONFIGMAP, "cm"),
        source(SECRET, "sec"),
        source(CONFIGMAP, "app-config-1"),
        source(CONFIGMAP, "other"),
        source(SECRET, "ignored", {"reloader.stakater.com/ignore": "true"}),
        source(CONFIGMAP, "matched", {"reloader.stakater.com/match": "true"}),
        source(CONFIGMAP, "unmatched"),
    ]
    for body in sources:
        if body["kind"] == "Secret":
            core.create_namespaced_secret(namespace, body)
        else:
            core.create_namespaced_config_map(namespace, body)
    workloads = [
        workload("auto", CM, SEC, annotations=AUTO),
        workload("cm-auto", CM, SEC, annotations={"configmap.reloader.stakater.com/auto": "true"}),
        workload("secret-auto", CM, SEC, annotations={"secret.reloader.stakater.com/auto": "true"}),
        workload("named", annotations={"configmap.reloader.stakater.com/reload": "cm"}),
        workload("regex", annotations={"configmap.reloader.stakater.com/reload": "app-config-.*"}),
        workload(
            "exclude",
            CM,
            SEC,
            annotations={**AUTO, "configmaps.exclude.reloader.stakater.com/reload": "cm"},
        ),
        workload("ignored-user", (SECRET, "ignored"), annotations=AUTO),
        workload(
            "search",
            (CONFIGMAP, "matched"),
            (CONFIGMAP, "unmatched"),
            annotations={"reloader.stakater.com/search": "true"},
        ),
        workload("pod-template", CM, pod_annotations=AUTO),
        workload("windowed", CM, annotations={**AUTO, keys.WORKLOAD_RESTART_AT: far}),
        workload("plain", CM, SEC),
    ]
    for body in workloads:
        apps.create_namespaced_deployment(namespace, body)
    names = [body["metadata"]["name"] for body in workloads]
    wait_for(lambda: all(len(replica_sets(apps, namespace, name)) == 1 for name in names), 60)
    operator(env=RELOADER)
    for kind, name in (CM, SEC, (CONFIGMAP, "app-config-1"), (SECRET, "ignored")):
        wait_for(
            lambda kind=kind, name=name: restarter_annotations(core, namespace, kind, name),
            30,
            message=f"the baseline of {name}",
        )

    change(core, namespace, CONFIGMAP, "other", "2")  # nobody's: never read, never written
    restarts = change_each(
        core,
        apps,
        namespace,
        names,
        [
            (CM, {"auto", "cm-auto", "named", "pod-template"}),
            (SEC, {"auto", "secret-auto", "exclude"}),
            ((CONFIGMAP, "app-config-1"), {"regex"}),
            ((SECRET, "ignored"), set()),
            ((CONFIGMAP, "matched"), {"search"}),
            ((CONFIGMAP, "unmatched"), set()),
        ],
    )

    assert restarts == {
        "auto": 2,
        "cm-auto": 1,
        "secret-auto": 1,
        "named": 1,
        "regex": 1,
        "exclude": 1,
        "ignored-user": 0,
        "search": 1,
        "pod-template": 1,
        "windowed": 0,
        "plain": 0,
    }
    # The workload's own window holds it: stamped for cm, waiting.
    assert set(pending(apps, namespace, "windowed")) == {
        keys.pending_key(CONFIGMAP, "cm"),
        keys.window_key(CONFIGMAP, "cm"),
    }
    (scheduled,) = events(core, namespace, "windowed", "RestartScheduled")
    assert far in scheduled.message
    for name in ("auto", "named"):
        assert any(
            "the default for Reloader's annotations" in event.message
            for event in events(core, namespace, name, "RestartScheduled")
        )
    assert restarter_annotations(core, namespace, CONFIGMAP, "other") == []
    assert pending(apps, namespace, "plain") == {}


def test_without_the_setting_reloaders_annotations_opt_in_for_nothing(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    core.create_namespaced_secret(namespace, source(SECRET, "sec"))
    apps.create_namespaced_deployment(namespace, workload("auto", SEC, annotations=AUTO))
    apps.create_namespaced_deployment(
        namespace, workload("own", SEC, annotations={keys.WORKLOAD_RESTART_AT: "now"})
    )
    operator()
    wait_for(lambda: restarter_annotations(core, namespace, SECRET, "sec"), 30, message="baseline")
    change(core, namespace, SECRET, "sec", "2")
    (detected,) = change_detected(core, namespace, "sec", 1)
    assert "1 did not opt in for it" in detected.message
    wait_for(lambda: len(replica_sets(apps, namespace, "own")) == 2, 30, message="restart")
    assert len(replica_sets(apps, namespace, "auto")) == 1
    assert pending(apps, namespace, "auto") == {}


def test_reloader_1_4_21s_own_reading_of_entries_ignore_and_excludes(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    for body in (
        source(SECRET, "db-prod"),
        source(SECRET, "loud", {"reloader.stakater.com/ignore": "True"}),
        source(SECRET, "quiet", {"reloader.stakater.com/ignore": "true"}),
        # Labelled too: the excluded name is not even a dependency through the reload list.
        labelled(source(SECRET, "cache"), {keys.RESTART_AT_LABEL: "now"}),
    ):
        core.create_namespaced_secret(namespace, body)
    reload_list = "secret.reloader.stakater.com/reload"
    workloads = [
        # Not used by its pod template: selected by the expression ^db.prod$ alone.
        workload("dotted", annotations={reload_list: "db.prod"}),
        workload("loud-user", (SECRET, "loud"), annotations=AUTO),
        workload("quiet-user", (SECRET, "quiet"), annotations=AUTO),
        # Reloader reads ignore on sources only.
        workload(
            "ignore-on-workload",
            (SECRET, "loud"),
            annotations={**AUTO, "reloader.stakater.com/ignore": "true"},
        ),
        # An entry that is no expression is skipped; the others still count.
        workload("bad-entry", annotations={reload_list: "db-(, cache"}),
        # The exclude list is read before the reload list, and its names are no dependency.
        workload(
            "excluded",
            annotations={
                reload_list: "cache",
                "secrets.exclude.reloader.stakater.com/reload": "cache",
            },
        ),
    ]
    for body in workloads:
        apps.create_namespaced_deployment(namespace, body)
    names = [body["metadata"]["name"] for body in workloads]
    wait_for(lambda: all(len(replica_sets(apps, namespace, name)) == 1 for name in names), 60)
    operator(env=RELOADER)
    for name in ("db-prod", "loud", "quiet", "cache"):
        wait_for(
            lambda name=name: restarter_annotations(core, namespace, SECRET, name),
            30,
            message=f"the baseline of {name}",
        )

    restarts = change_each(
        core,
        apps,
        namespace,
        names,
        [
            ((SECRET, "db-prod"), {"dotted"}),
            ((SECRET, "loud"), {"loud-user", "ignore-on-workload"}),
            ((SECRET, "quiet"), set()),
            ((SECRET, "cache"), {"bad-entry"}),
        ],
    )
    assert restarts == {
        "dotted": 1,
        "loud-user": 1,
        "quiet-user": 0,
        "ignore-on-workload": 1,
        "bad-entry": 1,
        "excluded": 0,
    }
    assert pending(apps, namespace, "excluded") == {}
    assert pending(apps, namespace, "quiet-user") == {}
    # The entry that is no expression is said once, on the workload that carries it.
    (warning,) = events(core, namespace, "bad-entry", "InvalidReloadEntry")
    assert warning.type == "Warning"
    assert "secret.reloader.stakater.com/reload entry 'db-(' is not a regular expression" in (
        warning.message
    )
    for name in names:
        if name != "bad-entry":
            assert events(core, namespace, name, "InvalidReloadEntry") == []
