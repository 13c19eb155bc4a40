"""The chart's image as rendered into every pod it makes (the operator, the uninstall hook,
the helm test): pinned by image.digest when set, pulled with imagePullSecrets."""

from __future__ import annotations

from typing import Any

from tests.chart_monitoring import refused, render

DIGEST = "sha256:" + "ab" * 32
REPOSITORY = ("--set", "image.repository=registry.example.com/restarter")


def pod_specs(*values: str) -> dict[str, dict[str, Any]]:
    """Each pod spec the chart renders, by its object's kind."""
    specs = {}
    for doc in render(*values):
        if doc["kind"] in ("Deployment", "Job"):
            specs[doc["kind"]] = doc["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            specs["Pod"] = doc["spec"]
    return specs


def images(*values: str) -> set[str]:
    return {
        container["image"]
        for spec in pod_specs(*values).values()
        for container in spec["containers"]
    }


def test_the_tag_names_the_image_when_no_digest_is_set() -> None:
    assert images(*REPOSITORY, "--set-string", "image.tag=9") == {
        "registry.example.com/restarter:9"
    }


def test_the_digest_pins_the_image_and_wins_over_the_tag() -> None:
    pinned = images(*REPOSITORY, "--set-string", "image.tag=9", "--set", f"image.digest={DIGEST}")
    assert pinned == {f"registry.example.com/restarter@{DIGEST}"}


def test_a_digest_that_is_not_one_is_refused() -> None:
    assert "digest" in refused("--set", "image.digest=latest")


def test_every_pod_pulls_with_the_image_pull_secrets() -> None:
    specs = pod_specs("--set", "imagePullSecrets[0].name=regcred")
    assert set(specs) == {"Deployment", "Job", "Pod"}
    for kind, spec in specs.items():
        assert spec["imagePullSecrets"] == [{"name": "regcred"}], kind
