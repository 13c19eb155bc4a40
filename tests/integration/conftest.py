"""Fixtures of the integration files beyond tests/conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import kubernetes
import pytest

from tests.integration.rollouts_watch import Rollouts


@pytest.fixture
def rollouts(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> Iterator[Callable[..., Rollouts]]:
    """Factory: ``rollouts(timeout)`` starts the watch (timeout: the operator's setting)."""
    started: list[Rollouts] = []

    def start(timeout: float = 600.0) -> Rollouts:
        started.append(Rollouts(api_client, namespace, timeout).__enter__())
        return started[-1]

    yield start
    for watch in started:
        watch.__exit__()
