"""Pacing, metrics and leader-election settings: defaults, environment, bad input."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest

from restarter.model.limits import Limits, free_starts
from restarter.services.settings import SettingsError, build


def test_pacing_is_on_by_default_with_limits_a_cluster_survives() -> None:
    settings = build([], {})
    assert settings.pacing == Limits(max_in_flight=10, max_per_minute=30, rollout_timeout=600)
    assert free_starts(in_flight=0, started=0, limits=settings.pacing) == 10
    assert (settings.metrics_port, settings.leader_election) == (0, False)


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("RESTARTER_MAX_IN_FLIGHT", "3", "max_in_flight", 3),
        ("RESTARTER_MAX_IN_FLIGHT", "0", "max_in_flight", 0),
        ("RESTARTER_MAX_PER_MINUTE", "120", "max_per_minute", 120),
        ("RESTARTER_ROLLOUT_TIMEOUT", "90s", "rollout_timeout", dt.timedelta(seconds=90)),
        ("RESTARTER_METRICS_PORT", "9090", "metrics_port", 9090),
        ("RESTARTER_LEADER_ELECTION", "true", "leader_election", True),
        ("RESTARTER_LEADER_ELECTION", "no", "leader_election", False),
        ("RESTARTER_LEASE_NAMESPACE", "ops", "lease_namespace", "ops"),
        ("POD_NAMESPACE", "restarter-system", "lease_namespace", "restarter-system"),
        ("RESTARTER_LEASE_NAME", "restarter-prod", "lease_name", "restarter-prod"),
    ],
)
def test_each_setting_comes_from_its_variable(
    variable: str, value: str, field: str, expected: object
) -> None:
    assert getattr(build([], {variable: value}), field) == expected


def test_both_limits_zero_turn_pacing_off() -> None:
    settings = build(["--max-in-flight", "0", "--max-per-minute", "0"], {})
    assert free_starts(in_flight=99, started=99, limits=settings.pacing) is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-in-flight", "-1"], "max in flight '-1' must be a whole number"),
        (["--max-in-flight", "2.5"], "max in flight '2.5' must be a whole number"),
        (["--max-per-minute", "ten"], "max per minute 'ten' must be a whole number"),
        (["--max-per-minute", ""], "max per minute '' must be a whole number"),
        (["--rollout-timeout", "soon"], "rollout timeout:"),
        (["--metrics-port", "70000"], "metrics port '70000' must be 0 (off)"),
        (["--metrics-port", "-5"], "metrics port '-5' must be 0 (off)"),
    ],
)
def test_bad_pacing_or_metrics_settings_are_refused_naming_the_value(
    flags: list[str], message: str
) -> None:
    with pytest.raises(SettingsError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        build(flags, {})


@pytest.mark.parametrize(
    "flags", [["--max-in-flight=-1"], ["--max-per-minute", "x"]], ids=["negative-K", "R-nan"]
)
def test_the_operator_exits_2_with_the_reason_on_bad_pacing_settings(flags: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "restarter", *flags], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.startswith("restarter: max ")
    assert "must be a whole number" in result.stderr
