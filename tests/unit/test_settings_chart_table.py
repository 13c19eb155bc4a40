"""The options table against the chart: each option with a chart value has it in
values.yaml and values.schema.json, and the Deployment passes it as the option's variable;
every RESTARTER_* variable the chart sets is an option of the table."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
import yaml

from restarter.services.option_reading import Option
from restarter.services.options import OPTIONS
from restarter.services.settings import Settings, build
from tests.chart_monitoring import CHART, render

CHARTED = [option for option in OPTIONS if option.chart_value]
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())

#: A value unlike the default for each option the chart sets, as JSON for ``--set-json``:
#: a Lease and a Secret of URLs render the variables that are otherwise left out.
CHANGED: dict[str, Any] = {
    "timezone": "Europe/Warsaw",
    "windowLength": "90m",
    "timerInterval": 15,
    "namespaces": ["shop", "billing"],
    "namespaceSelector": "team=payments",
    "logLevel": "DEBUG",
    "logFormat": "plain",
    "pacing.maxInFlight": 3,
    "pacing.maxPerMinute": 4,
    "pacing.rolloutTimeout": "5m",
    "waves.firstWave": "10%",
    "waves.soak": "5m",
    "waves.haltExpiry": "2h",
    "quiet": "30s",
    "maxTimers": 50,
    "metrics.port": 9191,
    "leaderElection.enabled": True,
    "reloaderAnnotations.enabled": True,
    "reloaderAnnotations.window": "03.00",
    "rollouts.enabled": True,
    "csi.enabled": True,
    "hold": "change freeze",
    "certificateMargin": "2h",
    "gates.alertmanagerUrl": "http://alertmanager:9093",
    "gates.alertFilter": "severity=critical",
    "gates.blockingPodSelector": "app=backup",
    "gates.namespaceOnly": True,
    "gates.failOpen": True,
    "notifications.batch": "30s",
    "notifications.urlsSecret": {"name": "restarter-notify", "key": "urls"},
}

#: Changed in a render of their own: the schema refuses them beside ``namespaces``.
APART = frozenset({"namespaceSelector"})


def ids(option: Option) -> str:
    return option.variable


@cache
def environment(changed: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """The operator container's env entries by name, as the chart renders them with its
    defaults but for the ``changed`` values of CHANGED."""
    values = [f"--set-json={path}={json.dumps(CHANGED[path])}" for path in sorted(changed)]
    [deployment] = [doc for doc in render(*values) if doc["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {entry["name"]: entry for entry in container["env"]}


def changed_environment(chart_value: str) -> dict[str, dict[str, Any]]:
    """The env entries with ``chart_value`` changed, and with it every value it may go with."""
    if chart_value in APART:
        return environment(APART)
    return environment(frozenset(CHANGED) - APART)


def test_every_option_the_chart_sets_has_a_changed_value_here() -> None:
    assert {option.chart_value for option in CHARTED} == set(CHANGED)


@pytest.mark.parametrize("option", CHARTED, ids=ids)
def test_its_value_is_in_values_yaml_and_in_the_schema(option: Option) -> None:
    values, schema = VALUES, SCHEMA
    assert option.chart_value is not None
    for name in option.chart_value.split("."):
        assert isinstance(values, dict) and name in values, option.chart_value
        values = values[name]
        schema = schema.get("properties", {}).get(name)
        assert schema, f"values.schema.json has no {option.chart_value}"


def read(option: Option, entry: dict[str, Any] | None) -> Any:
    """What the operator reads from the env entry (a Secret's key: the reference to it)."""
    if entry is None:
        return None
    if "valueFrom" in entry:
        return entry["valueFrom"]["secretKeyRef"]
    return option.parse(option.from_environment({option.variable: entry["value"]}))


def meant(option: Option, value: Any) -> Any:
    """What the operator should read when the chart is given ``value``."""
    if isinstance(value, dict):
        return value
    text = ",".join(value) if isinstance(value, list) else json.dumps(value).strip('"')
    return option.parse(option.from_environment({option.variable: text}))


@pytest.mark.parametrize("option", CHARTED, ids=ids)
def test_the_deployment_passes_its_value_as_its_variable(option: Option) -> None:
    assert option.chart_value is not None
    changed = changed_environment(option.chart_value).get(option.variable)
    assert changed is not None, f"{option.chart_value} is not passed as {option.variable}"
    assert read(option, changed) == meant(option, CHANGED[option.chart_value])
    assert read(option, changed) != read(option, environment().get(option.variable))


def test_every_restarter_variable_the_chart_sets_is_an_option() -> None:
    template = (CHART / "templates" / "deployment.yaml").read_text()
    written = set(re.findall(r"name: (RESTARTER_[A-Z_]+)", template))
    rendered = {
        name
        for changed in (frozenset(CHANGED) - APART, APART)
        for name in environment(changed)
        if name.startswith("RESTARTER_")
    }
    assert rendered <= written
    assert written <= {option.variable for option in OPTIONS}


def test_the_charts_defaults_are_settings_the_operator_accepts() -> None:
    # The downward API's POD_NAME, POD_NAMESPACE and POD_UID have no value to read here.
    env = {name: entry["value"] for name, entry in environment().items() if "value" in entry}
    settings = build([], env)
    assert settings != Settings()
    assert (settings.log_format, settings.metrics_port) == ("json", 9090)
