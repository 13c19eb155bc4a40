"""The chart's alerts under promtool: the rendered PrometheusRule passes `promtool check
rules`, and `promtool test rules` proves each alert fires on series that should fire it,
with its labels and summary, while every other alert stays silent; and stays silent on
series that should not fire it."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart_monitoring import SELECTOR_LABELS, alerts, promtool, rule_groups

POD = "restarter-0"
#: A healthy operator: scraped, and acting. A case that names these series replaces them.
HEALTHY = {"up": "1x120", "restarter_leader": "1x120"}


def series(name: str, **labels: str) -> str:
    """A series of this release's job, as the ServiceMonitor labels it."""
    every = {**SELECTOR_LABELS, "pod": POD, **labels}
    return name + "{" + ", ".join(f'{key}="{value}"' for key, value in every.items()) + "}"


@dataclass(frozen=True)
class Case:
    """Series in; the alerts that fire at ``at`` (each with its own labels and summary)
    out. Every other alert must be silent then."""

    name: str
    at: str
    input: dict[str, str]
    fires: dict[str, list[tuple[dict[str, str], str]]] = field(default_factory=dict)

    def input_series(self) -> list[dict[str, str]]:
        named = {key.split("{")[0] for key in self.input}
        healthy = {series(name): v for name, v in HEALTHY.items() if name not in named}
        return [
            {"series": key, "values": values} for key, values in {**healthy, **self.input}.items()
        ]


def alert(name: str, summary: str, **labels: str) -> dict[str, list[tuple[dict[str, str], str]]]:
    """One alert expected firing: its own labels and its summary."""
    return {name: [(labels, summary)]}


CASES = [
    Case("a scraped, acting operator", "60m", {}),
    Case(
        "no replica up",
        "10m",
        {series("up"): "0x20"},
        alert("RestarterDown", "No restarter replica is up."),
    ),
    Case(
        "only another job's targets are up",
        "10m",
        {series("up", job="other"): "1x20"},
        alert("RestarterDown", "No restarter replica is up."),
    ),
    Case(
        "one replica of two down",
        "10m",
        {series("up"): "1x20", series("up", pod="restarter-1"): "0x20"},
    ),
    Case(
        "no replica acting",
        "10m",
        {series("restarter_leader"): "0x20", series("restarter_leader", pod="restarter-1"): "0x20"},
        alert("RestarterNoLeader", "0 restarter replicas are acting, not one."),
    ),
    Case(
        "two replicas acting",
        "10m",
        {series("restarter_leader"): "1x20", series("restarter_leader", pod="restarter-1"): "1x20"},
        alert("RestarterNoLeader", "2 restarter replicas are acting, not one."),
    ),
    Case(
        "one replica acting, one standby",
        "10m",
        {series("restarter_leader"): "1x20", series("restarter_leader", pod="restarter-1"): "0x20"},
    ),
    Case(
        "patches refused for 20 minutes",
        "20m",
        {series("restarter_api_errors_total", verb="patch", code="500"): "0+1x30"},
        alert("RestarterStampsFailing", "restarter's patches are refused (HTTP 500).", code="500"),
    ),
    Case(
        "one patch refused once",
        "20m",
        {series("restarter_api_errors_total", verb="patch", code="500"): "0 1x30"},
    ),
    Case(
        "a restart refused",
        "25m",
        {series("restarter_restarts_total", kind="Deployment", result="failed"): "0x20 1x10"},
        alert(
            "RestarterRestartsFailed",
            "1 Deployment restart(s) refused by the API in the last 15 minutes.",
            kind="Deployment",
        ),
    ),
    Case(
        "restarts done, none refused",
        "25m",
        {
            series("restarter_restarts_total", kind="Deployment", result="failed"): "0x30",
            series("restarter_restarts_total", kind="Deployment", result="restarted"): "0+1x30",
        },
    ),
    Case(
        "two restarts deferred past their window",
        "20m",
        {series("restarter_restarts_total", kind="StatefulSet", result="deferred"): "0x10 2x10"},
        alert(
            "RestarterRestartsPastWindow",
            "2 StatefulSet restart(s) waited past their window in the last hour.",
            kind="StatefulSet",
        ),
    ),
    Case(
        "a deferral more than an hour ago",
        "90m",
        {series("restarter_restarts_total", kind="StatefulSet", result="deferred"): "0x10 2x100"},
    ),
    Case(
        "a rollout stalled",
        "20m",
        {series("restarter_rollouts_stalled_total", kind="DaemonSet"): "0x10 1x10"},
        alert(
            "RestarterRolloutsStalled",
            "1 DaemonSet rollout(s) restarter started did not complete in the last hour.",
            kind="DaemonSet",
        ),
    ),
    Case(
        "a rollout stalled more than an hour ago",
        "90m",
        {series("restarter_rollouts_stalled_total", kind="DaemonSet"): "0x10 1x100"},
    ),
    Case(
        "a change halted by its first wave",
        "20m",
        {series("restarter_changes_halted_total", kind="Secret"): "0x10 1x10"},
        alert(
            "RestarterChangeHalted",
            "restarter halted 1 Secret change(s) in the last hour: a first wave failed with "
            "the new data.",
            kind="Secret",
        ),
    ),
    Case(
        "a change halted more than an hour ago",
        "90m",
        {series("restarter_changes_halted_total", kind="Secret"): "0x10 1x100"},
    ),
    Case(
        "a checksum refused",
        "15m",
        {series("restarter_source_patch_errors_total", kind="Secret", status="403"): "0x10 1x5"},
        alert(
            "RestarterSourcePatchErrors",
            "restarter could not record a Secret's change (HTTP 403).",
            kind="Secret",
            status="403",
        ),
    ),
    Case(
        "a checksum refused more than 15 minutes ago",
        "40m",
        {series("restarter_source_patch_errors_total", kind="Secret", status="403"): "0x10 1x40"},
    ),
    Case(
        "lists unanswered for 20 minutes",
        "20m",
        {series("restarter_api_errors_total", verb="list", code="0"): "0+1x30"},
        alert(
            "RestarterAPIErrors", "restarter's list requests fail (HTTP 0).", verb="list", code="0"
        ),
    ),
    Case(
        "one list error",
        "20m",
        {series("restarter_api_errors_total", verb="list", code="500"): "0 1x30"},
    ),
    Case(
        "throttled for 30 minutes",
        "30m",
        {series("restarter_api_errors_total", verb="patch", code="429"): "0+1x40"},
        alert(
            "RestarterAPIThrottled", "The apiserver throttles restarter (HTTP 429).", verb="patch"
        ),
    ),
    Case(
        "throttled once",
        "30m",
        {series("restarter_api_errors_total", verb="list", code="429"): "0 1x40"},
    ),
    Case(
        "an invalid window",
        "10m",
        {series("restarter_invalid_windows_total", kind="ConfigMap"): "0x5 1x5"},
        alert(
            "RestarterInvalidWindows",
            "A ConfigMap asks for a window restarter cannot read.",
            kind="ConfigMap",
        ),
    ),
    Case(
        "an invalid window more than an hour ago",
        "70m",
        {series("restarter_invalid_windows_total", kind="ConfigMap"): "1x80"},
    ),
]


