"""Fixtures of the integration files beyond tests/conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.chart_identity import ChartIdentities
from tests.conftest import Operator
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


#: The chart's values whose RBAC and admission policy an operator of these tests runs
#: under: Rollouts included (their CRD comes and goes within a file).
CHART_VALUES = ("--set", "rollouts.enabled=true")
#: With a namespace selector the chart also grants list and watch on Namespaces.
SELECTOR_VALUES = (*CHART_VALUES, "--set", "namespaceSelector=restarter-tests")
#: With the blocking-pod gate the chart also grants list on Pods.
POD_GATE_VALUES = (*CHART_VALUES, "--set", "gates.blockingPodSelector=job")
#: With --csi the chart also grants reading the CSI driver's classes and pod statuses.
CSI_VALUES = (*CHART_VALUES, "--set", "csi.enabled=true")


@pytest.fixture(autouse=True)
def operators_as_the_chart(chart_identities: ChartIdentities) -> Iterator[None]:
    """Every operator a test starts without a kubeconfig of its own runs as the chart's
    ServiceAccount, under the chart's RBAC and admission policy; a write of it that the
    policy refused fails the test (the apiserver's count of the policy's refusals)."""
    before: list[float] = []

    def identity(args: list[str]) -> Path:
        values = SELECTOR_VALUES if "--namespace-selector" in args else CHART_VALUES
        if "--gate-blocking-pods" in args:
            values = POD_GATE_VALUES
        if "--csi" in args:
            values = CSI_VALUES
        kubeconfig = chart_identities.get(*values).kubeconfig
        if not before:
            before.append(chart_identities.refusals())
        return kubeconfig

    Operator.default_identity = identity
    try:
        yield
    finally:
        Operator.default_identity = None
    if before:
        refused = chart_identities.refusals() - before[0]
        assert refused == 0, (
            f"the chart's admission policy refused {refused:g} request(s) of the operator: "
            "it wrote something restarter.model.keys.WRITTEN does not declare"
        )
