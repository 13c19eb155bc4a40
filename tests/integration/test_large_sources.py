"""Large sources on the real control plane: what restarter writes on a Secret or ConfigMap
stays a few KiB whatever its key count, a change of one key restarts its readers, precision
is given up only with a Warning, and a refused patch is a Warning Event and a metric.

The apiserver allows 256 KiB for all of an object's annotations together; digests per key
of 5 000 keys of 40 characters take 332 KiB, which is why they are kept per bucket."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest

from restarter.model import keys, source_changes
from restarter.model.checksums import (
    BUCKET_SCHEME,
    BUCKETS,
    bucket_of,
    checksum,
    key_digests,
    new_salt,
    read_key_digests,
)
from restarter_cluster.cluster import Cluster
from restarter_cluster.ports import free_port
from tests.conftest import Operator, wait_for
from tests.integration.factories import configmap, deployment, encoded, secret
from tests.integration.test_operator_restarts import TICKS, replica_sets, rollout_finished
from tests.integration.test_replicas_and_metrics import scrape

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
OperatorFactory = Callable[..., Operator]

#: Keys of 253 characters (values of 2 bytes) in the widest source the tests create. The
#: apiserver's 1 MiB cap counts values only; what bounds the key names is etcd's request
#: limit (1.5 MiB by default): 5 979 such keys could be created here, 5 980 not. 5 900
#: leave room for restarter's annotations and a change.
MOST_LONG_KEYS = 5900
#: A few KiB: what restarter's annotations on a source may take, whatever its keys.
FEW_KIB = 4 * 1024


def long_keys(count: int) -> dict[str, str]:
    """``count`` keys of 253 characters, the longest a key may be."""
    return {f"{i:05d}-".ljust(253, "k"): f"{i % 100:02d}" for i in range(count)}


def keys_of_40(count: int) -> dict[str, str]:
    return {f"setting-{i:05d}-".ljust(40, "x"): f"value-{i}" for i in range(count)}


def restarter_bytes(annotations: dict[str, str]) -> int:
    """The bytes restarter's own annotations take, as the apiserver counts them."""
    ours = {k: v for k, v in annotations.items() if k.startswith(keys.PREFIX + "/")}
    return source_changes.annotation_bytes(ours)


def source_annotations(core: Core, kind: str, namespace: str, name: str) -> dict[str, str]:
    if kind == "secret":
        body = core.read_namespaced_secret(name, namespace)
    else:
        body = core.read_namespaced_config_map(name, namespace)
    return dict(body.metadata.annotations or {})


def recorded(core: Core, kind: str, namespace: str, name: str) -> dict[str, str]:
    """The source's annotations once restarter recorded its checksum."""

    def found() -> dict[str, str] | None:
        annotations = source_annotations(core, kind, namespace, name)
        return annotations if keys.CHECKSUM in annotations else None

    return dict(wait_for(found, 60, message=f"the checksum on {kind} {name}"))


def key_ref(kind: str, source: str, key: str) -> dict[str, Any]:
    ref = "secretKeyRef" if kind == "secret" else "configMapKeyRef"
    return {"name": "V", "valueFrom": {ref: {"name": source, "key": key}}}


def restarted_at(apps: Apps, namespace: str, name: str) -> str | None:
    template = apps.read_namespaced_deployment(name, namespace).spec.template.metadata
    return (template.annotations or {}).get(keys.KUBECTL_RESTARTED_AT)


def source_events(
    core: Core, namespace: str, kind: str, name: str, reason: str
) -> list[kubernetes.client.CoreV1Event]:
    """Events of one object, selected as ``kubectl describe`` selects them (kind, name,
    namespace, uid)."""
    source = (
        core.read_namespaced_secret(name, namespace)
        if kind == "Secret"
        else core.read_namespaced_config_map(name, namespace)
    )
    selector = ",".join(
        (
            f"involvedObject.kind={kind}",
            f"involvedObject.name={name}",
            f"involvedObject.namespace={namespace}",
            f"involvedObject.uid={source.metadata.uid}",
        )
    )
    found = core.list_namespaced_event(namespace, field_selector=selector).items
    return [event for event in found if event.reason == reason]


def test_10000_keys_of_253_characters_are_refused_by_the_storage_not_by_the_1_mib_cap(
    core: Core, namespace: str
) -> None:
    """The source the issue asks for cannot exist. The 1 MiB cap counts values only (here
    1.5 MB of key names pass it); 2.6 MB of names exceed what the apiserver sends to etcd."""
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        core.create_namespaced_secret(namespace, secret("ten-thousand", long_keys(10_000), "now"))
    message = json.loads(refused.value.body)["message"]
    print(f"\n10 000 keys of 253 characters: HTTP {refused.value.status}: {message}")
    assert refused.value.status == 500
    assert "larger than max" in message or "too large" in message
    core.create_namespaced_secret(namespace, secret("wide", long_keys(MOST_LONG_KEYS), "now"))
    with pytest.raises(kubernetes.client.exceptions.ApiException) as capped:
        core.create_namespaced_secret(namespace, secret("one-value", {"k": "x" * (1 << 20 | 1)}))
    assert capped.value.status == 422
    assert "may not be more than 1048576 bytes" in json.loads(capped.value.body)["message"]


