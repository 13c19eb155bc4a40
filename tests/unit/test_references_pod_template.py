"""Which Secrets and ConfigMaps a pod spec uses, through every path the API offers."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model import keys
from restarter.model.references import CONFIGMAP, SECRET, Reference, references, workload_references

# --- factories ---------------------------------------------------------------------------


def container(name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "registry.example/app:1", **fields}


def pod_spec(
    *,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or [container()], **extra}
    if init_containers:
        spec["initContainers"] = init_containers
    if volumes:
        spec["volumes"] = volumes
    return spec


def secret_key_env(secret: str, key: str = "k") -> dict[str, Any]:
    return {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def configmap_key_env(configmap: str, key: str = "k") -> dict[str, Any]:
    return {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": configmap, "key": key}}}


def secret_env_from(secret: str) -> dict[str, Any]:
    return {"secretRef": {"name": secret}}


def configmap_env_from(configmap: str) -> dict[str, Any]:
    return {"configMapRef": {"name": configmap}}


def secret_volume(secret: str) -> dict[str, Any]:
    return {"name": f"vol-{secret}", "secret": {"secretName": secret}}


def configmap_volume(configmap: str) -> dict[str, Any]:
    return {"name": f"vol-{configmap}", "configMap": {"name": configmap}}


def projected_volume(*sources: dict[str, Any]) -> dict[str, Any]:
    return {"name": "projected", "projected": {"sources": list(sources)}}


def projected_secret(secret: str) -> dict[str, Any]:
    return {"secret": {"name": secret, "items": [{"key": "k", "path": "k"}]}}


def projected_configmap(configmap: str) -> dict[str, Any]:
    return {"configMap": {"name": configmap}}


def secret(name: str, *keys_read: str) -> Reference:
    """A reference to Secret ``name``: the keys read, or (none given) every key."""
    return Reference(SECRET, name, frozenset(keys_read) if keys_read else None)


def configmap(name: str, *keys_read: str) -> Reference:
    return Reference(CONFIGMAP, name, frozenset(keys_read) if keys_read else None)


# --- containers and initContainers --------------------------------------------------------

CONTAINER_PATHS = [
    pytest.param({"env": [secret_key_env("s")]}, secret("s", "k"), id="env-secretKeyRef"),
    pytest.param({"envFrom": [secret_env_from("s")]}, secret("s"), id="envFrom-secretRef"),
    pytest.param({"env": [configmap_key_env("c")]}, configmap("c", "k"), id="env-configMapKeyRef"),
    pytest.param({"envFrom": [configmap_env_from("c")]}, configmap("c"), id="envFrom-configMapRef"),
]


@pytest.mark.parametrize(("fields", "expected"), CONTAINER_PATHS)
def test_a_container_reference_is_found_in_containers(
    fields: dict[str, Any], expected: Reference
) -> None:
    spec = pod_spec(containers=[container(), container("sidecar", **fields)])
    assert references(spec) == {expected}


@pytest.mark.parametrize(("fields", "expected"), CONTAINER_PATHS)
def test_a_container_reference_is_found_in_init_containers(
    fields: dict[str, Any], expected: Reference
) -> None:
    assert references(pod_spec(init_containers=[container("init", **fields)])) == {expected}


def test_plain_env_values_are_not_references() -> None:
    env = [
        {"name": "PLAIN", "value": "x"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    ]
    assert references(pod_spec(containers=[container(env=env)])) == frozenset()


# --- volumes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        pytest.param(secret_volume("s"), secret("s"), id="secret-secretName"),
        pytest.param(configmap_volume("c"), configmap("c"), id="configMap-name"),
        pytest.param(
            projected_volume(projected_secret("s")), secret("s", "k"), id="projected-secret"
        ),
        pytest.param(
            projected_volume(projected_configmap("c")), configmap("c"), id="projected-configMap"
        ),
        pytest.param(
            projected_volume(
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": []}},
                projected_secret("s"),
            ),
            secret("s", "k"),
            id="projected-among-other-sources",
        ),
    ],
)
def test_a_volume_reference_is_found(volume: dict[str, Any], expected: Reference) -> None:
    assert references(pod_spec(volumes=[volume])) == {expected}


def test_volumes_that_use_no_secret_or_configmap_are_not_references() -> None:
    volumes = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "host", "hostPath": {"path": "/tmp"}},
        projected_volume({"serviceAccountToken": {"path": "token"}}),
    ]
    assert references(pod_spec(volumes=volumes)) == frozenset()


# --- everything together -----------------------------------------------------------------


def test_every_path_at_once_yields_every_reference_once() -> None:
    spec = pod_spec(
        init_containers=[container("init", env=[secret_key_env("init-secret")])],
        containers=[
            container(
                env=[secret_key_env("env-secret"), configmap_key_env("env-cm")],
                envFrom=[secret_env_from("from-secret"), configmap_env_from("from-cm")],
            ),
            container("sidecar", envFrom=[secret_env_from("env-secret")]),
        ],
        volumes=[
            secret_volume("vol-secret"),
            configmap_volume("vol-cm"),
            projected_volume(projected_secret("proj-secret"), projected_configmap("proj-cm")),
        ],
    )
    assert references(spec) == {
        secret("init-secret", "k"),
        secret("env-secret"),  # a key in one container, every key in the sidecar
        secret("from-secret"),
        secret("vol-secret"),
        secret("proj-secret", "k"),
        configmap("env-cm", "k"),
        configmap("from-cm"),
        configmap("vol-cm"),
        configmap("proj-cm"),
    }


def test_the_same_secret_used_twice_is_one_reference() -> None:
    spec = pod_spec(
        containers=[container(envFrom=[secret_env_from("s")])], volumes=[secret_volume("s")]
    )
    assert references(spec) == {secret("s")}


def test_a_secret_and_a_configmap_of_the_same_name_are_two_references() -> None:
    spec = pod_spec(volumes=[secret_volume("app"), configmap_volume("app")])
    assert references(spec) == {secret("app"), configmap("app")}


# --- not references ----------------------------------------------------------------------


def test_image_pull_secrets_are_not_references() -> None:
    spec = pod_spec(imagePullSecrets=[{"name": "regcred"}])
    assert references(spec) == frozenset()


def test_image_pull_secrets_are_left_out_beside_real_references() -> None:
    spec = pod_spec(imagePullSecrets=[{"name": "regcred"}], volumes=[secret_volume("tls")])
    assert references(spec) == {secret("tls")}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(pod_spec(), id="a-pod-using-nothing"),
        pytest.param({}, id="an-empty-spec"),
        pytest.param(None, id="no-spec"),
        pytest.param(
            {"containers": None, "initContainers": None, "volumes": None}, id="null-lists"
        ),
        pytest.param(
            pod_spec(containers=[container(env=None, envFrom=None)]), id="null-env-fields"
        ),
    ],
)
def test_a_spec_that_references_nothing_has_no_references(spec: dict[str, Any] | None) -> None:
    assert references(spec) == frozenset()


# --- the workload's own annotations --------------------------------------------------


def test_a_workload_declares_sources_its_pod_template_does_not_show() -> None:
    annotations = {keys.DEPENDS_ON_SECRETS: "api-token, db ,", keys.DEPENDS_ON_CONFIGMAPS: "flags"}
    spec = pod_spec(containers=[container(env=[secret_key_env("db")])])
    assert workload_references(annotations, spec) == {
        Reference(SECRET, "api-token"),
        Reference(SECRET, "db"),  # declared: every key, beyond the one the template reads
        Reference(CONFIGMAP, "flags"),
    }


@pytest.mark.parametrize("value", ["true"])
def test_an_opted_out_workload_depends_on_nothing(value: str) -> None:
    annotations = {keys.IGNORE: value, keys.DEPENDS_ON_SECRETS: "api-token"}
    spec = pod_spec(containers=[container(env=[secret_key_env("db")])])
    assert workload_references(annotations, spec) == frozenset()


@pytest.mark.parametrize("value", ["false", "True", "yes", ""])
def test_only_the_exact_value_true_opts_out(value: str) -> None:
    spec = pod_spec(containers=[container(env=[secret_key_env("db")])])
    assert workload_references({keys.IGNORE: value}, spec) == {secret("db", "k")}


def test_a_workload_without_annotations_depends_on_its_pod_template() -> None:
    spec = pod_spec(containers=[container(env=[configmap_key_env("cfg")])])
    assert workload_references(None, spec) == {configmap("cfg", "k")}
