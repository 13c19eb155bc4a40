"""Every operator option, declared once: its flag, its RESTARTER_* variable, its default,
how its text is read, and the chart value that sets it.

The argument parser, the environment fallback, ``build``'s conversion, the reference page
and the chart's consistency test all read ``OPTIONS``; an option added here is in each.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model.gates import GateError, parse_filter
from restarter.model.namespaces import SelectorError, parse_selector
from restarter.model.schedule import ScheduleError, parse_length, parse_zone
from restarter.model.waves import WaveError, parse_first_wave, parse_seconds
from restarter.model.windows import AT_CRON


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


def _text(given: str) -> str:
    return given


def _stripped(given: str) -> str:
    return given.strip()


def _on(given: bool) -> bool:
    return given


def _off(given: bool) -> bool:
    return not given


def _zone(given: str) -> str:
    try:
        parse_zone(given)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None
    return given


def _length(what: str = "") -> Callable[[str], object]:
    """A length like ``90m``; ``what`` prefixes the error, unless the error names it."""

    def parse(given: str) -> object:
        try:
            return parse_length(given)
        except ScheduleError as error:
            raise SettingsError(f"{what}: {error}" if what else str(error)) from None

    return parse


def _seconds(what: str) -> Callable[[str], object]:
    def parse(given: str) -> object:
        try:
            return parse_seconds(given, what)
        except WaveError as error:
            raise SettingsError(str(error)) from None

    return parse


def _first_wave(given: str) -> object:
    try:
        return parse_first_wave(given)
    except WaveError as error:
        raise SettingsError(str(error)) from None


def _timer_interval(given: str) -> float:
    try:
        interval = float(given)
    except ValueError:
        raise SettingsError(f"timer interval {given!r} is not a number") from None
    # At least 1 s: restartedAt has whole seconds, so two restarts of one workload in the
    # same second would write the same value and the second would roll nothing.
    if not 1 <= interval <= 3600:
        raise SettingsError(f"timer interval {interval} must be between 1 and 3600 seconds")
    return interval


def _namespaces(given: str | list[str]) -> tuple[str, ...]:
    """Repeated flags as given, or the variable's comma list; each name once, in order."""
    if isinstance(given, str):
        given = [part.strip() for part in given.split(",") if part.strip()]
    return tuple(dict.fromkeys(given))


def _selector(what: str) -> Callable[[str], str]:
    def parse(given: str) -> str:
        selector = given.strip()
        try:
            if selector:
                parse_selector(selector)
        except SelectorError as error:
            raise SettingsError(f"{what}: {error}") from None
        return selector

    return parse


def _endpoint(given: str) -> str | None:
    return given or None


def _log_level(given: str) -> str:
    if given.upper() not in LOG_LEVELS:
        raise SettingsError(f"log level {given!r} is not one of {', '.join(LOG_LEVELS)}")
    return given.upper()


def _log_format(given: str) -> str:
    if given not in LOG_FORMATS:
        raise SettingsError(f"log format {given!r} is not plain or json")
    return given


def _whole(what: str, rule: str, least: int = 0, most: int | None = None) -> Callable[[str], int]:
    """A whole number from ``least`` to ``most``; ``rule`` tells what one may give."""

    def parse(given: str) -> int:
        number = int(given) if given.isascii() and given.isdigit() else -1
        if number < least or (most is not None and number > most):
            raise SettingsError(f"{what} {given!r} {rule}")
        return number

    return parse


_LIMIT = "must be a whole number ≥ 0 (0: no limit)"


def _reloader_window(given: str) -> str:
    """Stripped; whether it reads as a window is checked with the zone and length."""
    if given.strip() == AT_CRON:
        raise SettingsError(
            f"reloader window {given!r}: cron needs an expression: give a workload its own window"
        )
    return given.strip()


def _alertmanager_url(given: str) -> str:
    url = given.strip()
    if url and not url.startswith(("http://", "https://")):
        raise SettingsError(f"gate Alertmanager URL {url!r} must begin with http:// or https://")
    return url


def _alert_filter(given: str) -> object:
    try:
        return parse_filter(given)
    except GateError as error:
        raise SettingsError(str(error)) from None


def _notify_urls(given: str) -> tuple[str, ...]:
    return tuple(given.replace(",", " ").split())


