"""Settings from flags and environment, validated at start-up."""

from __future__ import annotations

import datetime as dt

import pytest

from restarter.services.settings import Settings, SettingsError, build

LIVENESS = "http://0.0.0.0:8080/healthz"


def test_build_with_no_flags_and_no_environment_gives_the_defaults() -> None:
    settings = build([], {})
    assert settings == Settings()
    assert settings == Settings(
        timezone="UTC",
        window_length=dt.timedelta(hours=1),
        timer_interval=60.0,
        namespaces=(),
        liveness_endpoint=None,
        log_level="INFO",
        log_format="plain",
    )


def test_build_ignores_variables_outside_the_restarter_prefix() -> None:
    assert build([], {"TZ": "Europe/Warsaw", "NAMESPACE": "x"}) == Settings()


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("RESTARTER_TIMEZONE", "Europe/Warsaw", "timezone", "Europe/Warsaw"),
        ("RESTARTER_WINDOW_LENGTH", "90m", "window_length", dt.timedelta(minutes=90)),
        ("RESTARTER_WINDOW_LENGTH", "1h30m", "window_length", dt.timedelta(minutes=90)),
        ("RESTARTER_TIMER_INTERVAL", "15", "timer_interval", 15.0),
        ("RESTARTER_TIMER_INTERVAL", "1.5", "timer_interval", 1.5),
        ("RESTARTER_NAMESPACES", "a, b,,a", "namespaces", ("a", "b")),
        ("RESTARTER_NAMESPACES", " , ,", "namespaces", ()),
        ("RESTARTER_NAMESPACES", "only", "namespaces", ("only",)),
        ("RESTARTER_LIVENESS", LIVENESS, "liveness_endpoint", LIVENESS),
        ("RESTARTER_LIVENESS", "", "liveness_endpoint", None),
        ("RESTARTER_LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("RESTARTER_LOG_FORMAT", "json", "log_format", "json"),
    ],
)
def test_each_restarter_variable_sets_its_setting(
    variable: str, value: str, field: str, expected: object
) -> None:
    assert getattr(build([], {variable: value}), field) == expected


def test_all_variables_together_are_read() -> None:
    settings = build(
        [],
        {
            "RESTARTER_TIMEZONE": "Europe/Warsaw",
            "RESTARTER_WINDOW_LENGTH": "90m",
            "RESTARTER_TIMER_INTERVAL": "15",
            "RESTARTER_NAMESPACES": "a, b,,a",
        },
    )
    assert settings == Settings(
        timezone="Europe/Warsaw",
        window_length=dt.timedelta(minutes=90),
        timer_interval=15.0,
        namespaces=("a", "b"),
    )


ENVIRONMENT = {
    "RESTARTER_TIMEZONE": "UTC",
    "RESTARTER_WINDOW_LENGTH": "1h",
    "RESTARTER_TIMER_INTERVAL": "60",
    "RESTARTER_NAMESPACES": "a,b",
    "RESTARTER_LIVENESS": LIVENESS,
    "RESTARTER_LOG_LEVEL": "INFO",
    "RESTARTER_LOG_FORMAT": "plain",
}


