"""A kubeconfig's context chosen by name (the commands' ``--context``), read from a file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from restarter.services.kube import connecting


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """Two clusters nobody listens on; the current context names no namespace."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": f"https://127.0.0.1:{port}"}}
            for name, port in (("prod", 9), ("staging", 7))
        ],
        "users": [{"name": "someone", "user": {"token": "not-a-secret"}}],
        "contexts": [
            {"name": "prod", "context": {"cluster": "prod", "user": "someone"}},
            {
                "name": "staging",
                "context": {"cluster": "staging", "user": "someone", "namespace": "shop"},
            },
        ],
        "current-context": "prod",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_current_context_without_a_name(kubeconfig: Path) -> None:
    client, namespace = connecting.client_from_kubeconfig(str(kubeconfig))
    assert (client.configuration.host, namespace) == ("https://127.0.0.1:9", "default")


def test_a_context_by_name_brings_its_cluster_and_namespace(kubeconfig: Path) -> None:
    client, namespace = connecting.client_from_kubeconfig(str(kubeconfig), "staging")
    assert (client.configuration.host, namespace) == ("https://127.0.0.1:7", "shop")


def test_an_unknown_context_is_named_in_the_error(kubeconfig: Path) -> None:
    with pytest.raises(connecting.KubeconfigError, match="it has no context 'nowhere'"):
        connecting.client_from_kubeconfig(str(kubeconfig), "nowhere")


def test_load_client_uses_the_context_asked_for(kubeconfig: Path) -> None:
    client = connecting.load_client(str(kubeconfig), "staging")
    assert client.configuration.host == "https://127.0.0.1:7"
    with pytest.raises(connecting.KubeconfigError, match="nowhere"):
        connecting.load_client(str(kubeconfig), "nowhere")
