"""A real node beside kwok's simulated ones: kubelet, containerd and runc running real
containers from images imported into containerd, or pulled from the local registry
(``registry``: its own forwarder into the node's namespace and a hosts.toml).

The node lives in a network namespace of its own, made by the cluster and deleted with it:
kubelet, containerd and every pod (each in its own namespace on a CNI bridge inside it)
see only that namespace. It has no route out. Its only way to the apiserver on the host's
loopback is ``netns_proxy``, listening inside on 127.0.0.1 (the kubelet's kubeconfig) and
on the ``kubernetes`` Service IP (pods' in-cluster config). The apiserver never calls the
kubelet, so no ``kubectl logs``: read container output with ``RealNode.log``.

Only pods that select and tolerate ``NODE_LABEL`` / ``TAINT`` land here; kwok keeps the
thousands of simulated pods.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

from restarter_cluster import binaries, images, pki

NAME = "real-node"
#: Label on the node (set by its kubelet) and the key of its NoSchedule taint.
NODE_LABEL = ("restarter.io/real-node", "true")
TAINT = {"key": NODE_LABEL[0], "value": NODE_LABEL[1], "effect": "NoSchedule"}
#: Scheduling fields for a pod spec that asks for the real node.
POD_PLACEMENT = {
    "nodeSelector": {NODE_LABEL[0]: NODE_LABEL[1]},
    "tolerations": [{**TAINT, "operator": "Equal"}],
}
#: Pods' addresses on the bridge; its first address is the bridge's and the node's IP.
POD_SUBNET = "10.89.0.0/24"
NODE_IP = "10.89.0.1"
BRIDGE = "cni0"
#: The bridge's own MAC (locally administered; then NODE_IP in hex), set once. Without it
#: the bridge takes the lowest MAC among its ports and changes it as pods come and go: a
#: pod that learnt the gateway's MAC keeps sending to the old one, whose frames are dropped
#: (its port is gone, or it is another port's and not this host's) until the pod's ARP
#: entry expires, 90 s measured in which every connection of the pod stood silent. The CNI
#: bridge plugin sets it when it adds the gateway address, which this node adds itself.
BRIDGE_MAC = "02:00:0a:59:00:01"
#: The kubernetes Service's port, as the apiserver publishes it.
SERVICE_PORT = 443
COMPONENTS = ("node-proxy", "containerd", "kubelet")


class NodeError(RuntimeError):
    """The real node could not start; the message names the log to read."""


def node_id(directory: Path) -> str:
    """A short id for the names the kernel keeps (network namespace, cgroups)."""
    return hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:8]


class ControlPlane(Protocol):
    """What a real node needs of the control plane it joins (``cluster.Cluster`` is one):
    the node sits below the control plane and never imports it."""

    @property
    def directory(self) -> Path: ...

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def ports(self) -> dict[str, int]: ...

    def start_component(self, name: str, args: list[str]) -> None: ...

    def poll(self, check: Callable[[], bool], what: str, deadline: float) -> None: ...

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]: ...


@dataclass
class RealNode:
    """The real node of ``cluster``; its files live in ``<cluster dir>/node``."""

    cluster: ControlPlane

    @property
    def directory(self) -> Path:
        return self.cluster.directory / "node"

    @property
    def netns(self) -> str:
        return f"restarter-{node_id(self.cluster.directory)}"

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"

    @property
    def cgroup_root(self) -> str:
        return f"/restarter-{node_id(self.cluster.directory)}"

    @property
    def containerd_socket(self) -> Path:
        return self.directory / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        return self.directory / "pod-logs"

    @property
    def registry_config_dir(self) -> Path:
        """containerd's per-registry hosts.toml files (``<dir>/<host:port>/hosts.toml``),
        read at each pull: ``registry.Registry`` writes the local registry's there."""
        return self.directory / "registry-hosts"

    # -- lifecycle ---------------------------------------------------------------------

    def up(self, deadline: float) -> None:
        """Start the node's three processes, import the images, wait until it is Ready."""
        missing = [
            tool for tool in ("containerd", "ctr", "runc", "nsenter", "ip") if not _which(tool)
        ]
        if missing:
            raise NodeError(f"missing {', '.join(missing)}; hack/setup.sh installs them")
        archives = images.archives()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.pod_logs.mkdir(exist_ok=True)
        self._make_network()
        self._make_cgroup_root()
        apiserver = self.cluster.ports["apiserver"]
        self.cluster.start_component(
            "node-proxy",
            [
                sys.executable,
                "-m",
                "restarter_cluster.netns_proxy",
                f"--netns={self.netns_path}",
                f"--to=127.0.0.1:{apiserver}",
                f"--listen=127.0.0.1:{apiserver}",
                f"--listen={pki.SERVICE_IP}:{SERVICE_PORT}",
            ],
        )
        self.cluster.start_component(
            "containerd", self._inside(["containerd", f"--config={self._containerd_config()}"])
        )
        self.cluster.poll(lambda: self._ctr("version").returncode == 0, "containerd", deadline)
        for archive in archives:
            self._ctr("images", "import", str(archive), check=True)
        self.cluster.start_component("kubelet", self._inside(self._kubelet_args()))
        self.cluster.poll(self._ready, "the real node", deadline)

    def clean_up(self) -> None:
        """After its processes stopped: end its containers, unmount, drop the namespace."""
        _kill_matching(self._is_ours)
        for mount in sorted(_mounts_under(self.directory), key=len, reverse=True):
            subprocess.run(["umount", "--lazy", mount], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "delete", self.netns], check=False, capture_output=True)
        for controller in Path("/sys/fs/cgroup").iterdir():
            root = controller / self.cgroup_root.lstrip("/")
            if root.is_dir():
                for group in sorted(
                    (p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
                ):
                    with contextlib.suppress(OSError):
                        group.rmdir()
                with contextlib.suppress(OSError):
                    root.rmdir()

    # -- reading the node ------------------------------------------------------------

    def log(self, namespace: str, pod: str, container: str) -> str:
        """Everything a container of the pod printed, across its restarts, oldest first."""
        lines: list[str] = []
        for directory in sorted(self.pod_logs.glob(f"{namespace}_{pod}_*")):
            files = sorted((directory / container).glob("*.log"), key=lambda p: int(p.stem))
            for file in files:
                for line in file.read_text(errors="replace").splitlines():
                    # CRI format: <time> <stream> <P|F> <text>
                    parts = line.split(" ", 3)
                    lines.append(parts[3] if len(parts) == 4 else "")
        return "\n".join(lines)

    def container_pid(self, container_id: str) -> int:
        """The host PID of a running container's first process (``containerd://<id>``)."""
        bare = container_id.removeprefix("containerd://")
        out = self._ctr("tasks", "list", check=True).stdout
        for line in out.splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] == bare:
                return int(fields[1])
        raise NodeError(f"no running task {bare}; ctr tasks list said:\n{out}")

    # -- parts -----------------------------------------------------------------------

    def _inside(self, args: list[str]) -> list[str]:
        """Run ``args`` in the node's network namespace only (mounts and cgroups shared)."""
        return ["nsenter", f"--net={self.netns_path}", "--", *args]

    def _ctr(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", f"--address={self.containerd_socket}", "--namespace=k8s.io", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def _make_network(self) -> None:
        prefix = POD_SUBNET.split("/")[1]
        # A namespace of this name is a node of this same directory that was never cleaned
        # up (its processes killed with the machine): it is ours to replace.
        subprocess.run(["ip", "netns", "delete", self.netns], check=False, capture_output=True)
        for command in (
            ["ip", "netns", "add", self.netns],
            ["ip", "-n", self.netns, "link", "set", "lo", "up"],
            ["ip", "-n", self.netns, "addr", "add", f"{pki.SERVICE_IP}/32", "dev", "lo"],
            ["ip", "-n", self.netns, "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "-n", self.netns, "link", "set", BRIDGE, "address", BRIDGE_MAC],
            ["ip", "-n", self.netns, "addr", "add", f"{NODE_IP}/{prefix}", "dev", BRIDGE],
            ["ip", "-n", self.netns, "link", "set", BRIDGE, "up"],
        ):
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise NodeError(f"{' '.join(command)}: {result.stderr.strip()}")
        cni = self.directory / "cni"
        cni.mkdir(exist_ok=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "restarter-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.directory / "cni-ipam"),
                    },
                },
            ],
        }
        (cni / "10-restarter.conflist").write_text(json.dumps(conflist, indent=2))

    def _make_cgroup_root(self) -> None:
        """kubelet wants its cgroupRoot to exist in every v1 hierarchy (it makes the rest)."""
        for controller in Path("/sys/fs/cgroup").iterdir():
            if not (controller / "cgroup.procs").exists():
                continue  # the empty cgroup2 mount, or not a hierarchy
            root = controller / self.cgroup_root.lstrip("/")
            root.mkdir(exist_ok=True)
            # A new cpuset has no CPUs nor memory nodes until given its parent's.
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (controller / name).exists():
                    (root / name).write_text((controller / name).read_text())

    def _containerd_config(self) -> Path:
        d = self.directory
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{d / "containerd-root"}"
state = "{d / "containerd-state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{images.PAUSE}"
  # This sandbox may not set a negative oom_score_adj: without this every sandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d / "cni"}"
  [{cri}.registry]
    config_path = "{self.registry_config_dir}"
