"""hack/setup.sh's steps (hack/lib/steps.sh): numbered as they start, timed when they end, a
heartbeat naming the build's phase while they run, the tools' output in a log named at the
start and shown only when a step fails; and one real component built from an empty cache."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "hack" / "lib" / "steps.sh"


def run_script(
    tmp_path: Path, body: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "script.sh"
    script.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\nsource {STEPS}\n{body}")
    script.chmod(0o755)
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RESTARTER_CACHE": str(tmp_path / "cache"),
        **env,
    }
    done = subprocess.run(
        [str(script)], capture_output=True, text=True, env=environment, timeout=60, check=False
    )
    logs = list((tmp_path / "cache" / "logs").glob("*.log"))
    assert len(logs) == 1, logs
    return done, logs[0]


def test_steps_are_numbered_timed_and_their_output_goes_to_the_log(tmp_path: Path) -> None:
    done, log = run_script(
        tmp_path,
        """
steps_begin demo 3
step_cached "kubectl (v1)"
build() { echo "go: downloading example.com/a v1"; echo "compiling"; }
step_run "helm (v2)" "1 min" build
slow() {
  echo "go: downloading example.com/slow v1"; sleep 3.5; echo "example.com/slow/pkg"; sleep 2.5
}
step_run "kwok (v3)" "2 min" slow
""",
        RESTARTER_STEPS_HEARTBEAT="1",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"demo: 3 steps; what they print (downloads, compilers) goes to {log}"
    assert lines[1] == "[1/3] kubectl (v1): cached"
    assert lines[2] == "[2/3] helm (v2), ~1 min on 2 cores"
    assert re.fullmatch(r"\[2/3\] helm \(v2\): done in \d+ s", lines[3])
    assert lines[4] == "[3/3] kwok (v3), ~2 min on 2 cores"
    heartbeats = [line for line in lines if "so far; now:" in line]
    assert heartbeats and all(h.startswith("[3/3] kwok (v3): ") for h in heartbeats)
    # The heartbeat names the phase: the log's last line when it beat, a download or the
    # package being compiled.
    assert any(h.endswith("now: downloading example.com/slow v1") for h in heartbeats)
    assert any(h.endswith("now: example.com/slow/pkg") for h in heartbeats)
    # At least the 6 s it slept; more on a loaded machine.
    assert re.fullmatch(r"\[3/3\] kwok \(v3\): done in \d+ s", lines[-1])
    assert int(lines[-1].split()[-2]) >= 6
    assert "go: downloading" not in done.stdout
    assert "go: downloading example.com/a v1" in log.read_text()


def test_a_failed_step_is_named_and_shows_the_last_40_lines_of_the_log(tmp_path: Path) -> None:
    done, log = run_script(
        tmp_path,
        """
steps_begin demo 2
broken() { for i in $(seq 1 50); do echo "compiler line $i"; done; return 7; }
step_run "etcd (v3.6)" "1 min" broken
step_cached "never reached"
""",
    )
    assert done.returncode == 7
    assert "never reached" not in done.stdout
    assert "compiler line" not in done.stdout
    assert re.search(
        rf"\[1/2\] etcd \(v3\.6\): FAILED after \d+ s \(exit status 7\); "
        rf"the last 40 lines of {re.escape(str(log))}:",
        done.stderr,
    )
    shown = re.findall(r"compiler line (\d+)$", done.stderr, re.MULTILINE)
    assert shown == [str(i) for i in range(11, 51)]


def test_a_script_run_by_another_continues_its_numbering_and_log(tmp_path: Path) -> None:
    child = tmp_path / "child.sh"
    child.write_text(
        f"#!/usr/bin/env bash\nset -euo pipefail\nsource {STEPS}\n"
        'steps_begin child 1\nstep_cached "pause image"\nsteps_nested || echo alone\n'
    )
    child.chmod(0o755)
    done, _ = run_script(tmp_path, f'steps_begin parent 2\nstep_cached "packages"\n{child}\n')
    assert done.stdout.splitlines()[1:] == ["[1/2] packages: cached", "[2/2] pause image: cached"]


def test_a_pinned_component_built_from_an_empty_cache_reports_its_step(tmp_path: Path) -> None:
    """krew, the smallest Go tool in hack/versions.env, built into an empty cache with an
    empty Go module cache: every module is downloaded, and no download reaches stdout."""
    if shutil.which("go") is None:
        pytest.skip("Go builds the cluster's binaries; hack/setup.sh requires it")
    env = {
        **os.environ,
        "RESTARTER_CACHE": str(tmp_path / "cache"),
        "GOMODCACHE": str(tmp_path / "gomod"),
        # Go writes its module cache read-only; writable, the temporary directory can go.
        "GOFLAGS": "-buildvcs=false -modcacherw",
        "RESTARTER_STEPS_HEARTBEAT": "10",
    }
    env.pop("RESTARTER_STEPS_COUNTER", None)
    build = [str(ROOT / "hack" / "build-cluster-binaries.sh"), "kubectl-krew"]
    done = subprocess.run(build, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    log = Path(re.fullmatch(r"build-cluster-binaries: 1 step; .* goes to (\S+)", lines[0])[1])
    version = re.search(r"^KREW_VERSION=(\S+)$", (ROOT / "hack/versions.env").read_text(), re.M)
    assert version
    assert lines[1] == f"[1/1] kubectl-krew ({version[1]}), ~1 min on 2 cores"
    assert re.fullmatch(rf"\[1/1\] kubectl-krew \({version[1]}\): done in .+ s", lines[-2])
    assert "go: downloading" not in done.stdout + done.stderr
    assert "go: downloading" in log.read_text()
    assert (tmp_path / "cache" / f"k8s-{_k8s_version()}" / "bin" / "kubectl-krew").exists()

    started = time.monotonic()
    again = subprocess.run(build, capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - started < 1.0
    assert again.stdout.splitlines()[1] == f"[1/1] kubectl-krew ({version[1]}): cached"


def _k8s_version() -> str:
    found = re.search(r"^KUBERNETES_VERSION=(\S+)$", (ROOT / "hack/versions.env").read_text(), re.M)
    assert found
    return found[1]
