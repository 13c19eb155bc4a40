"""Alertmanager on loopback, for the alert gate's tests: built from its pinned Go module by
hack/build-cluster-binaries.sh, one process per test module, alerts posted to its v2 API.

Its clustering is off (no gossip port) and it listens on 127.0.0.1 only; its one route
sends nowhere.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from restarter_cluster import binaries, controllers, ports

CONFIG = "route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n"


class AlertmanagerError(RuntimeError):
    """Alertmanager did not start; the message names its log."""


def version() -> str:
    return binaries.pinned_versions()["ALERTMANAGER_VERSION"]


def binary() -> Path:
    """The built Alertmanager, or MissingBinaries naming the script that builds it."""
    return controllers.cached_binary(f"alertmanager-{version()}", "alertmanager")


class Alertmanager:
    """One Alertmanager process with its state in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "alertmanager.log"

    def start(self, timeout: float = 30.0) -> Alertmanager:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "alertmanager.yml"
        config.write_text(CONFIG)
        self.port = ports.free_port()
        command = [
            str(binary()),
            f"--config.file={config}",
            f"--storage.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AlertmanagerError(f"Alertmanager did not start; see {self.log_path}")
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def post(self, alerts: list[dict[str, Any]]) -> None:
        """Alerts posted to ``POST /api/v2/alerts`` (as Prometheus sends them)."""
        request = urllib.request.Request(
            f"{self.url}/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def fire(self, name: str, **labels: str) -> None:
        self.post([{"labels": {"alertname": name, **labels}}])

    def resolve(self, name: str, **labels: str) -> None:
        """The alert ended a second ago: Alertmanager lists it as active no more."""
        ended = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        self.post([{"labels": {"alertname": name, **labels}, "endsAt": ended.isoformat()}])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