GATES = (
    Option(
        "gates.alertmanager_url",
        "--gate-alertmanager-url",
        "RESTARTER_GATE_ALERTMANAGER_URL",
        "hold due restarts while alerts fire in this Alertmanager (its v2 API)",
        _alertmanager_url,
        metavar="URL",
        shown="none",
        chart_value="gates.alertmanagerUrl",
    ),
    Option(
        "gates.alert_filter",
        "--gate-alert-filter",
        "RESTARTER_GATE_ALERT_FILTER",
        "only alerts matching these matchers hold restarts, like "
        "'severity=critical,alertname=~Node.*'",
        _alert_filter,
        metavar="MATCHERS",
        shown="every firing alert",
        chart_value="gates.alertFilter",
    ),
    Option(
        "gates.blocking_pods",
        "--gate-blocking-pods",
        "RESTARTER_GATE_BLOCKING_PODS",
        "hold due restarts while pods matching this label selector exist",
        _selector("blocking pod selector"),
        metavar="SELECTOR",
        shown="none",
        chart_value="gates.blockingPodSelector",
    ),
    Option(
        "gates.namespace_only",
        "--gate-namespace-only",
        "RESTARTER_GATE_NAMESPACE_ONLY",
        "only alerts labelled with, and blocking pods in, a workload's own namespace hold it",
        _on,
        switch="true",
        shown="off",
        chart_value="gates.namespaceOnly",
    ),
    Option(
        "gates.fail_open",
        "--gate-fail-open",
        "RESTARTER_GATE_FAIL_OPEN",
        "let restarts go when a gate cannot be read (a warning is logged and counted)",
        _on,
        switch="true",
        shown="off: restarts wait",
        chart_value="gates.failOpen",
    ),
)
"""The gates' options, which ``restarter plan`` takes too."""