"""
        path = d / "containerd.toml"
        path.write_text(config)
        return path

    def _kubelet_args(self) -> list[str]:
        d = self.directory
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # cgroup v1 here (KEP-5573): kubelet 1.35 starts on it only when told to.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            # Its default ports, on the loopback of the node's own network namespace.
            "address": "127.0.0.1",
            "healthzBindAddress": "127.0.0.1",
            "readOnlyPort": 0,
            "failSwapOn": False,
            "enforceNodeAllocatable": [],
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "registerWithTaints": [TAINT],
            "podLogsDir": str(self.pod_logs),
            "resolvConf": "",
            "maxPods": 40,
            # Imported images cannot be pulled again: never collect them, never evict for disk.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # Nor verify a pod's right to them (KubeletEnsureSecretPulledImages, on by default
            # since 1.35). The default policy skips only images the kubelet never pulled; once
            # the registry tests pull the same image by digest with a pull secret, it counts
            # as pulled, and a later pod naming the imported localhost/ tag would have to pull
            # it again from a registry that does not exist. Images pulled from the local
            # registry keep the check.
            "imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
            "preloadedImagesVerificationAllowlist": [f"{images.IMPORTED_HOST}/*"],
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
        }
        path = d / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        key, value = NODE_LABEL
        return [
            str(binaries.locate()["kubelet"]),
            f"--config={path}",
            f"--kubeconfig={self.cluster.kubeconfig}",
            f"--root-dir={d / 'kubelet'}",
            f"--cert-dir={d / 'kubelet-pki'}",
            f"--hostname-override={NAME}",
            f"--node-ip={NODE_IP}",
            f"--node-labels={key}={value}",
            "--v=1",
        ]

    def _ready(self) -> bool:
        out = self.cluster.kubectl("get", "node", NAME, "-o", "json", check=False)
        if out.returncode != 0:
            return False
        conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _is_ours(self, pid: int) -> bool:
        """A container process in the node's cgroups, or a shim serving its containerd."""
        try:
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
            if any(
                line.split(":", 2)[2].startswith(self.cgroup_root + "/")
                for line in cgroups.splitlines()
            ):
                return True
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            return False
        return (
            b"containerd-shim-runc-v2" in cmdline[0]
            and str(self.containerd_socket).encode() in cmdline
        )


def _which(tool: str) -> bool:
    return shutil.which(tool) is not None or Path(f"/usr/sbin/{tool}").exists()


def _mounts_under(directory: Path) -> list[str]:
    prefix = str(directory.resolve()) + "/"
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix):
            mounts.append(point)
    return mounts


def _kill_matching(predicate: Callable[[int], bool]) -> None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            pid = int(entry.name)
            if predicate(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
