"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, controller-manager,
scheduler and kwok with simulated nodes, and on request a real node (see ``node``). All
state lives in one directory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from restarter_cluster import binaries, pki
from restarter_cluster.node import RealNode
from restarter_cluster.ports import free_port

STATE_FILE = "state.json"
SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: kwok manages exactly the nodes carrying this annotation.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: The duration of the node Leases kwok renews (a kubelet's default), a quarter of it apart.
NODE_LEASE_SECONDS = 40


#: What a component logs when its port was taken between choosing and binding it.
PORT_TAKEN = "address already in use"


class ClusterError(RuntimeError):
    """A component failed to start or become ready; the message names its log file."""


@dataclass
class Cluster:
    """Handle on a local control plane whose files live in ``directory``."""

    directory: Path
    nodes: int = 2
    #: Also run a real node: kubelet, containerd and runc (see ``node``).
    real_node: bool = False
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def pki_dir(self) -> Path:
        return self.directory / "pki"

    def log(self, component: str) -> Path:
        return self.directory / "logs" / f"{component}.log"

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def attach(cls, directory: Path) -> Cluster:
        """Load the handle of a cluster started earlier (by another process)."""
        state = json.loads((directory / STATE_FILE).read_text())
        return cls(
            directory=directory,
            nodes=state["nodes"],
            real_node=state.get("real_node", False),
            ports=state["ports"],
            pids=state["pids"],
        )

    def up(self, timeout: float = 120.0, attempts: int = 3) -> Cluster:
        """Start every component, wait until nodes are Ready; on failure stop what started.
        A component that lost its port to another process before binding it is started
        again on new ports, up to ``attempts`` times in all."""
        for attempt in range(1, attempts + 1):
            try:
                return self._up_once(timeout)
            except ClusterError as error:
                if PORT_TAKEN not in str(error) or attempt == attempts:
                    raise
                shutil.rmtree(self.directory / "etcd", ignore_errors=True)
        raise AssertionError("unreachable")

    def _up_once(self, timeout: float) -> Cluster:
        bins = binaries.locate()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        certs = pki.generate(self.pki_dir)
        self.ports = {
            name: free_port()
            for name in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")
        }
        self._write_kubeconfig(certs)
        deadline = time.monotonic() + timeout
        try:
            self.start_component("etcd", self._etcd_args(bins))
            self._wait_etcd(deadline)
            self.start_component("kube-apiserver", self._apiserver_args(bins, certs))
            self._wait_apiserver(deadline)
            self.start_component("kube-controller-manager", self._kcm_args(bins, certs))
            self.start_component("kube-scheduler", self._scheduler_args(bins))
            self.start_component("kwok", self._kwok_args(bins))
            self._create_nodes(bins)
            self._wait_ready(bins, deadline)
            if self.real_node:
                RealNode(self).up(deadline)
        except BaseException:
            self.down()
            raise
        return self

    def add_real_node(self, timeout: float = 120.0) -> RealNode:
        """Start the real node beside a running control plane (once); its handle."""
        node = RealNode(self)
        if not self.real_node:
            # Recorded first, so that ``down`` cleans up after a node that failed to start.
            self.real_node = True
            self._save()
            node.up(time.monotonic() + timeout)
        return node

    def down(self) -> None:
        """Stop every process this cluster started; wait until each is gone. A real node's
        containers, mounts, network namespace and cgroups go too."""
        for name in reversed(list(self.pids)):
            _terminate(self.pids[name])
        self.pids.clear()
        if self.real_node:
            RealNode(self).clean_up()
        if (self.directory / STATE_FILE).exists():
            self._save()

    def stop_apiserver(self, graceful: bool = True) -> None:
        """Stop kube-apiserver only (SIGTERM, or SIGKILL when not graceful); etcd and the
        other components keep running and reconnect once it is started again."""
        pid = self.pids.pop("kube-apiserver")
        if not graceful:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _terminate(pid)
        self._save()

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start kube-apiserver again on the same port, certificates and etcd; wait for /readyz."""
        certs = pki.paths(self.pki_dir)
        self.start_component("kube-apiserver", self._apiserver_args(binaries.locate(), certs))
        self._wait_apiserver(time.monotonic() + timeout)

    def _save(self) -> None:
        state = {
            "nodes": self.nodes,
            "real_node": self.real_node,
            "ports": self.ports,
            "pids": self.pids,
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state, indent=2))

    def start_component(self, name: str, args: list[str]) -> None:
        log = self.log(name).open("ab")
        process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.directory,
        )
        log.close()
        self.pids[name] = process.pid
        self._save()

    def check_alive(self) -> None:
        for name, pid in self.pids.items():
            if not process_alive(pid):
                tail = self.log(name).read_text(errors="replace")[-3000:]
                raise ClusterError(f"{name} exited; see {self.log(name)}:\n{tail}")

    # -- component arguments -------------------------------------------------------------

    def _etcd_args(self, bins: dict[str, Path]) -> list[str]:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            str(bins["etcd"]),
            "--name=local",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync=true",
            "--listen-metrics-urls=",
            "--log-level=warn",
        ]

    def _apiserver_args(self, bins: dict[str, Path], certs: pki.Pki) -> list[str]:
        return [
            str(bins["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={self.directory / 'apiserver-certs'}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--client-ca-file={certs.ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SA_ISSUER}",
            f"--service-account-key-file={certs.sa_pub}",
            f"--service-account-signing-key-file={certs.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ]

    def _kcm_args(self, bins: dict[str, Path], certs: pki.Pki) -> list[str]:
        return [
            str(bins["kube-controller-manager"]),
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kcm']}",
            f"--service-account-private-key-file={certs.sa_key}",
            f"--root-ca-file={certs.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-route,-service",
            "--profiling=false",
            # A node marked NotReady has its pods' Ready taken away, and kwok never gives it
            # back. kwok renews the nodes' Leases (see _kwok_args); this margin covers
            # renewals late by minutes while this machine is saturated.
            "--node-monitor-grace-period=10m",
            # The default client rate (20/s, burst 30) makes a 1 000-Deployment fan-out wait
            # minutes on the deployment controller's own ReplicaSet writes; large clusters
            # raise it the same way. The operator's requests are not affected.
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--v=1",
        ]

    def _scheduler_args(self, bins: dict[str, Path]) -> list[str]:
        return [
            str(bins["kube-scheduler"]),
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['scheduler']}",
            "--profiling=false",
            "--v=1",
        ]

    def _kwok_args(self, bins: dict[str, Path]) -> list[str]:
        key, value = KWOK_NODE_ANNOTATION
        # An empty config file makes kwok use its built-in node and pod stages and never
        # reads a user's ~/.kwok/kwok.yaml.
        config = self.directory / "kwok.yaml"
        config.write_text("")
        return [
            str(bins["kwok"]),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.1.0.1",
            f"--server-address=127.0.0.1:{self.ports['kwok']}",
            # Without a lease duration kwok renews no node Lease and posts node status only
            # every 10 to 20 min, so the nodes went NotReady 10 min after start (the grace
            # period above) and every pod then on them lost Ready for good. With it, kwok
            # renews each node's Lease every 10 s and posts status every 20 to 45 s.
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ]

    def _write_kubeconfig(self, certs: pki.Pki) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority": str(certs.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(certs.admin_cert),
                        "client-key": str(certs.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    # -- readiness ------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        context.load_cert_chain(str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        return context

    def _wait_etcd(self, deadline: float) -> None:
        url = f"http://127.0.0.1:{self.ports['etcd']}/health"
        self.poll(lambda: _http_ok(url, None), "etcd", deadline)

    def _wait_apiserver(self, deadline: float) -> None:
        context = self._ssl_context()
        self.poll(lambda: _http_ok(f"{self.server}/readyz", context), "kube-apiserver", deadline)

    def poll(self, check: Callable[[], bool], what: str, deadline: float) -> None:
        """Wait until ``check`` holds, failing early when a component exited."""
        while time.monotonic() < deadline:
            self.check_alive()
            if check():
                return
            time.sleep(0.2)
        raise ClusterError(f"{what} not ready in time; see {self.directory / 'logs'}")

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster as admin."""
        bins = binaries.locate()
        return subprocess.run(
            [str(bins["kubectl"]), f"--kubeconfig={self.kubeconfig}", *args],
            check=check,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
        )

    def _create_nodes(self, bins: dict[str, Path]) -> None:
        key, value = KWOK_NODE_ANNOTATION
        documents = []
        for index in range(self.nodes):
            documents.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": f"kwok-node-{index}",
                        "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
                        "labels": {
                            "type": "kwok",
                            "kubernetes.io/hostname": f"kwok-node-{index}",
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                        },
                    },
                    "status": {
                        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "5000"},
                        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "5000"},
                    },
                }
            )
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))

    def _wait_ready(self, bins: dict[str, Path], deadline: float) -> None:
        def nodes_ready() -> bool:
            out = self.kubectl("get", "nodes", "-o", "json", check=False)
            if out.returncode != 0:
                return False
            items = json.loads(out.stdout)["items"]
            ready = [
                n
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) >= self.nodes

        def default_service_account() -> bool:
            return self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0

        self.poll(nodes_ready, "kwok nodes", deadline)
        self.poll(default_service_account, "kube-controller-manager", deadline)

    def env(self) -> dict[str, str]:
        """Environment variables that point clients at this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig)}


def _http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def process_alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        stop = time.monotonic() + grace
        while time.monotonic() < stop:
            if not process_alive(pid):
                return
            time.sleep(0.1)
