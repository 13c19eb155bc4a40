"""Shared fixtures: the real local control plane (session), namespaces, the operator process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import kubernetes
import pytest

from restarter_cluster.binaries import MissingBinaries
from restarter_cluster.cert_manager import CertManager
from restarter_cluster.cluster import Cluster
from tests.chart_identity import ChartIdentities
from tests.durations import longest_first

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath).replace(os.sep, "/")
        if any(f"tests/{tier}/" in path for tier in ("integration", "faults", "node")):
            item.add_marker(pytest.mark.cluster)
        if "tests/node/" in path:
            item.add_marker(pytest.mark.node)
        if "tests/faults/" in path:
            item.add_marker(pytest.mark.faults)
    longest_first(items)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The figures tests recorded as ``("figure", text)`` properties (tests/node)."""
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for name, value in getattr(report, "user_properties", [])
        if name == "figure"
    ]
    if lines:
        terminalreporter.section("measured on the real node")
        for line in dict.fromkeys(lines):
            terminalreporter.write_line(line)


def refused(log: str) -> bool:
    """Whether an operator's log shows a request the apiserver refused (403 Forbidden); a
    timestamp's milliseconds (``,403``) are not one."""
    return "Forbidden" in log or re.search(r"(?<![,.\d])403(?!\d)", log) is not None


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 60.0,
    interval: float = 0.3,
    message: str = "condition",
    describe: Callable[[], Any] | None = None,
) -> Any:
    """Poll until predicate returns something truthy; fail the test on timeout, with what
    ``describe`` says of the state then."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            found = f"; found {describe()}" if describe else ""
            pytest.fail(f"timed out after {timeout}s waiting for {message}{found}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A fresh control plane for the session, or the one at $RESTARTER_TEST_CLUSTER_DIR."""
    existing = os.environ.get("RESTARTER_TEST_CLUSTER_DIR")
    if existing:
        yield Cluster.attach(Path(existing))
        return
    started = time.monotonic()
    running = Cluster(directory=tmp_path_factory.mktemp("cluster"), nodes=2).up()
    print(f"\nlocal control plane up in {time.monotonic() - started:.1f}s", file=sys.stderr)
    try:
        yield running
    finally:
        running.down()


@pytest.fixture(scope="module")
def cert_manager(cluster: Cluster) -> Iterator[CertManager]:
    """cert-manager's controller on the test cluster (one already running there is reused)."""
    running = CertManager.attach(cluster)
    if running:
        yield running
        return
    try:
        started = CertManager(cluster).start()
    except MissingBinaries as error:
        pytest.fail(f"cert-manager's controller is not built: {error}")
    yield started
    started.stop()


@pytest.fixture(scope="session")
def api_client(cluster: Cluster) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=configuration
    )
    return kubernetes.client.ApiClient(configuration)


@pytest.fixture(scope="session")
def core(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def apps(api_client: kubernetes.client.ApiClient) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(api_client)


@pytest.fixture(scope="session")
def custom(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, core: kubernetes.client.CoreV1Api) -> Iterator[str]:
    """A namespace of the test's own, deleted afterwards (without waiting)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"{slug}-{uuid.uuid4().hex[:5]}".strip("-")
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: _has_default_sa(core, name), 30, message="default ServiceAccount")
    yield name
    core.delete_namespace(name)


def _has_default_sa(core: kubernetes.client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except kubernetes.client.exceptions.ApiException:
        return False


@pytest.fixture(scope="session")
def chart_identities(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> ChartIdentities:
    """The chart's ServiceAccounts, RBAC and admission policies, applied on first use."""
    return ChartIdentities(cluster, tmp_path_factory.mktemp("identities"))


#: The operator's settings for the tests of other features: no waves and no quiet time, so
#: that a test of pacing or windows sees every dependent restart as its window allows. The
#: tests of waves, the circuit breaker and the quiet period turn them on with flags (a
#: flag wins over its variable), and the chart's tests run the chart's defaults.
SUITE_DEFAULTS = {"RESTARTER_FIRST_WAVE": "0", "RESTARTER_QUIET": "0"}


class Operator:
    """The operator's real entry point, run as a subprocess against the local cluster."""

    #: The kubeconfig of an operator started without one, chosen by its arguments: the
    #: chart's ServiceAccount in the integration tier (tests/integration/conftest.py);
    #: None: the cluster's admin.
    default_identity: ClassVar[Callable[[list[str]], Path] | None] = None

    def __init__(
        self,
        cluster: Cluster,
        log_path: Path,
        args: list[str],
        env: dict[str, str] | None = None,
        kubeconfig: Path | None = None,
    ) -> None:
        self.cluster, self.log_path, self.args = cluster, log_path, args
        self.env = env or {}
        if kubeconfig is None and Operator.default_identity is not None:
            kubeconfig = Operator.default_identity(args)
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready: str = "Initial authentication has finished") -> Operator:
        """Start; return once the log shows ``ready`` (kopf's start, or a standby's line)."""
        environment = {**os.environ, **SUITE_DEFAULTS, "KUBECONFIG": str(self.kubeconfig)}
        environment |= self.env
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "restarter", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=REPO,
            )
        # 60 s: five workers' control planes on two cores can hold a start (imports, kopf's
        # login) past 30 s; a start that fails ends the wait at once (_died).
        wait_for(
            lambda: ready in self.log() or self._died(),
            60,
            message="operator start",
        )
        assert not self._died(), self.log()
        time.sleep(1.0)  # the initial listing of Deployments and Secrets
        return self

    def _died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Callable[..., Operator]]:
    """Factory: ``operator()`` starts restarter watching the test's namespace."""
    started: list[Operator] = []

    def start(*extra: str, env: dict[str, str] | None = None) -> Operator:
        args = ["--namespace", namespace, "--timer-interval", "1", *extra]
        instance = Operator(cluster, tmp_path / "operator.log", args, env).start()
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()
    for instance in started[:1]:
        print(instance.log()[-4000:], file=sys.stderr)
