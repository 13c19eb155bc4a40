"""Which keys of each Secret and ConfigMap a pod template reads, form by form."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.cluster.reference_map import ReferenceMap, references_of
from restarter.model import keys
from restarter.model.checksums import ChangedKeys
from restarter.model.references import (
    CONFIGMAP,
    SECRET,
    KeyNames,
    Reference,
    affected_keys,
    references,
    workload_references,
)


def affected(
    refs: ReferenceMap, namespace: str, kind: str, name: str, changed: ChangedKeys
) -> list[tuple[str, str, KeyNames]]:
    """(plural, name, the changed keys it reads) of every workload the stamping flow
    targets for ``changed`` (None: unknown, so every user, with None), sorted."""
    found = refs.targets(namespace, kind, name, changed, {})
    return [(target.plural, target.name, target.keys) for target in found]


def spec(
    *, env: list[Any] | None = None, env_from: list[Any] | None = None, volumes: Any = None
) -> dict[str, Any]:
    main: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if env:
        main["env"] = env
    if env_from:
        main["envFrom"] = env_from
    return {"containers": [main], **({"volumes": volumes} if volumes else {})}


def key_ref(field: str, name: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {field: {"name": name, "key": key, **extra}}}


def items(*names: str) -> list[dict[str, str]]:
    return [{"key": name, "path": f"files/{name}"} for name in names]


def reads(*names: str) -> frozenset[str]:
    return frozenset(names)


FORMS = [
    pytest.param(spec(env=[key_ref("secretKeyRef", "s", "ca.crt")]), SECRET, reads("ca.crt"),
                 id="secretKeyRef"),
    pytest.param(spec(env=[key_ref("configMapKeyRef", "s", "mode")]), CONFIGMAP, reads("mode"),
                 id="configMapKeyRef"),
    pytest.param(spec(env=[key_ref("secretKeyRef", "s", "ca.crt", optional=True)]), SECRET,
                 reads("ca.crt"), id="optional-secretKeyRef"),
    pytest.param(spec(env=[key_ref("configMapKeyRef", "s", "mode", optional=True)]), CONFIGMAP,
                 reads("mode"), id="optional-configMapKeyRef"),
    pytest.param(spec(env=[key_ref("secretKeyRef", "s", "a"), key_ref("secretKeyRef", "s", "b")]),
                 SECRET, reads("a", "b"), id="two-keyRefs-union"),
    pytest.param(spec(env_from=[{"secretRef": {"name": "s"}}]), SECRET, None, id="envFrom-secret"),
    pytest.param(spec(env_from=[{"configMapRef": {"name": "s", "optional": True}, "prefix": "P_"}]),
                 CONFIGMAP, None, id="envFrom-configMap-optional-prefixed"),
    pytest.param(spec(volumes=[{"name": "v", "secret": {"secretName": "s"}}]), SECRET, None,
                 id="secret-volume-whole"),
    pytest.param(spec(volumes=[{"name": "v", "secret": {"secretName": "s", "items": items("b")}}]),
                 SECRET, reads("b"), id="secret-volume-items"),
    pytest.param(spec(volumes=[{"name": "v", "secret": {"secretName": "s", "items": []}}]),
                 SECRET, None, id="secret-volume-empty-items-is-whole"),
    pytest.param(spec(volumes=[{"name": "v", "configMap": {"name": "s", "items": items("x", "y"),
                                                           "optional": True}}]),
                 CONFIGMAP, reads("x", "y"), id="configMap-volume-items-optional"),
    pytest.param(spec(volumes=[{"name": "v", "configMap": {"name": "s"}}]), CONFIGMAP, None,
                 id="configMap-volume-whole"),
    pytest.param(spec(volumes=[{"name": "p", "projected": {"sources": [
                     {"serviceAccountToken": {"path": "t"}},
                     {"secret": {"name": "s", "items": items("tls.crt", "tls.key")}}]}}]),
                 SECRET, reads("tls.crt", "tls.key"), id="projected-secret-items"),
    pytest.param(spec(volumes=[{"name": "p", "projected": {"sources": [
                     {"configMap": {"name": "s", "items": items("a")}}]}}]),
                 CONFIGMAP, reads("a"), id="projected-configMap-items"),
    pytest.param(spec(volumes=[{"name": "p", "projected": {"sources": [
                     {"secret": {"name": "s"}}]}}]),
                 SECRET, None, id="projected-secret-whole"),
    pytest.param(spec(env=[key_ref("secretKeyRef", "s", "a")],
                      volumes=[{"name": "v", "secret": {"secretName": "s", "items": items("b")}}]),
                 SECRET, reads("a", "b"), id="keyRef-and-items-union"),
    pytest.param(spec(env=[key_ref("secretKeyRef", "s", "a")],
                      env_from=[{"secretRef": {"name": "s"}}]),
                 SECRET, None, id="keyRef-and-envFrom-is-every-key"),
    pytest.param(spec(volumes=[{"name": "v", "secret": {"secretName": "s", "items": items("b")}},
                               {"name": "w", "secret": {"secretName": "s"}}]),
                 SECRET, None, id="items-and-whole-volume-is-every-key"),
]  # fmt: skip


@pytest.mark.parametrize(("pod_spec", "kind", "expected"), FORMS)
def test_each_form_reads_its_keys(pod_spec: dict[str, Any], kind: str, expected: KeyNames) -> None:
    assert references(pod_spec) == {Reference(kind, "s", expected)}


@pytest.mark.parametrize(("pod_spec", "kind", "expected"), FORMS)
def test_an_init_container_reads_the_same_keys(
    pod_spec: dict[str, Any], kind: str, expected: KeyNames
) -> None:
    [main] = pod_spec["containers"]
    moved = {**pod_spec, "initContainers": [main], "containers": [{"name": "other"}]}
    assert references(moved) == {Reference(kind, "s", expected)}


def test_keys_read_in_an_init_container_and_a_container_add_up() -> None:
    pod_spec = spec(env=[key_ref("secretKeyRef", "s", "b")])
    pod_spec["initContainers"] = [{"name": "init", "env": [key_ref("secretKeyRef", "s", "a")]}]
    assert references(pod_spec) == {Reference(SECRET, "s", reads("a", "b"))}


def test_a_declared_source_is_read_whole_whatever_the_template_reads() -> None:
    annotations = {keys.DEPENDS_ON_SECRETS: "s", keys.DEPENDS_ON_CONFIGMAPS: "c"}
    pod_spec = spec(env=[key_ref("secretKeyRef", "s", "a"), key_ref("configMapKeyRef", "k", "x")])
    assert workload_references(annotations, pod_spec) == {
        Reference(SECRET, "s"),
        Reference(CONFIGMAP, "c"),
        Reference(CONFIGMAP, "k", reads("x")),
    }


@pytest.mark.parametrize(
    ("read", "changed", "expected"),
    [
        pytest.param(reads("a"), reads("a", "b"), reads("a"), id="reads-a-changed"),
        pytest.param(reads("a"), reads("b"), reads(), id="reads-none-changed"),
        pytest.param(None, reads("d"), reads("d"), id="whole-sees-every-change"),
        pytest.param(None, reads(), reads(), id="nothing-changed"),
        pytest.param(reads("a"), None, None, id="unknown-affects-a-key-reader"),
        pytest.param(None, None, None, id="unknown-affects-a-whole-reader"),
    ],
)
def test_the_changed_keys_a_reader_sees(
    read: KeyNames, changed: KeyNames, expected: KeyNames
) -> None:
    assert affected_keys(read, changed) == expected


def workload(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"template": {"spec": pod_spec}},
    }


def test_the_map_gives_exactly_the_readers_of_a_changed_key() -> None:
    bodies = {
        "key-ref-a": spec(env=[key_ref("secretKeyRef", "db", "a")]),
        "items-b": spec(
            volumes=[{"name": "v", "secret": {"secretName": "db", "items": items("b")}}]
        ),
        "env-from": spec(env_from=[{"secretRef": {"name": "db"}}]),
        "volume": spec(volumes=[{"name": "v", "secret": {"secretName": "db"}}]),
    }
    refs = ReferenceMap()
    for name, pod_spec in bodies.items():
        refs.apply("ADDED", "deployments", "ns", name, references_of(workload(name, pod_spec)))
    assert affected(refs, "ns", SECRET, "db", reads("b")) == [
        ("deployments", "env-from", reads("b")),
        ("deployments", "items-b", reads("b")),
        ("deployments", "volume", reads("b")),
    ]
    assert [name for _, name, _ in affected(refs, "ns", SECRET, "db", reads("d"))] == [
        "env-from",
        "volume",
    ]
    assert [name for _, name, _ in affected(refs, "ns", SECRET, "db", None)] == sorted(bodies)
    assert affected(refs, "ns", SECRET, "db", reads()) == []


def test_a_workload_that_starts_reading_another_key_follows_in_the_map() -> None:
    refs = ReferenceMap()
    before = references_of(workload("web", spec(env=[key_ref("secretKeyRef", "db", "a")])))
    after = references_of(workload("web", spec(env=[key_ref("secretKeyRef", "db", "b")])))
    refs.apply("ADDED", "deployments", "ns", "web", before)
    refs.apply("MODIFIED", "deployments", "ns", "web", after)
    assert affected(refs, "ns", SECRET, "db", reads("a")) == []
    assert affected(refs, "ns", SECRET, "db", reads("b")) == [("deployments", "web", reads("b"))]
    assert refs.dependents("ns", SECRET, "db") == [("deployments", "web")]


def test_equal_key_sets_of_many_workloads_are_one_object_and_whole_reads_none() -> None:
    found = [
        references_of(workload(f"w{i}", spec(env=[key_ref("secretKeyRef", "db", "ca.crt")])))
        for i in range(3)
    ]
    [first], [second], [third] = found
    assert first.keys is second.keys is third.keys
    [whole] = references_of(workload("w", spec(env_from=[{"secretRef": {"name": "db"}}])))
    assert whole.keys is None