def test_5900_keys_of_253_characters_record_a_few_kib_and_one_key_restarts_its_readers(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    values = long_keys(MOST_LONG_KEYS)
    names = sorted(values)
    changed, others = names[7], names[100:104]
    core.create_namespaced_secret(namespace, secret("wide", values, "now"))
    readers = {"reads-changed": changed} | {f"reads-other-{i}": key for i, key in enumerate(others)}
    for name, key in readers.items():
        body = deployment(name, env=[key_ref("secret", "wide", key)], replicas=1)
        apps.create_namespaced_deployment(namespace, body)
    for name in readers:
        rollout_finished(cluster, namespace, name)

    operator()
    first = recorded(core, "secret", namespace, "wide")
    size = restarter_bytes(first)
    print(f"\nrestarter's annotations on {MOST_LONG_KEYS} keys of 253 characters: {size} bytes")
    assert size <= FEW_KIB
    digests = read_key_digests(first[keys.KEY_DIGESTS])
    assert digests is not None and json.loads(first[keys.KEY_DIGESTS])["scheme"] == BUCKET_SCHEME
    assert digests.checksum == first[keys.CHECKSUM] == checksum(encoded(values))

    core.patch_namespaced_secret("wide", namespace, {"data": encoded({changed: "zz"})})
    wait_for(
        lambda: len(replica_sets(apps, namespace, "reads-changed")) == 2,
        60,
        message="the restart of the reader of the changed key",
    )
    assert restarted_at(apps, namespace, "reads-changed")
    rollout_finished(cluster, namespace, "reads-changed")
    time.sleep(TICKS)
    # A reader of a key in another bucket does not restart; one in the changed key's bucket
    # does (a false positive of the buckets, never a missed restart).
    bucket = bucket_of(digests.salt, changed, BUCKETS)
    apart = [n for n, key in readers.items() if bucket_of(digests.salt, key, BUCKETS) != bucket]
    assert apart, "every reader's key shares the changed key's bucket (1 in 256³)"
    for name, key in readers.items():
        same = bucket_of(digests.salt, key, BUCKETS) == bucket
        assert len(replica_sets(apps, namespace, name)) == (2 if same else 1), name
        assert bool(restarted_at(apps, namespace, name)) is same, name

    after = source_annotations(core, "secret", namespace, "wide")
    assert restarter_bytes(after) <= FEW_KIB
    assert keys.CHANGE not in after  # the change is recorded: done
    [detected] = source_events(core, namespace, "Secret", "wide", "ChangeDetected")
    # The buckets first: the message is cut at 1 024 characters, and these names are long.
    assert detected.message.startswith(
        f"data changed (1 of {BUCKETS} digest buckets changed, and which of their keys "
        "changed cannot be told: possibly key"
    )


def test_5000_keys_of_40_characters_record_the_change_and_stamp_the_dependents(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    """The user's ConfigMap: digests per key (332 KiB) are refused by the apiserver; the
    change is recorded per bucket, and its readers restart."""
    values = keys_of_40(5000)
    changed = sorted(values)[4321]
    core.create_namespaced_config_map(namespace, configmap("settings", "now", data=values))
    # What restarter recorded before (one digest per key) cannot be written at all.
    per_key = key_digests(values, None, new_salt(bytes(16)), checksum(values)).to_annotation()
    print(f"\ndigests per key of 5 000 keys of 40 characters: {len(per_key)} bytes")
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        core.patch_namespaced_config_map(
            "settings", namespace, {"metadata": {"annotations": {keys.KEY_DIGESTS: per_key}}}
        )
    assert refused.value.status == 422, refused.value.body
    print(f"the apiserver's answer to them: {json.loads(refused.value.body)['message']}")

    whole = {"name": "all", "configMap": {"name": "settings"}}
    apps.create_namespaced_deployment(
        namespace, deployment("reads-key", env=[key_ref("configmap", "settings", changed)])
    )
    apps.create_namespaced_deployment(namespace, deployment("mounts-all", volumes=[whole]))
    for name in ("reads-key", "mounts-all"):
        rollout_finished(cluster, namespace, name)

    operator()
    first = recorded(core, "configmap", namespace, "settings")
    size = restarter_bytes(first)
    print(f"restarter's annotations on 5 000 keys of 40 characters: {size} bytes")
    assert size <= FEW_KIB
    assert first[keys.CHECKSUM] == checksum(values)

    core.patch_namespaced_config_map("settings", namespace, {"data": {changed: "new"}})
    for name in ("reads-key", "mounts-all"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            60,
            message=f"the restart of {name}",
        )
        assert restarted_at(apps, namespace, name)
    after = wait_for(
        lambda: (
            (a := source_annotations(core, "configmap", namespace, "settings")).get(keys.CHECKSUM)
            == checksum({**values, changed: "new"})
            and a
        ),
        30,
        message="the change recorded",
    )
    assert restarter_bytes(after) <= FEW_KIB


def crowding(room: int) -> dict[str, str]:
    """One annotation of the user's that leaves ``room`` bytes of the apiserver's limit."""
    name = "example.com/inventory"
    return {name: "x" * (source_changes.ANNOTATIONS_LIMIT - len(name) - room)}


def test_no_room_beside_the_sources_annotations_keeps_the_checksum_with_a_warning(
    cluster: Cluster, core: Core, apps: Apps, namespace: str, operator: OperatorFactory
) -> None:
    """Room for the checksum, not for digests per bucket: the checksum alone, a Warning on
    the ConfigMap, and a change restarts every dependent (which keys is unknown)."""
    values = keys_of_40(300)
    first_key, second_key = sorted(values)[:2]
    body = configmap("crowded", "now", data=values, annotations=crowding(2500))
    core.create_namespaced_config_map(namespace, body)
    for name, key in (("reads-first", first_key), ("reads-second", second_key)):
        ref = key_ref("configmap", "crowded", key)
        apps.create_namespaced_deployment(namespace, deployment(name, env=[ref], replicas=1))
        rollout_finished(cluster, namespace, name)

    operator()
    first = recorded(core, "configmap", namespace, "crowded")
    assert keys.KEY_DIGESTS not in first
    [warning] = wait_for(
        lambda: source_events(core, namespace, "ConfigMap", "crowded", "KeyDigestsNotRecorded"),
        30,
        message="the Warning on the ConfigMap",
    )
    assert warning.type == "Warning"
    assert "recorded the checksum only" in warning.message
    described = cluster.kubectl("-n", namespace, "describe", "configmap", "crowded").stdout
    assert "KeyDigestsNotRecorded" in described

    core.patch_namespaced_config_map("crowded", namespace, {"data": {first_key: "new"}})
    for name in ("reads-first", "reads-second"):
        wait_for(
            lambda name=name: len(replica_sets(apps, namespace, name)) == 2,
            60,
            message=f"the restart of {name}",
        )
    detected = source_events(core, namespace, "ConfigMap", "crowded", "ChangeDetected")
    assert any("changed keys unknown" in event.message for event in detected)


def test_a_refused_checksum_is_a_warning_and_a_metric_and_no_loop(
    core: Core, apps: Apps, namespace: str, operator: OperatorFactory, cluster: Cluster
) -> None:
    """Annotations of the user's that leave too little room for even the checksum: the
    apiserver refuses it (422). A Warning says so, the metric counts it, nothing is sent
    again in a loop, and a change seen while the operator runs still restarts its reader."""
    core.create_namespaced_secret(
        namespace, secret("full", {"password": "one"}, "now", crowding(40))
    )
    apps.create_namespaced_deployment(
        namespace, deployment("web", env=[key_ref("secret", "full", "password")], replicas=1)
    )
    rollout_finished(cluster, namespace, "web")
    port = free_port()
    operator("--metrics-port", str(port))
    refused = ("restarter_source_patch_errors_total", (("kind", "Secret"), ("status", "422")))

    [warning] = wait_for(
        lambda: source_events(core, namespace, "Secret", "full", "ChecksumNotRecorded"),
        60,
        message="the Warning on the Secret",
    )
    assert warning.type == "Warning" and "HTTP 422" in warning.message
    assert "one made while it is not running is missed" in warning.message
    assert wait_for(lambda: scrape(port).get(refused), 15, message="the metric") == 1.0
    time.sleep(TICKS)  # nothing to wait on: the absence of a retry
    assert scrape(port).get(refused) == 1.0
    [again] = source_events(core, namespace, "Secret", "full", "ChecksumNotRecorded")
    assert (again.count or 1) == 1
    assert keys.CHECKSUM not in source_annotations(core, "secret", namespace, "full")

    core.patch_namespaced_secret("full", namespace, {"data": encoded({"password": "two"})})
    wait_for(
        lambda: len(replica_sets(apps, namespace, "web")) == 2, 60, message="the restart of web"
    )
    # The change annotation and the checksum were both refused: two more, and Warnings.
    assert wait_for(lambda: scrape(port).get(refused) == 3.0, 15, message="the metric")
    assert source_events(core, namespace, "Secret", "full", "ChangeNotRecorded")
    messages = [
        event.message
        for event in source_events(core, namespace, "Secret", "full", "ChecksumNotRecorded")
    ]
    assert any("sees it again when it next starts" in message for message in messages)
