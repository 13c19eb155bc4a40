"""kopf keeps no diff base for restarter: nothing may need one."""

from __future__ import annotations

import kopf

from restarter.main import kopf_settings
from restarter.operator.handlers import build_registry
from restarter.operator.no_diffs import NoDiffBase
from restarter.services import settings as settings_module
from restarter.services.kube.api import Api


def test_no_handler_needs_a_diff() -> None:
    """Change handlers and idle timers would see every object unchanged without a diff
    base: the registry has none of them."""
    settings = settings_module.build([])
    registry = build_registry(settings, Api(None))  # type: ignore[arg-type]
    assert not registry._changing.get_all_handlers()
    spawning = registry._spawning.get_all_handlers()
    assert spawning, "the pending workloads' timers are registered"
    assert all(getattr(handler, "idle", None) is None for handler in spawning)


def test_kopf_builds_no_essence() -> None:
    """The storage kopf is given builds, fetches and stores nothing (no copy of a body)."""
    storage = kopf_settings(settings_module.build([])).persistence.diffbase_storage
    assert isinstance(storage, NoDiffBase)
    body = kopf.Body({"metadata": {"name": "a", "annotations": {"x": "1"}}, "spec": {}})
    assert storage.build(body=body) is None
    assert storage.fetch(body=body) is None
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence={"spec": {}})
    assert not patch
