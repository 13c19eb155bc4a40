"""``restarter --help``: the subcommands, and for every flag what it does, its default and
the environment variable it falls back to."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from restarter import main as main_module
from restarter.services.settings import build

CHART_DEPLOYMENT = (
    Path(__file__).parents[2] / "charts" / "restarter" / "templates" / "deployment.yaml"
)

#: A valid value of each flag, to check that its variable means the same.
SAMPLES = {
    "--timezone": "Europe/Warsaw",
    "--window-length": "90m",
    "--timer-interval": "15",
    "--namespace": "shop",
    "--namespace-selector": "team=payments,tier in (web)",
    "--liveness": "http://0.0.0.0:8080/healthz",
    "--log-level": "DEBUG",
    "--log-format": "json",
    "--max-in-flight": "3",
    "--max-per-minute": "4",
    "--rollout-timeout": "5m",
    "--max-timers": "50",
    "--metrics-port": "9090",
    "--leader-election": "true",
    "--lease-namespace": "leases",
    "--lease-name": "lease",
    "--reloader-annotations": "true",
    "--reloader-window": "03.00",
    "--no-rollouts": "false",
    "--csi": "true",
    "--hold": "change freeze",
    "--certificate-margin": "2h",
    "--notify-batch": "30s",
    "--gate-alertmanager-url": "http://127.0.0.1:9093",
    "--gate-alert-filter": "severity=critical",
    "--gate-blocking-pods": "app=backup",
    "--gate-namespace-only": "true",
    "--gate-fail-open": "true",
    "--first-wave": "10%",
    "--soak": "5m",
    "--quiet": "30s",
    "--halt-expiry": "2h",
}
SWITCHES = {
    "--leader-election",
    "--reloader-annotations",
    "--no-rollouts",
    "--csi",
    "--gate-namespace-only",
    "--gate-fail-open",
}


@pytest.fixture(scope="module")
def help_text() -> str:
    return _help()


def _help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main_module.main(["--help"])
    assert exited.value.code == 0
    return out.getvalue()


def flags(help_text: str) -> dict[str, str]:
    """Each long flag of the help's options → its help, on one line."""
    options = help_text.split("\noptions:\n")[1].split("\n\n")[0]
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=  -)", options):
        flag = re.search(r"--[a-z-]+", block)
        assert flag is not None, block
        found[flag.group()] = " ".join(block.split())
    return found


def test_help_names_both_subcommands(help_text: str) -> None:
    commands = help_text.split("\ncommands (each with its own --help):\n")[1]
    for command in ("plan", "release-finalizers"):
        assert re.search(rf"^  {command} +\S", commands, re.MULTILINE), command
        assert f"restarter {command} [options]" in help_text


def test_every_flag_says_what_it_does_its_variable_and_its_default(help_text: str) -> None:
    described = flags(help_text)
    assert set(described) == {"--help", *SAMPLES}
    for flag in SAMPLES:
        assert re.search(r"\[RESTARTER_[A-Z_]+.*; default: .+\]", described[flag]), flag


def test_each_flags_variable_sets_what_the_flag_sets(help_text: str) -> None:
    described = flags(help_text)
    for flag, value in SAMPLES.items():
        variable = re.search(r"\[(RESTARTER_[A-Z_]+)", described[flag])
        assert variable is not None
        argv = [flag] if flag in SWITCHES else [flag, value]
        assert build([], {variable.group(1): value}) == build(argv, {}), flag


def test_help_names_every_variable_the_chart_sets(help_text: str) -> None:
    chart = set(re.findall(r"name: (RESTARTER_[A-Z_]+)", CHART_DEPLOYMENT.read_text()))
    assert chart
    assert chart <= set(re.findall(r"RESTARTER_[A-Z_]+", help_text))


def test_help_shows_the_built_in_defaults_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RESTARTER_TIMEZONE", "Europe/Warsaw")
    assert "[RESTARTER_TIMEZONE; default: UTC]" in flags(_help())["--timezone"]