def promtool_tests(groups: dict[str, Any], cases: list[Case]) -> dict[str, Any]:
    """promtool's unit-test file: per case, every alert is expected firing or silent."""
    rules = alerts(groups)
    tests = []
    for case in cases:
        expectations = []
        for name, rule in rules.items():
            expected = [
                {
                    "exp_labels": {**rule["labels"], **SELECTOR_LABELS, **labels},
                    "exp_annotations": {
                        "summary": summary,
                        "description": rule["annotations"]["description"],
                    },
                }
                for labels, summary in case.fires.get(name, [])
            ]
            expectations.append({"eval_time": case.at, "alertname": name, "exp_alerts": expected})
        tests.append(
            {
                "name": case.name,
                "interval": "1m",
                "input_series": case.input_series(),
                "alert_rule_test": expectations,
            }
        )
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}


def run_promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool()), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )


@pytest.fixture
def rules_file(tmp_path: Path) -> dict[str, Any]:
    groups = rule_groups()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
    return groups


def test_the_rendered_rules_pass_promtool_check(tmp_path: Path, rules_file: dict[str, Any]) -> None:
    checked = run_promtool(tmp_path, "check", "rules", "rules.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts(rules_file))} rules found" in checked.stdout


def test_every_alert_has_a_case_that_fires_it_and_one_that_does_not(
    rules_file: dict[str, Any],
) -> None:
    rules = alerts(rules_file)
    assert {name for case in CASES for name in case.fires} == set(rules)
    for name, rule in rules.items():
        read = set(re.findall(r"\b([a-z_]+)\{", rule["expr"]))
        silent = [
            case
            for case in CASES
            if name not in case.fires and read & {key.split("{")[0] for key in case.input}
        ]
        assert silent, f"no case feeds {name}'s series without firing it"


def test_each_alert_fires_exactly_on_its_cases(tmp_path: Path, rules_file: dict[str, Any]) -> None:
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(promtool_tests(rules_file, CASES)))
    tested = run_promtool(tmp_path, "test", "rules", "tests.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_promtool_fails_a_case_whose_expectation_is_wrong(
    tmp_path: Path, rules_file: dict[str, Any]
) -> None:
    """The harness can fail: an alert expected silent where it fires is reported."""
    firing = next(case for case in CASES if "RestarterRestartsFailed" in case.fires)
    wrong = Case(firing.name, firing.at, firing.input)
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(promtool_tests(rules_file, [wrong])))
    tested = run_promtool(tmp_path, "test", "rules", "tests.yaml")
    assert tested.returncode != 0
    assert "RestarterRestartsFailed" in tested.stdout + tested.stderr


def test_rule_labels_reach_every_alert_and_the_selector_can_be_replaced(tmp_path: Path) -> None:
    groups = rule_groups(
        "--set",
        "metrics.prometheusRule.ruleLabels.team=platform",
        "--set-string",
        'metrics.prometheusRule.selector=service="restarter-metrics"',
    )
    for rule in alerts(groups).values():
        assert rule["labels"]["team"] == "platform"
        assert 'service="restarter-metrics"' in rule["expr"]
        assert "job=" not in rule["expr"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
    checked = run_promtool(tmp_path, "check", "rules", "rules.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
