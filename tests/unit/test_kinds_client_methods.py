"""Each workload kind reaches the API through the client's methods for it: the built-in
kinds through ``AppsV1Api``'s, named in ``services.kube.endpoints``, a custom resource through
``CustomObjectsApi``'s; the kind registry itself names no client method."""

from __future__ import annotations

import dataclasses

import kubernetes
import pytest

from restarter.model.kinds import KINDS, WorkloadKind
from restarter.services.kube.endpoints import APPS_STEMS


def test_every_built_in_kind_and_only_those_has_apps_methods() -> None:
    assert set(APPS_STEMS) == {plural for plural, kind in KINDS.items() if kind.built_in}


@pytest.mark.parametrize("plural", sorted(APPS_STEMS))
@pytest.mark.parametrize("verb", ["read", "patch", "list"])
def test_the_apps_client_has_the_method_of_each_verb(plural: str, verb: str) -> None:
    method = f"{verb}_namespaced_{APPS_STEMS[plural]}"
    assert callable(getattr(kubernetes.client.AppsV1Api, method, None)), method


def test_the_kind_registry_names_no_client_method() -> None:
    fields = {field.name for field in dataclasses.fields(WorkloadKind)}
    assert not {name for name in fields if "client" in name or "stem" in name}
