"""Gates: which firing alerts and blocking pods hold a due restart, and the flags."""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model import gates, holds
from restarter.model.gates import GateError, Matcher
from restarter.services.settings import SettingsError, build


def alert(name: str, state: str = "active", **labels: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, **labels}, "status": {"state": state}}


ALERTS = [
    alert("NodeDown", severity="critical", namespace="shop"),
    alert("DiskFull", severity="warning", namespace="shop"),
    alert("Silenced", state="suppressed", severity="critical"),
    alert("ApiErrors", severity="critical", namespace="billing"),
]


def test_the_filter_reads_alertmanagers_matchers() -> None:
    assert gates.parse_filter('severity="critical", alertname=~Node.*,team!=x,env!~dev|test') == (
        Matcher("severity", "=", "critical"),
        Matcher("alertname", "=~", "Node.*"),
        Matcher("team", "!=", "x"),
        Matcher("env", "!~", "dev|test"),
    )
    assert gates.parse_filter("") == ()


@pytest.mark.parametrize("bad", ["severity", "a=~(", "=x"])
def test_a_filter_that_cannot_be_read_is_an_error(bad: str) -> None:
    with pytest.raises(GateError):
        gates.parse_filter(bad)


def test_only_active_alerts_matching_every_matcher_hold() -> None:
    critical = gates.parse_filter("severity=critical")
    assert gates.firing(ALERTS, critical, None) == ["ApiErrors", "NodeDown"]
    assert gates.firing(ALERTS, (), None) == ["ApiErrors", "DiskFull", "NodeDown"]
    assert gates.firing(ALERTS, gates.parse_filter("alertname=~Nothing.*"), None) == []


def test_namespace_only_counts_the_workloads_own_namespace() -> None:
    critical = gates.parse_filter("severity=critical")
    assert gates.firing(ALERTS, critical, "shop") == ["NodeDown"]
    assert gates.firing(ALERTS, critical, "web") == []


def test_the_hold_names_the_alert_or_the_pod() -> None:
    hold = gates.alert_hold(["ApiErrors", "NodeDown"])
    assert hold is not None
    assert hold.describe() == "held by a gate: alert ApiErrors and 1 more firing in Alertmanager"
    pods = gates.pod_hold(["shop/backup-1"], "app=backup")
    assert pods is not None and pods.where == holds.POD
    assert pods.describe() == "held by a gate: blocking pod shop/backup-1 matches 'app=backup'"
    assert gates.alert_hold([]) is None and gates.pod_hold([], "app=backup") is None


def test_an_unreadable_gate_holds_and_says_so() -> None:
    hold = gates.unreadable("Alertmanager", "URLError")
    assert hold.unreadable
    assert "Alertmanager could not be read (URLError); restarts wait" in hold.describe()


def test_gates_are_off_by_default_and_the_flags_set_them() -> None:
    assert not build([], {}).gates.enabled
    settings = build(
        ["--gate-alertmanager-url", "http://127.0.0.1:9093", "--gate-alert-filter", "a=b"], {}
    )
    assert settings.gates.enabled
    assert settings.gates.alert_filter == (Matcher("a", "=", "b"),)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gate-alert-filter", "a=~("], "alert filter"),
        (["--gate-alertmanager-url", "alertmanager:9093"], "must begin with http"),
        (["--gate-blocking-pods", "app in (a"], "blocking pod selector"),
    ],
)
def test_a_gate_that_cannot_be_used_stops_the_start(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        build(argv, {})
