"""An OCI registry for the local cluster: CNCF distribution's ``registry`` (pinned in
hack/versions.env, built by hack/build-cluster-binaries.sh), on the host's loopback.

It serves what a user's cluster pulls from a registry: restarter's image and its chart as
an OCI artifact, both pushed by hack/release.sh. It asks for a user and a password
(htpasswd), as a private registry does, over plain HTTP on loopback. The real node's
containerd reaches it through a forwarder inside the node's network namespace, on the same
address (``127.0.0.1:<port>``), and is told to pull from it over HTTP (a hosts.toml in the
node's registry configuration directory): so an image named ``127.0.0.1:<port>/restarter``
means the same registry to helm, skopeo and the kubelet.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from restarter_cluster import binaries, node
from restarter_cluster.ports import free_port

#: The one user the registry knows.
USER = "restarter"
#: What the registry logs when its port was taken between choosing and binding it.
PORT_TAKEN = "address already in use"
RELEASE_SCRIPT = binaries.REPO_ROOT / "hack" / "release.sh"


class RegistryError(RuntimeError):
    """The registry did not start, or a push failed; the message names the log to read."""


class ControlPlane(node.ControlPlane, Protocol):
    """What the registry needs of the cluster it serves (``cluster.Cluster`` is one)."""

    @property
    def real_node(self) -> bool: ...

    def log(self, component: str) -> Path: ...


def binary() -> Path:
    """The pinned registry, or MissingBinaries naming the script that builds it."""
    return binaries.component("registry", "DISTRIBUTION_VERSION")


@dataclass(frozen=True)
class Published:
    """What hack/release.sh pushed: the image by digest, and the chart's OCI reference."""

    image: str
    digest: str
    chart: str
    version: str

    @property
    def repository(self) -> str:
        return self.image.rsplit(":", 1)[0]


@dataclass
class Registry:
    """The registry of ``cluster``; its files live in ``<cluster dir>/registry``."""

    cluster: ControlPlane

    @property
    def directory(self) -> Path:
        return self.cluster.directory / "registry"

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: the registry's name in image references and oci:// URLs."""
        return f"127.0.0.1:{self.cluster.ports['registry']}"

    @property
    def auth_file(self) -> Path:
        """Credentials in the Docker config format that helm (``--registry-config``) and
        skopeo (``--authfile``) read."""
        return self.directory / "auth.json"

    # -- lifecycle ---------------------------------------------------------------------

    def up(self, timeout: float = 60.0, attempts: int = 3) -> Registry:
        """Start the registry (once per cluster) and, when the cluster has a real node, its
        forwarder and containerd's configuration for it; wait until it answers."""
        if "registry" in self.cluster.ports and self._answers():
            return self
        for attempt in range(1, attempts + 1):
            try:
                self._start(time.monotonic() + timeout)
                break
            except RegistryError as error:
                if PORT_TAKEN not in str(error) or attempt == attempts:
                    raise
        if self.cluster.real_node:
            self._reach_from(node.RealNode(self.cluster))
        return self

    def _start(self, deadline: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cluster.ports["registry"] = free_port()
        password = secrets.token_urlsafe(24)
        self._write_private(self.directory / "htpasswd", _htpasswd_line(USER, password))
        token = base64.b64encode(f"{USER}:{password}".encode()).decode()
        self._write_private(self.auth_file, json.dumps({"auths": {self.host: {"auth": token}}}))
        config = self.directory / "config.yml"
        config.write_text(yaml.safe_dump(self._config()))
        # No tracing exporter: the registry would otherwise send spans to OTLP's default.
        command = ["env", "OTEL_TRACES_EXPORTER=none", str(binary()), "serve", str(config)]
        self.cluster.start_component("registry", command)
        try:
            self.cluster.poll(self._answers, "the registry", deadline)
        except RuntimeError as error:
            log = self.cluster.log("registry")
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RegistryError(f"{error}; {log}:\n{tail}") from None

    def _config(self) -> dict[str, Any]:
        return {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text"},
            "storage": {
                "filesystem": {"rootdirectory": str(self.directory / "storage")},
                "delete": {"enabled": True},
            },
            "http": {
                "addr": self.host,
                "secret": secrets.token_urlsafe(24),
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
            "auth": {
                "htpasswd": {"realm": "restarter-local", "path": str(self.directory / "htpasswd")}
            },
        }

    def _reach_from(self, real_node: node.RealNode) -> None:
        """A forwarder inside the node's namespace on the registry's address, and a
        hosts.toml telling containerd to pull from it over HTTP."""
        self.cluster.start_component(
            "registry-proxy",
            [
                sys.executable,
                "-m",
                "restarter_cluster.netns_proxy",
                f"--netns={real_node.netns_path}",
                f"--to={self.host}",
                f"--listen={self.host}",
            ],
        )
        hosts = real_node.registry_config_dir / self.host
        hosts.mkdir(parents=True, exist_ok=True)
        (hosts / "hosts.toml").write_text(
            f'server = "http://{self.host}"\n\n'
            f'[host."http://{self.host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )

    def _answers(self) -> bool:
        """The registry answers its API root, and refuses it without credentials."""
        try:
            urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).close()
        except urllib.error.HTTPError as error:
            return error.code == 401
        except (urllib.error.URLError, OSError):
            return False
        raise RegistryError(f"{self.host} answered /v2/ without credentials")

    @staticmethod
    def _write_private(path: Path, text: str) -> None:
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(text)

    # -- using it ------------------------------------------------------------------------

    def publish(self) -> Published:
        """Push restarter's image and chart with hack/release.sh, as a release does."""
        env = {**os.environ, "RELEASE_PLAIN_HTTP": "1", "RELEASE_AUTHFILE": str(self.auth_file)}
        env["PATH"] = f"{binaries.locate()['helm'].parent}{os.pathsep}{env.get('PATH', '')}"
        out = subprocess.run(
            [str(RELEASE_SCRIPT), self.host],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=600,
        )
        if out.returncode != 0:
            raise RegistryError(f"{RELEASE_SCRIPT} {self.host} failed:\n{out.stdout}{out.stderr}")
        pushed = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
        return Published(pushed["image"], pushed["digest"], pushed["chart"], pushed["version"])

    def pull_secret(self, name: str) -> dict[str, Any]:
        """A ``kubernetes.io/dockerconfigjson`` Secret holding this registry's credentials,
        for a pod's imagePullSecrets."""
        config = self.auth_file.read_text()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
        }

    def log(self) -> str:
        path = self.cluster.log("registry")
        return path.read_text(errors="replace") if path.exists() else ""


def _htpasswd_line(user: str, password: str) -> str:
    """``user:<bcrypt hash>`` by the pinned helper built beside the registry."""
    helper = binary().parent / "registry-htpasswd"
    if not helper.is_file():
        raise binaries.MissingBinaries(
            f"missing {helper}; build it once with {binaries.BUILD_SCRIPT}"
        )
    out = subprocess.run(
        [str(helper), user], input=password + "\n", capture_output=True, text=True, check=True
    )
    return out.stdout