#: In the order of ``restarter --help`` and of the reference page.
OPTIONS = (
    Option(
        "timezone",
        "--timezone",
        "RESTARTER_TIMEZONE",
        "IANA zone in which HH.MM windows are read, unless a source names its own",
        _zone,
        default="UTC",
        metavar="ZONE",
        chart_value="timezone",
    ),
    Option(
        "window_length",
        "--window-length",
        "RESTARTER_WINDOW_LENGTH",
        "how long a window stays open (90m, 2h); restarts only start inside it",
        _length(),
        default="1h",
        metavar="LENGTH",
        chart_value="windowLength",
    ),
    Option(
        "timer_interval",
        "--timer-interval",
        "RESTARTER_TIMER_INTERVAL",
        "seconds between checks of each workload whose window is open but that has not "
        "restarted yet (pacing, paused), 1 to 3600",
        _timer_interval,
        default="60",
        metavar="SECONDS",
        chart_value="timerInterval",
    ),
    Option(
        "namespaces",
        "--namespace",
        "RESTARTER_NAMESPACES",
        "watch only this namespace; repeatable",
        _namespaces,
        metavar="NAMESPACE",
        shown="every namespace",
        note=", comma list",
        short="-n",
        repeatable=True,
        chart_value="namespaces",
    ),
    Option(
        "namespace_selector",
        "--namespace-selector",
        "RESTARTER_NAMESPACE_SELECTOR",
        "watch only the namespaces whose labels match, like 'team=payments,tier in "
        "(web)', followed as they are relabelled; not with --namespace",
        _selector("namespace selector"),
        metavar="SELECTOR",
        shown="none",
        chart_value="namespaceSelector",
    ),
    Option(
        "liveness_endpoint",
        "--liveness",
        "RESTARTER_LIVENESS",
        "serve kopf's health check at this URL, like http://0.0.0.0:8080/healthz",
        _endpoint,
        metavar="URL",
        shown="none",
    ),
    Option(
        "log_level",
        "--log-level",
        "RESTARTER_LOG_LEVEL",
        f"log level: {', '.join(LOG_LEVELS)}",
        _log_level,
        default="INFO",
        metavar="LEVEL",
        chart_value="logLevel",
    ),
    Option(
        "log_format",
        "--log-format",
        "RESTARTER_LOG_FORMAT",
        "log lines: plain or json",
        _log_format,
        default="plain",
        metavar="FORMAT",
        chart_value="logFormat",
    ),
    Option(
        "max_in_flight",
        "--max-in-flight",
        "RESTARTER_MAX_IN_FLIGHT",
        "restarts whose rollout is not complete, at most; 0: no limit",
        _whole("max in flight", _LIMIT),
        default="10",
        metavar="COUNT",
        chart_value="pacing.maxInFlight",
    ),
    Option(
        "max_per_minute",
        "--max-per-minute",
        "RESTARTER_MAX_PER_MINUTE",
        "restarts started in any minute, at most; 0: no limit",
        _whole("max per minute", _LIMIT),
        default="30",
        metavar="COUNT",
        chart_value="pacing.maxPerMinute",
    ),
    Option(
        "rollout_timeout",
        "--rollout-timeout",
        "RESTARTER_ROLLOUT_TIMEOUT",
        "an incomplete rollout holds its pacing slot this long, then a Warning frees it",
        _length("rollout timeout"),
        default="10m",
        metavar="LENGTH",
        chart_value="pacing.rolloutTimeout",
    ),
    Option(
        "first_wave",
        "--first-wave",
        "RESTARTER_FIRST_WAVE",
        "how many of a change's dependents restart first (a count, or a percentage of them "
        "with a trailing percent sign), the rest only once those stayed healthy for the soak "
        "time; 0: no waves",
        _first_wave,
        default="1",
        metavar="COUNT",
        chart_value="waves.firstWave",
    ),
    Option(
        "soak",
        "--soak",
        "RESTARTER_SOAK",
        "how long the first wave must stay healthy after its rollout before the rest "
        "restart (0, 45s, 5m)",
        _seconds("soak"),
        default="1m",
        metavar="LENGTH",
        chart_value="waves.soak",
    ),
    Option(
        "quiet",
        "--quiet",
        "RESTARTER_QUIET",
        "how long a workload's sources must stay unchanged before it restarts, so that "
        "changes arriving together make one restart (0: none)",
        _seconds("quiet time"),
        default="10s",
        metavar="LENGTH",
        chart_value="quiet",
    ),
    Option(
        "halt_expiry",
        "--halt-expiry",
        "RESTARTER_HALT_EXPIRY",
        "a change halted by the circuit breaker goes on by itself after this long; 0: it "
        "stays halted until the source changes again or is resumed",
        _seconds("halt expiry"),
        default="0s",
        metavar="LENGTH",
        chart_value="waves.haltExpiry",
    ),
    Option(
        "max_timers",
        "--max-timers",
        "RESTARTER_MAX_TIMERS",
        "pending workloads whose window is open handed to timers at once, at most (each "
        "holds its body in memory); the rest wait, earliest due first",
        _whole("max timers", "must be a whole number ≥ 1", least=1),
        default="200",
        metavar="COUNT",
        chart_value="maxTimers",
    ),
    Option(
        "metrics_port",
        "--metrics-port",
        "RESTARTER_METRICS_PORT",
        "port of the Prometheus /metrics endpoint; 0: none",
        _whole("metrics port", "must be 0 (off) or a port up to 65535", most=65535),
        default="0",
        metavar="PORT",
        chart_value="metrics.port",
    ),
    Option(
        "leader_election",
        "--leader-election",
        "RESTARTER_LEADER_ELECTION",
        "act only while holding a Lease, so that replicas can stand by",
        _on,
        switch="true",
        shown="off",
        chart_value="leaderElection.enabled",
    ),
    Option(
        "lease_namespace",
        "--lease-namespace",
        "RESTARTER_LEASE_NAMESPACE",
        "namespace of the Lease",
        _text,
        default="default",
        metavar="NAMESPACE",
        fallback="POD_NAMESPACE",
    ),
    # The chart names the Lease after its release, so this has no value of its own there.
    Option(
        "lease_name",
        "--lease-name",
        "RESTARTER_LEASE_NAME",
        "name of the Lease",
        _text,
        default="restarter",
        metavar="NAME",
    ),
    Option(
        "reloader_annotations",
        "--reloader-annotations",
        "RESTARTER_RELOADER_ANNOTATIONS",
        "honour Reloader's workload annotations (reloader.stakater.com/auto and the rest) "
        "as opt-ins",
        _on,
        switch="true",
        shown="off",
        chart_value="reloaderAnnotations.enabled",
    ),
    Option(
        "rollouts",
        "--no-rollouts",
        "RESTARTER_ROLLOUTS",
        "never restart Argo Rollouts, even when their CRD is served (no discovery, list or "
        "watch of them)",
        _off,
        switch="false",
        shown="restarted",
        chart_value="rollouts.enabled",
    ),
    Option(
        "reloader_window",
        "--reloader-window",
        "RESTARTER_RELOADER_WINDOW",
        "window of a workload that opted in through Reloader's annotations alone: now or "
        "HH.MM (several joined by _)",
        _reloader_window,
        default="now",
        metavar="WINDOW",
        chart_value="reloaderAnnotations.window",
    ),
    Option(
        "hold",
        "--hold",
        "RESTARTER_HOLD",
        "hold every restart (workloads stay pending) while set, for this reason",
        _stripped,
        metavar="REASON",
        shown="none",
        chart_value="hold",
    ),
    Option(
        "certificate_margin",
        "--certificate-margin",
        "RESTARTER_CERTIFICATE_MARGIN",
        "restart a source's dependents at the latest this long before the certificate "
        "they run with expires, even before their window",
        _length("certificate margin"),
        default="1h",
        metavar="LENGTH",
        chart_value="certificateMargin",
    ),
    *GATES,
    Option(
        "notify_batch",
        "--notify-batch",
        "RESTARTER_NOTIFY_BATCH",
        "send a namespace's notifications (URLs from RESTARTER_NOTIFY_URLS only) as one "
        "message once none joined them for this long",
        _length("notification batch"),
        default="1m",
        metavar="LENGTH",
        chart_value="notifications.batch",
    ),
    # apprise URLs carry tokens: a flag would show them in the process list, so only the
    # variable, which the chart takes from a Secret.
    Option(
        "notify_urls",
        None,
        "RESTARTER_NOTIFY_URLS",
        "apprise URLs told of restarts, holds and failed stamps (whitespace or comma list)",
        _notify_urls,
        chart_value="notifications.urlsSecret",
    ),
)


def option(flag: str) -> Option:
    """The option of this flag, for a command that takes the operator's own."""
    [found] = [each for each in OPTIONS if each.flag == flag]
    return found