@pytest.mark.parametrize(
    ("argv", "field", "expected"),
    [
        (["--timezone", "Asia/Kolkata"], "timezone", "Asia/Kolkata"),
        (["--window-length", "2h"], "window_length", dt.timedelta(hours=2)),
        (["--timer-interval", "5"], "timer_interval", 5.0),
        (["-n", "x"], "namespaces", ("x",)),
        (["--namespace", "x", "-n", "y", "-n", "x"], "namespaces", ("x", "y")),
        (["--liveness", "http://127.0.0.1:9090/h"], "liveness_endpoint", "http://127.0.0.1:9090/h"),
        (["--log-level", "warning"], "log_level", "WARNING"),
        (["--log-format", "json"], "log_format", "json"),
    ],
)
def test_a_flag_overrides_its_environment_variable(
    argv: list[str], field: str, expected: object
) -> None:
    assert getattr(build(argv, ENVIRONMENT), field) == expected


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        pytest.param(["--timezone", "Mars/Base"], {}, "Mars/Base", id="flag-zone"),
        pytest.param([], {"RESTARTER_TIMEZONE": "Mars/Base"}, "Mars/Base", id="env-zone"),
        pytest.param(["--window-length", "0m"], {}, "'0m'", id="flag-length-0m"),
        pytest.param([], {"RESTARTER_WINDOW_LENGTH": "0m"}, "'0m'", id="env-length-0m"),
        pytest.param(["--window-length", "25h"], {}, "'25h'", id="flag-length-25h"),
        pytest.param(["--timer-interval", "x"], {}, "'x'", id="flag-interval-x"),
        pytest.param([], {"RESTARTER_TIMER_INTERVAL": "x"}, "'x'", id="env-interval-x"),
        pytest.param(["--timer-interval", "0.1"], {}, "0.1", id="flag-interval-0.1"),
        pytest.param([], {"RESTARTER_TIMER_INTERVAL": "0.1"}, "0.1", id="env-interval-0.1"),
        pytest.param(
            ["--timer-interval", "0.5"], {}, "between 1 and 3600", id="sub-second-interval"
        ),
        pytest.param(["--timer-interval", "3601"], {}, "3601", id="flag-interval-too-long"),
        pytest.param(["--log-level", "LOUD"], {}, "LOUD", id="flag-level"),
        pytest.param([], {"RESTARTER_LOG_LEVEL": "LOUD"}, "LOUD", id="env-level"),
        pytest.param(["--log-format", "xml"], {}, "xml", id="flag-format"),
    ],
)
def test_a_bad_setting_raises_settings_error_naming_the_value(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        build(argv, environ)


def test_a_good_flag_rescues_a_bad_environment_variable() -> None:
    settings = build(["--timezone", "Europe/Warsaw"], {"RESTARTER_TIMEZONE": "Mars/Base"})
    assert settings.timezone == "Europe/Warsaw"


@pytest.mark.parametrize(
    ("length", "interval", "ok"),
    [
        pytest.param("90s", "60", False, id="shorter-than-two-intervals"),
        pytest.param("120s", "60", False, id="exactly-two-intervals"),
        pytest.param("121s", "60", True, id="just-longer"),
        pytest.param("3m", "60", True, id="three-intervals"),
    ],
)
def test_the_window_must_be_longer_than_two_timer_intervals(
    length: str, interval: str, ok: bool
) -> None:
    argv = ["--window-length", length, "--timer-interval", interval]
    if ok:
        assert build(argv, {}).timer_interval == float(interval)
    else:
        with pytest.raises(SettingsError, match="two timer intervals"):
            build(argv, {})


def test_a_namespace_selector_is_kept_as_given_and_parsed() -> None:
    settings = build(["--namespace-selector", " team=payments,tier in (web) "], {})
    assert settings.namespace_selector == "team=payments,tier in (web)"
    assert settings.selector is not None
    assert settings.selector.matches({"team": "payments", "tier": "web"})
    assert build([], {}).selector is None


@pytest.mark.parametrize(
    ("argv", "environ"),
    [
        pytest.param(["--namespace-selector", "team=a", "-n", "shop"], {}, id="flags"),
        pytest.param(
            [], {"RESTARTER_NAMESPACE_SELECTOR": "team=a", "RESTARTER_NAMESPACES": "shop"}, id="env"
        ),
        pytest.param(["-n", "shop"], {"RESTARTER_NAMESPACE_SELECTOR": "team=a"}, id="mixed"),
    ],
)
def test_a_namespace_selector_and_a_namespace_list_are_refused_together(
    argv: list[str], environ: dict[str, str]
) -> None:
    with pytest.raises(SettingsError, match="cannot be combined with --namespace"):
        build(argv, environ)


@pytest.mark.parametrize("selector", ["team in (a", "team=a b", "team=-a", "team=a,,tier"])
def test_a_malformed_namespace_selector_is_refused_naming_it(selector: str) -> None:
    with pytest.raises(SettingsError, match="namespace selector: "):
        build(["--namespace-selector", selector], {})
