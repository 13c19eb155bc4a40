"""Which Secrets and ConfigMaps a pod spec uses."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.references import CONFIGMAP, SECRET, Reference, references


def pod(
    container: dict[str, Any] | None = None,
    *,
    init: bool = False,
    volumes: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}], **extra}
    if container and init:
        spec["initContainers"] = [container]
    elif container:
        spec["containers"].append(container)
    if volumes:
        spec["volumes"] = volumes
    return spec


ENV_CASES = [
    (
        {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
        Reference(SECRET, "s"),
    ),
    ({"envFrom": [{"secretRef": {"name": "s"}}]}, Reference(SECRET, "s")),
    (
        {"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
        Reference(CONFIGMAP, "c"),
    ),
    ({"envFrom": [{"configMapRef": {"name": "c"}}]}, Reference(CONFIGMAP, "c")),
]


@pytest.mark.parametrize("init", [False, True], ids=["containers", "initContainers"])
@pytest.mark.parametrize(("fields", "expected"), ENV_CASES)
def test_env_references_in_every_container_list(
    fields: dict[str, Any], expected: Reference, init: bool
) -> None:
    container = {"name": "c", "image": "x", **fields}
    assert references(pod(container, init=init)) == {expected}


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        ({"name": "v", "secret": {"secretName": "s"}}, Reference(SECRET, "s")),
        (
            {"name": "v", "projected": {"sources": [{"secret": {"name": "s"}}]}},
            Reference(SECRET, "s"),
        ),
        ({"name": "v", "configMap": {"name": "c"}}, Reference(CONFIGMAP, "c")),
        (
            {
                "name": "v",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "c"}},
                        {"serviceAccountToken": {"path": "t"}},
                    ]
                },
            },
            Reference(CONFIGMAP, "c"),
        ),
    ],
)
def test_volume_references(volume: dict[str, Any], expected: Reference) -> None:
    assert references(pod(volumes=[volume])) == {expected}


def test_image_pull_secrets_are_not_references() -> None:
    assert references(pod(imagePullSecrets=[{"name": "regcred"}])) == frozenset()


def test_a_pod_that_uses_nothing_and_a_missing_spec_have_no_references() -> None:
    assert references(pod()) == frozenset()
    assert references(None) == frozenset()


def test_the_same_secret_twice_is_one_reference() -> None:
    container = {"name": "c", "image": "x", "envFrom": [{"secretRef": {"name": "s"}}]}
    spec = pod(container, volumes=[{"name": "v", "secret": {"secretName": "s"}}])
    assert references(spec) == {Reference(SECRET, "s")}
