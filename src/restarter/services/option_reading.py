"""What an operator option is (``Option``: its flag, variable, default, reader and chart
value) and the readers of given values, each raising ``SettingsError`` with the message
start-up prints. The options themselves are ``services.options``' table."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model.gates import GateError, parse_filter
from restarter.model.namespaces import SelectorError, parse_selector
from restarter.model.waves import WaveError, parse_first_wave, parse_seconds
from restarter.model.windows import AT_CRON, ScheduleError, parse_length, parse_zone


class SettingsError(ValueError):
    """A setting that cannot be used; raised at start-up, before anything is watched."""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("plain", "json")


@dataclass(frozen=True)
class Option:
    """One option of the operator."""

    field: str
    """The ``Settings`` field it sets; ``gates.<name>`` for a field of ``Settings.gates``."""

    flag: str | None
    """``--name``; None for an option read only from its variable (a secret's)."""

    variable: str
    """The environment variable read when the flag is not given."""

    what: str
    """What it does, for ``--help`` and the reference page."""

    parse: Callable[[Any], Any]
    """The given value (text; a list for a repeatable flag, a bool for a switch) as the
    field's value; raises SettingsError saying what is wrong with it."""

    default: str = ""
    """The text read when neither the flag nor the variable is given."""

    metavar: str | None = None

    shown: str | None = None
    """The default as the help states it, when not ``default`` itself (``none``, ``off``)."""

    switch: str | None = None
    """For a flag without a value, the variable's text that turns it on."""

    note: str = ""
    """Said after the variable in the help, like ``, comma list``."""

    fallback: str | None = None
    """A second variable, read when the first is unset or empty."""

    short: str | None = None

    repeatable: bool = False
    """Given once per value; the variable is then a comma list."""

    chart_value: str | None = None
    """The value of ``charts/restarter/values.yaml`` the chart passes as ``variable``."""

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(each for each in (self.flag, self.short) if each)

    @property
    def dest(self) -> str:
        return (self.flag or "").lstrip("-").replace("-", "_")

    @property
    def variables(self) -> str:
        """The variable as the help names it: ``VAR=true`` for a switch, else with its note."""
        if self.switch is not None:
            return f"{self.variable}={self.switch}"
        return self.variable + (f", else {self.fallback}" if self.fallback else "") + self.note

    @property
    def default_shown(self) -> str:
        return self.default if self.shown is None else self.shown

    @property
    def help(self) -> str:
        return f"{self.what} [{self.variables}; default: {self.default_shown}]"

    def from_environment(self, env: Mapping[str, str]) -> Any:
        """What the variable (else the default) gives when the flag is absent."""
        if self.switch is not None:
            return env.get(self.variable, "").lower() == self.switch
        if self.fallback is not None:
            return env.get(self.variable) or env.get(self.fallback) or self.default
        return env.get(self.variable, self.default)

    def add_to(self, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        """The flag, defaulting to its variable; a repeatable one's variable is read later,
        as argparse would append to it."""
        if self.switch is not None:
            parser.add_argument(
                *self.flags, action="store_true", default=self.from_environment(env), help=self.help
            )
        elif self.repeatable:
            parser.add_argument(*self.flags, action="append", metavar=self.metavar, help=self.help)
        else:
            parser.add_argument(
                *self.flags,
                default=self.from_environment(env),
                metavar=self.metavar,
                help=self.help,
            )

    def given(self, args: argparse.Namespace, env: Mapping[str, str]) -> Any:
        """The flag's value, else the variable's, else the default: not yet parsed."""
        value = getattr(args, self.dest, None) if self.flag else None
        return self.from_environment(env) if value is None else value


# Readers of a given value. Each raises SettingsError with the message start-up prints.


def text(given: str) -> str:
    return given


def stripped(given: str) -> str:
    return given.strip()


def on(given: bool) -> bool:
    return given


def off(given: bool) -> bool:
    return not given


def zone(given: str) -> str:
    try:
        parse_zone(given)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None
    return given


def length(what: str = "") -> Callable[[str], object]:
    """A length like ``90m``; ``what`` prefixes the error, unless the error names it."""

    def parse(given: str) -> object:
        try:
            return parse_length(given)
        except ScheduleError as error:
            raise SettingsError(f"{what}: {error}" if what else str(error)) from None

    return parse


def seconds(what: str) -> Callable[[str], object]:
    def parse(given: str) -> object:
        try:
            return parse_seconds(given, what)
        except WaveError as error:
            raise SettingsError(str(error)) from None

    return parse


def first_wave(given: str) -> object:
    try:
        return parse_first_wave(given)
    except WaveError as error:
        raise SettingsError(str(error)) from None


def timer_interval(given: str) -> float:
    try:
        interval = float(given)
    except ValueError:
        raise SettingsError(f"timer interval {given!r} is not a number") from None
    # At least 1 s: restartedAt has whole seconds, so two restarts of one workload in the
    # same second would write the same value and the second would roll nothing.
    if not 1 <= interval <= 3600:
        raise SettingsError(f"timer interval {interval} must be between 1 and 3600 seconds")
    return interval


def namespaces(given: str | list[str]) -> tuple[str, ...]:
    """Repeated flags as given, or the variable's comma list; each name once, in order."""
    if isinstance(given, str):
        given = [part.strip() for part in given.split(",") if part.strip()]
    return tuple(dict.fromkeys(given))


def selector(what: str) -> Callable[[str], str]:
    def parse(given: str) -> str:
        selector = given.strip()
        try:
            if selector:
                parse_selector(selector)
        except SelectorError as error:
            raise SettingsError(f"{what}: {error}") from None
        return selector

    return parse


def endpoint(given: str) -> str | None:
    return given or None


def log_level(given: str) -> str:
    if given.upper() not in LOG_LEVELS:
        raise SettingsError(f"log level {given!r} is not one of {', '.join(LOG_LEVELS)}")
    return given.upper()


def log_format(given: str) -> str:
    if given not in LOG_FORMATS:
        raise SettingsError(f"log format {given!r} is not plain or json")
    return given


def whole(what: str, rule: str, least: int = 0, most: int | None = None) -> Callable[[str], int]:
    """A whole number from ``least`` to ``most``; ``rule`` tells what one may give."""

    def parse(given: str) -> int:
        number = int(given) if given.isascii() and given.isdigit() else -1
        if number < least or (most is not None and number > most):
            raise SettingsError(f"{what} {given!r} {rule}")
        return number

    return parse


LIMIT = "must be a whole number ≥ 0 (0: no limit)"


def reloader_window(given: str) -> str:
    """Stripped; whether it reads as a window is checked with the zone and length."""
    if given.strip() == AT_CRON:
        raise SettingsError(
            f"reloader window {given!r}: cron needs an expression: give a workload its own window"
        )
    return given.strip()


def alertmanager_url(given: str) -> str:
    url = given.strip()
    if url and not url.startswith(("http://", "https://")):
        raise SettingsError(f"gate Alertmanager URL {url!r} must begin with http:// or https://")
    return url


def alert_filter(given: str) -> object:
    try:
        return parse_filter(given)
    except GateError as error:
        raise SettingsError(str(error)) from None


def notify_urls(given: str) -> tuple[str, ...]:
    return tuple(given.replace(",", " ").split())
