"""``kubectl restarter``: the plugin hack/build-plugin.sh builds, unpacked from its krew
archive onto PATH and run by the real kubectl with a Python that has no restarter, against
the real control plane."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import pytz
import yaml

from restarter.model import keys, pending
from restarter_cluster.binaries import cache_dir, locate
from restarter_cluster.cluster import Cluster
from tests.conftest import REPO, Operator, wait_for
from tests.integration.factories import deployment, encoded, env_from_secret, secret

Core = kubernetes.client.CoreV1Api
Apps = kubernetes.client.AppsV1Api
KEEP = "example.com/keep"


def user_python() -> Path:
    """A ``python3.X`` (the plugin's version) outside the dev venv: Debian's where it is."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = Path("/usr/bin") / name
    return system if system.exists() else Path(sys.base_prefix) / "bin" / name


@dataclass(frozen=True)
class Plugin:
    """The built files, and a user's shell: PATH with the plugin, kubectl and Python only."""

    out: Path
    bin_dir: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        kubectl_dir = locate()["kubectl"].parent
        python_dir = user_python().parent
        path = f"{self.bin_dir}:{kubectl_dir}:{python_dir}:/usr/bin:/bin"
        return {"PATH": path, "HOME": str(self.home), "LANG": "C.UTF-8", **extra}

    def kubectl(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", *args],
            capture_output=True,
            text=True,
            env=self.env(**env),
            cwd=self.home,
            timeout=300,
            check=False,
        )


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Plugin:
    out = tmp_path_factory.mktemp("plugin")
    built = subprocess.run(
        [str(REPO / "hack" / "build-plugin.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    # What krew does: check the archive against the manifest's sha256, then unpack it.
    manifest = yaml.safe_load((out / "restarter.yaml").read_text())
    (platform,) = manifest["spec"]["platforms"]
    archive = out / platform["uri"].rsplit("/", 1)[1]
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == platform["sha256"]
    bin_dir = out / "bin"
    with tarfile.open(archive) as tar:
        tar.extractall(bin_dir, filter="data")
    assert os.access(bin_dir / platform["bin"], os.X_OK)
    home = tmp_path_factory.mktemp("home")
    return Plugin(out, bin_dir, home)


def kubeconfig_with_two_contexts(cluster: Cluster, path: Path) -> Path:
    """The cluster's kubeconfig, whose current context is another cluster where nothing
    listens; the real one is context ``local``."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"].append({"name": "elsewhere", "cluster": {"server": "https://127.0.0.1:9"}})
    config["contexts"].append(
        {"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "admin"}}
    )
    config["current-context"] = "elsewhere"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def pending_marks(read: Callable[[], Any]) -> dict[str, str] | None:
    annotations: dict[str, str] = read().metadata.annotations or {}
    return annotations if pending.read(annotations).marks else None


def test_the_krew_manifest_follows_krews_rules(plugin: Plugin) -> None:
    """What krew checks before it installs (its manifest validation), on the built manifest."""
    manifest = yaml.safe_load((plugin.out / "restarter.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == "restarter"  # the file's name, the command's
    spec = manifest["spec"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", spec["version"])
    assert spec["shortDescription"] and "\n" not in spec["shortDescription"]
    assert spec["description"].strip()
    (platform,) = spec["platforms"]
    assert set(platform["selector"]["matchLabels"]) == {"os", "arch"}
    assert re.fullmatch(r"[a-f0-9]{64}", platform["sha256"])
    assert platform["uri"].startswith("https://") and platform["uri"].endswith(".tar.gz")
    assert "@" not in yaml.safe_dump(manifest)  # no placeholder of the template left
    assert (plugin.bin_dir / platform["bin"]).is_file()


def krew_install(plugin: Plugin, manifest: Path, root: Path) -> subprocess.CompletedProcess[str]:
    """``kubectl krew install --manifest --archive`` (krew built from its pinned module by
    hack/build-cluster-binaries.sh), into ``root``, asking the network nothing."""
    archive = next(plugin.out.glob("kubectl-restarter-v*.tar.gz"))
    return subprocess.run(
        ["kubectl", "krew", "install", f"--manifest={manifest}", f"--archive={archive}"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=plugin.env(KREW_ROOT=str(root), KREW_NO_UPGRADE_CHECK="1"),
        timeout=300,
        check=False,
    )


def test_krew_installs_the_archive_its_manifest_names(plugin: Plugin, tmp_path: Path) -> None:
    assert (cache_dir() / "kubectl-krew").exists(), "hack/build-cluster-binaries.sh builds krew"
    manifest = plugin.out / "restarter.yaml"
    installed = krew_install(plugin, manifest, tmp_path / "krew")
    assert installed.returncode == 0, installed.stderr
    assert "Installed plugin: restarter" in installed.stderr
    link = tmp_path / "krew" / "bin" / "kubectl-restarter"
    assert link.is_symlink()
    version = subprocess.run(
        ["kubectl", "restarter", "version"],
        capture_output=True,
        text=True,
        env={**plugin.env(), "PATH": f"{link.parent}:{plugin.env()['PATH']}"},
        timeout=300,
        check=False,
    )
    assert version.stdout == "kubectl-restarter 0.1.0\n", version.stderr
    # An archive that is not the one the manifest names is refused.
    text = manifest.read_text()
    digest = yaml.safe_load(text)["spec"]["platforms"][0]["sha256"]
    other = tmp_path / "restarter.yaml"
    other.write_text(text.replace(digest, "a" * 64))
    refused = krew_install(plugin, other, tmp_path / "krew-refused")
    assert refused.returncode != 0
    assert f"checksum does not match, want: {'a' * 64}, got {digest}" in refused.stderr


def test_the_plugin_runs_without_restarter_installed(plugin: Plugin) -> None:
    python = user_python()
    imported = subprocess.run(
        [str(python), "-c", "import restarter"], capture_output=True, env=plugin.env()
    )
    assert imported.returncode != 0, f"{python} has restarter installed: not a user's machine"

    listed = plugin.kubectl("plugin", "list")
    assert listed.returncode == 0, listed.stderr
    assert str(plugin.bin_dir / "kubectl-restarter") in listed.stdout.splitlines()

    usage = plugin.kubectl("restarter")
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.startswith("usage: kubectl restarter COMMAND [flags]")
    assert "  plan " in usage.stdout and "  release-finalizers " in usage.stdout
    version = plugin.kubectl("restarter", "version")
    assert version.stdout == "kubectl-restarter 0.1.0\n", version.stderr
    # The plugin never starts the operator, whatever the words.
    unknown = plugin.kubectl("restarter", "--namespace", "default")
    assert unknown.returncode == 2
    assert "unknown command '--namespace'" in unknown.stderr
    # kubectl reads no flag of a plugin's: they come after its name.
    before = plugin.kubectl("-n", "default", "restarter", "plan")
    assert before.returncode == 1
    assert "flags cannot be placed before plugin name: -n" in before.stderr


def test_kubectl_restarter_plan_shows_a_pending_deployment(
    plugin: Plugin,
    cluster: Cluster,
    core: Core,
    apps: Apps,
    namespace: str,
    operator: Callable[..., Operator],
    tmp_path: Path,
) -> None:
    # A window about 6 h away: the Deployment stays pending for the whole test.
    warsaw = pytz.timezone("Europe/Warsaw")
    far = (dt.datetime.now(dt.UTC).astimezone(warsaw) + dt.timedelta(hours=6)).strftime("%H.%M")
    core.create_namespaced_secret(namespace, secret("db", {"password": "one"}, far))
    apps.create_namespaced_deployment(namespace, deployment("web", env=[env_from_secret("db")]))
    operator("--timezone", "Europe/Warsaw")
    wait_for(
        lambda: (
            keys.CHECKSUM
            in (core.read_namespaced_secret("db", namespace).metadata.annotations or {})
        ),
        30,
        message="checksum on the Secret",
    )
    core.patch_namespaced_secret("db", namespace, {"data": encoded({"password": "two"})})
    wait_for(
        lambda: pending_marks(lambda: apps.read_namespaced_deployment("web", namespace)),
        30,
        message="a pending mark on the Deployment",
    )

    kubeconfig = kubeconfig_with_two_contexts(cluster, tmp_path / "kubeconfig")
    table = plugin.kubectl(
        "restarter", "plan", "--kubeconfig", str(kubeconfig), "--context", "local", "-n", namespace
    )
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.startswith("WORKLOAD ")
    assert len(rows) == 1 and "Deployment/web" in rows[0] and "Secret/db" in rows[0], table.stdout

    as_json = plugin.kubectl(
        "restarter",
        "plan",
        "--context",
        "local",
        "-n",
        namespace,
        "-o",
        "json",
        KUBECONFIG=str(kubeconfig),
    )
    assert as_json.returncode == 0, as_json.stderr
    (row,) = json.loads(as_json.stdout)
    assert (row["namespace"], row["kind"], row["name"]) == (namespace, "Deployment", "web")
    assert (row["source"], row["state"]) == ("Secret/db", "waiting")
    assert row["window"] == f"{far} Europe/Warsaw (1h long)"
    # The same rows as `restarter plan` from the dev environment.
    same = subprocess.run(
        [sys.executable, "-m", "restarter", "plan", "-n", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        cwd=REPO,
        timeout=120,
        check=True,
    )
    assert json.loads(same.stdout) == [row]

    everywhere = plugin.kubectl(
        "restarter", "plan", "-A", "--context", "local", KUBECONFIG=str(kubeconfig)
    )
    assert everywhere.returncode == 0, everywhere.stderr
    assert everywhere.stdout.startswith("NAMESPACE ")
    assert any(
        line.startswith(f"{namespace} ") and "Deployment/web" in line
        for line in everywhere.stdout.splitlines()
    ), everywhere.stdout

    # Without --context: the kubeconfig's current context, where nothing answers.
    elsewhere = plugin.kubectl("restarter", "plan", "-n", namespace, KUBECONFIG=str(kubeconfig))
    assert elsewhere.returncode == 1
    assert elsewhere.stderr.startswith("restarter plan: cannot reach the API server")
    unknown = plugin.kubectl(
        "restarter", "plan", "--context", "nowhere", "-n", namespace, KUBECONFIG=str(kubeconfig)
    )
    assert unknown.returncode == 1
    assert "nowhere" in unknown.stderr


def test_kubectl_restarter_release_finalizers_frees_workloads(
    plugin: Plugin, cluster: Cluster, apps: Apps, namespace: str
) -> None:
    apps.create_namespaced_deployment(namespace, deployment("restarter", replicas=1))
    held = deployment("web")
    held["metadata"]["finalizers"] = [keys.FINALIZER, KEEP]
    apps.create_namespaced_deployment(namespace, held)
    try:
        released = plugin.kubectl(
            "restarter",
            "release-finalizers",
            "--operator-namespace",
            namespace,
            "--operator-deployment",
            "restarter",
            "-n",
            namespace,
            KUBECONFIG=str(cluster.kubeconfig),
        )
        assert released.returncode == 0, released.stdout + released.stderr
        assert f"released the finalizer of 1 workload(s) in {namespace}" in released.stdout
        assert apps.read_namespaced_deployment("restarter", namespace).spec.replicas == 0
        assert apps.read_namespaced_deployment("web", namespace).metadata.finalizers == [KEEP]
    finally:
        apps.patch_namespaced_deployment("web", namespace, {"metadata": {"finalizers": None}})
