"""Settings from flags and environment, validated at start-up."""

from __future__ import annotations

import datetime as dt

import pytest

from restarter.settings import Settings, SettingsError, build


def test_defaults() -> None:
    assert build([], {}) == Settings()
    assert Settings().window_length == dt.timedelta(hours=1)


def test_environment_is_read() -> None:
    settings = build(
        [],
        {
            "RESTARTER_TIMEZONE": "Europe/Warsaw",
            "RESTARTER_WINDOW_LENGTH": "90m",
            "RESTARTER_TIMER_INTERVAL": "15",
            "RESTARTER_NAMESPACES": "a, b,,a",
        },
    )
    assert settings.timezone == "Europe/Warsaw"
    assert settings.window_length == dt.timedelta(minutes=90)
    assert settings.timer_interval == 15
    assert settings.namespaces == ("a", "b")


def test_flags_override_environment() -> None:
    settings = build(
        ["--timezone", "Asia/Kolkata", "-n", "x"],
        {"RESTARTER_TIMEZONE": "UTC", "RESTARTER_NAMESPACES": "a"},
    )
    assert settings.timezone == "Asia/Kolkata" and settings.namespaces == ("x",)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--timezone", "Mars/Base"], "Mars/Base"),
        (["--window-length", "0m"], "0m"),
        (["--timer-interval", "x"], "'x'"),
        (["--timer-interval", "0.1"], "0.1"),
        (["--log-level", "LOUD"], "LOUD"),
        (["--log-format", "xml"], "xml"),
    ],
)
def test_bad_settings_fail_with_a_message_naming_the_value(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        build(argv, {})


def test_a_window_shorter_than_two_timer_intervals_is_refused() -> None:
    with pytest.raises(SettingsError, match="two timer intervals"):
        build(["--window-length", "90s", "--timer-interval", "60"], {})
    assert build(["--window-length", "3m", "--timer-interval", "60"], {}).timer_interval == 60
