"""The operator's settings: one frozen object built from the environment and the CLI."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from restarter.model.gates import GateError, GateSettings, parse_filter
from restarter.model.limits import Limits
from restarter.model.namespaces import NamespaceSelector, SelectorError, parse_selector
from restarter.model.schedule import ScheduleError, parse_length, parse_zone
from restarter.model.waves import (
    ONE,
    FirstWave,
    WaveError,
    format_seconds,
    parse_first_wave,
    parse_seconds,
)
from restarter.model.windows import AT_CRON, format_length, from_workload


class SettingsError(ValueError):
    """A setting that cannot be used; raised at start-up, before anything is watched."""


@dataclass(frozen=True)
class Settings:
    timezone: str = "UTC"
    """IANA zone in which every HH.MM window is read (``RESTARTER_TIMEZONE``)."""

    window_length: dt.timedelta = dt.timedelta(hours=1)
    """How long a window stays open after HH.MM; restarts only start inside it
    (``RESTARTER_WINDOW_LENGTH``, like ``1h``, ``90m``)."""

    timer_interval: float = 60.0
    """Seconds between checks of each workload whose window is open and that has not
    restarted yet (pacing held it back, or it is paused) (``RESTARTER_TIMER_INTERVAL``)."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means every namespace (``RESTARTER_NAMESPACES``, comma list)."""

    namespace_selector: str = ""
    """Label selector of the namespaces to watch, like ``team=payments,tier in (web)``; empty
    means none. Followed while running; not with ``namespaces``
    (``RESTARTER_NAMESPACE_SELECTOR``)."""

    liveness_endpoint: str | None = None
    """``http://0.0.0.0:8080/healthz`` serves kopf's health check; None disables it
    (``RESTARTER_LIVENESS``)."""

    log_level: str = "INFO"
    """DEBUG, INFO, WARNING or ERROR (``RESTARTER_LOG_LEVEL``)."""

    log_format: str = "plain"
    """``plain`` or ``json`` (``RESTARTER_LOG_FORMAT``)."""

    max_in_flight: int = 10
    """Restarts whose rollout is not complete, at most; 0: no limit
    (``RESTARTER_MAX_IN_FLIGHT``)."""

    max_per_minute: int = 30
    """Restarts started in any minute, at most; 0: no limit (``RESTARTER_MAX_PER_MINUTE``)."""

    rollout_timeout: dt.timedelta = dt.timedelta(minutes=10)
    """An incomplete rollout holds its slot this long, then a Warning frees it
    (``RESTARTER_ROLLOUT_TIMEOUT``)."""

    max_timers: int = 200
    """Pending workloads held by kopf's timers at once, at most: those whose window is open,
    earliest due first; the others wait in restarter's own table, without a timer or a
    finalizer (``RESTARTER_MAX_TIMERS``, at least 1)."""

    metrics_port: int = 0
    """Port of the Prometheus ``/metrics`` endpoint; 0: none (``RESTARTER_METRICS_PORT``)."""

    leader_election: bool = False
    """Act only while holding a Lease, so that replicas can stand by
    (``RESTARTER_LEADER_ELECTION``: ``true``)."""

    lease_namespace: str = "default"
    """Namespace of the Lease (``RESTARTER_LEASE_NAMESPACE``, else ``POD_NAMESPACE``)."""

    lease_name: str = "restarter"
    """Name of the Lease (``RESTARTER_LEASE_NAME``)."""

    reloader_annotations: bool = False
    """Honour Reloader's workload annotations (``reloader.stakater.com/auto`` and the rest)
    as opt-ins (``RESTARTER_RELOADER_ANNOTATIONS``: ``true``)."""

    rollouts: bool = True
    """Restart Argo Rollouts too, once their CRD is served (``RESTARTER_ROLLOUTS``:
    ``false`` never asks, lists or watches them)."""

    reloader_window: str = "now"
    """The window of a workload that opted in through Reloader's annotations and has no
    ``restarter.io/restart-at``: ``now`` or ``HH.MM[_HH.MM...]``
    (``RESTARTER_RELOADER_WINDOW``)."""

    hold: str = ""
    """A reason: every restart is held (stays pending) while it is set; empty holds none
    (``RESTARTER_HOLD``)."""

    certificate_margin: dt.timedelta = dt.timedelta(hours=1)
    """A change of a source holding certificates restarts its dependents at the latest this
    long before the old certificate expires, even before their window; a source's
    ``restarter.io/certificate-margin`` overrides it (``RESTARTER_CERTIFICATE_MARGIN``)."""

    notify_urls: tuple[str, ...] = field(default=(), repr=False)
    """apprise URLs told of restarts, holds and failed stamps; they carry tokens, so they are
    read only from ``RESTARTER_NOTIFY_URLS`` (whitespace or comma separated; the chart
    takes it from a Secret), never from a flag, and never logged."""

    notify_batch: dt.timedelta = dt.timedelta(seconds=60)
    """A namespace's notices go out as one message once none joined them for this long
    (``RESTARTER_NOTIFY_BATCH``)."""

    gates: GateSettings = field(default_factory=GateSettings)
    """Alerts and blocking pods that hold due restarts (``RESTARTER_GATE_*``); off by default."""

    first_wave: FirstWave = ONE
    """How many of a change's dependents restart first, before the rest (a count, or a
    percentage: ``10%``); 0 turns waves off. A source's ``restarter.io/first-wave``
    overrides it (``RESTARTER_FIRST_WAVE``)."""

    soak: float = 60.0
    """Seconds the first wave must stay healthy after its rollout before the rest restart;
    a source's ``restarter.io/soak`` overrides it (``RESTARTER_SOAK``, like ``60s``)."""

    quiet: float = 10.0
    """Seconds every source of a workload must stay unchanged before it restarts, so that
    changes arriving together make one restart; a source's ``restarter.io/quiet``
    overrides it (``RESTARTER_QUIET``, like ``10s``; ``0``: none)."""

    halt_expiry: float = 0.0
    """Seconds after which a halted change goes on by itself; 0: it stays halted until the
    source changes again or is resumed (``RESTARTER_HALT_EXPIRY``)."""

    @property
    def pacing(self) -> Limits:
        return Limits(self.max_in_flight, self.max_per_minute, self.rollout_timeout.total_seconds())

    @property
    def selector(self) -> NamespaceSelector | None:
        """The parsed ``namespace_selector`` (build() has checked it), or None."""
        return parse_selector(self.namespace_selector) if self.namespace_selector else None

    @property
    def min_window_length(self) -> dt.timedelta:
        """A window must outlast two timer intervals, or it could pass between two ticks."""
        return dt.timedelta(seconds=2 * self.timer_interval)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("plain", "json")


def build(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    commands: Sequence[tuple[str, str]] = (),
) -> Settings:
    """Settings from CLI flags, falling back to RESTARTER_* variables, then defaults.

    ``commands`` are (name, what it does) of the subcommands, for ``--help``.
    """
    env = os.environ if environ is None else environ
    parser = _parser(env, commands)
    args = parser.parse_args(argv)

    namespaces = args.namespaces or [
        part.strip() for part in env.get("RESTARTER_NAMESPACES", "").split(",") if part.strip()
    ]
    selector = args.namespace_selector.strip()
    if selector and namespaces:
        raise SettingsError(
            "--namespace-selector (RESTARTER_NAMESPACE_SELECTOR) cannot be combined with "
            "--namespace (RESTARTER_NAMESPACES): give one or the other"
        )
    try:
        if selector:
            parse_selector(selector)
    except SelectorError as error:
        raise SettingsError(f"namespace selector: {error}") from None
    try:
        parse_zone(args.timezone)
        window_length = parse_length(args.window_length)
    except ScheduleError as error:
        raise SettingsError(str(error)) from None
    try:
        interval = float(args.timer_interval)
    except ValueError:
        raise SettingsError(f"timer interval {args.timer_interval!r} is not a number") from None
    # At least 1 s: restartedAt has whole seconds, so two restarts of one workload in the
    # same second would write the same value and the second would roll nothing.
    if not 1 <= interval <= 3600:
        raise SettingsError(f"timer interval {interval} must be between 1 and 3600 seconds")
    if window_length.total_seconds() <= 2 * interval:
        raise SettingsError(
            f"window length {args.window_length} must be longer than two timer intervals "
            f"({interval:g}s), or a window could pass between two checks"
        )
    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        raise SettingsError(f"log level {args.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    if args.log_format not in LOG_FORMATS:
        raise SettingsError(f"log format {args.log_format!r} is not plain or json")
    try:
        rollout_timeout = parse_length(args.rollout_timeout)
    except ScheduleError as error:
        raise SettingsError(f"rollout timeout: {error}") from None
    reloader_window = args.reloader_window.strip()
    try:
        if reloader_window == AT_CRON:
            raise ScheduleError("cron needs an expression: give a workload its own window")
        from_workload(
            {}, args.timezone, window_length, dt.timedelta(seconds=2 * interval), reloader_window
        )
    except ScheduleError as error:
        raise SettingsError(f"reloader window {args.reloader_window!r}: {error}") from None
    try:
        certificate_margin = parse_length(args.certificate_margin)
    except ScheduleError as error:
        raise SettingsError(f"certificate margin: {error}") from None
    notify_urls = tuple(env.get("RESTARTER_NOTIFY_URLS", "").replace(",", " ").split())
    try:
        notify_batch = parse_length(args.notify_batch)
    except ScheduleError as error:
        raise SettingsError(f"notification batch: {error}") from None
    return Settings(
        **_waves(args),
        gates=gates_of(args),
        notify_urls=notify_urls,
        notify_batch=notify_batch,
        hold=args.hold.strip(),
        certificate_margin=certificate_margin,
        max_in_flight=_count("max in flight", args.max_in_flight),
        max_per_minute=_count("max per minute", args.max_per_minute),
        rollout_timeout=rollout_timeout,
        max_timers=_at_least_one("max timers", args.max_timers),
        metrics_port=_port(args.metrics_port),
        leader_election=args.leader_election,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        timezone=args.timezone,
        window_length=window_length,
        timer_interval=interval,
        namespaces=tuple(dict.fromkeys(namespaces)),
        namespace_selector=selector,
        liveness_endpoint=args.liveness or None,
        log_level=level,
        log_format=args.log_format,
        reloader_annotations=args.reloader_annotations,
        reloader_window=reloader_window,
        rollouts=not args.no_rollouts,
    )


def _parser(env: Mapping[str, str], commands: Sequence[tuple[str, str]]) -> argparse.ArgumentParser:
    """The operator's flags; each one's help names its variable and its default."""
    defaults = Settings()
    usage = "\n       ".join(
        ["%(prog)s [options]", *(f"%(prog)s {name} [options]" for name, _ in commands)]
    )
    epilog = "commands (each with its own --help):\n" + "\n".join(
        textwrap.fill(what, 79, initial_indent=f"  {name:<20}", subsequent_indent=" " * 22)
        for name, what in commands
    )
    parser = argparse.ArgumentParser(
        prog="restarter",
        usage=usage,
        description=textwrap.fill(
            "Run the restarter operator. Every option falls back to the environment "
            "variable it names, then to its default.",
            79,
        ),
        epilog=epilog if commands else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    def option(flag: str, variable: str, default: str, what: str, metavar: str) -> None:
        parser.add_argument(
            flag,
            default=env.get(variable, default),
            metavar=metavar,
            help=f"{what} [{variable}; default: {default}]",
        )

    def switch(flag: str, variable: str, value: str, what: str, otherwise: str) -> None:
        parser.add_argument(
            flag,
            action="store_true",
            default=env.get(variable, "").lower() == value,
            help=f"{what} [{variable}={value}; default: {otherwise}]",
        )

    option(
        "--timezone",
        "RESTARTER_TIMEZONE",
        defaults.timezone,
        "IANA zone in which HH.MM windows are read, unless a source names its own",
        "ZONE",
    )
    option(
        "--window-length",
        "RESTARTER_WINDOW_LENGTH",
        format_length(defaults.window_length),
        "how long a window stays open (90m, 2h); restarts only start inside it",
        "LENGTH",
    )
    option(
        "--timer-interval",
        "RESTARTER_TIMER_INTERVAL",
        f"{defaults.timer_interval:g}",
        "seconds between checks of each workload whose window is open but that has not "
        "restarted yet (pacing, paused), 1 to 3600",
        "SECONDS",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        dest="namespaces",
        metavar="NAMESPACE",
        help="watch only this namespace; repeatable "
        "[RESTARTER_NAMESPACES, comma list; default: every namespace]",
    )
    parser.add_argument(
        "--namespace-selector",
        default=env.get("RESTARTER_NAMESPACE_SELECTOR", ""),
        metavar="SELECTOR",
        help="watch only the namespaces whose labels match, like 'team=payments,tier in "
        "(web)', followed as they are relabelled; not with --namespace "
        "[RESTARTER_NAMESPACE_SELECTOR; default: none]",
    )
    parser.add_argument(
        "--liveness",
        default=env.get("RESTARTER_LIVENESS"),
        metavar="URL",
        help="serve kopf's health check at this URL, like http://0.0.0.0:8080/healthz "
        "[RESTARTER_LIVENESS; default: none]",
    )
    option(
        "--log-level",
        "RESTARTER_LOG_LEVEL",
        defaults.log_level,
        f"log level: {', '.join(LOG_LEVELS)}",
        "LEVEL",
    )
    option(
        "--log-format",
        "RESTARTER_LOG_FORMAT",
        defaults.log_format,
        "log lines: plain or json",
        "FORMAT",
    )
    option(
        "--max-in-flight",
        "RESTARTER_MAX_IN_FLIGHT",
        str(defaults.max_in_flight),
        "restarts whose rollout is not complete, at most; 0: no limit",
        "COUNT",
    )
    option(
        "--max-per-minute",
        "RESTARTER_MAX_PER_MINUTE",
        str(defaults.max_per_minute),
        "restarts started in any minute, at most; 0: no limit",
        "COUNT",
    )
    option(
        "--rollout-timeout",
        "RESTARTER_ROLLOUT_TIMEOUT",
        format_length(defaults.rollout_timeout),
        "an incomplete rollout holds its pacing slot this long, then a Warning frees it",
        "LENGTH",
    )
    option(
        "--first-wave",
        "RESTARTER_FIRST_WAVE",
        str(defaults.first_wave),
        "how many of a change's dependents restart first (a count, or a percentage of them "
        "with a trailing percent sign), the rest only once those stayed healthy for the soak "
        "time; 0: no waves",
        "COUNT",
    )
    option(
        "--soak",
        "RESTARTER_SOAK",
        format_seconds(defaults.soak),
        "how long the first wave must stay healthy after its rollout before the rest "
        "restart (0, 45s, 5m)",
        "LENGTH",
    )
    option(
        "--quiet",
        "RESTARTER_QUIET",
        format_seconds(defaults.quiet),
        "how long a workload's sources must stay unchanged before it restarts, so that "
        "changes arriving together make one restart (0: none)",
        "LENGTH",
    )
    option(
        "--halt-expiry",
        "RESTARTER_HALT_EXPIRY",
        format_seconds(defaults.halt_expiry),
        "a change halted by the circuit breaker goes on by itself after this long; 0: it "
        "stays halted until the source changes again or is resumed",
        "LENGTH",
    )
    option(
        "--max-timers",
        "RESTARTER_MAX_TIMERS",
        str(defaults.max_timers),
        "pending workloads whose window is open handed to timers at once, at most (each "
        "holds its body in memory); the rest wait, earliest due first",
        "COUNT",
    )
    option(
        "--metrics-port",
        "RESTARTER_METRICS_PORT",
        str(defaults.metrics_port),
        "port of the Prometheus /metrics endpoint; 0: none",
        "PORT",
    )
    switch(
        "--leader-election",
        "RESTARTER_LEADER_ELECTION",
        "true",
        "act only while holding a Lease, so that replicas can stand by",
        "off",
    )
    parser.add_argument(
        "--lease-namespace",
        default=env.get("RESTARTER_LEASE_NAMESPACE")
        or env.get("POD_NAMESPACE")
        or defaults.lease_namespace,
        metavar="NAMESPACE",
        help="namespace of the Lease [RESTARTER_LEASE_NAMESPACE, else POD_NAMESPACE; "
        f"default: {defaults.lease_namespace}]",
    )
    option("--lease-name", "RESTARTER_LEASE_NAME", defaults.lease_name, "name of the Lease", "NAME")
    switch(
        "--reloader-annotations",
        "RESTARTER_RELOADER_ANNOTATIONS",
        "true",
        "honour Reloader's workload annotations (reloader.stakater.com/auto and the rest) "
        "as opt-ins",
        "off",
    )
    switch(
        "--no-rollouts",
        "RESTARTER_ROLLOUTS",
        "false",
        "never restart Argo Rollouts, even when their CRD is served (no discovery, list or "
        "watch of them)",
        "restarted",
    )
    option(
        "--reloader-window",
        "RESTARTER_RELOADER_WINDOW",
        defaults.reloader_window,
        "window of a workload that opted in through Reloader's annotations alone: now or "
        "HH.MM (several joined by _)",
        "WINDOW",
    )
    parser.add_argument(
        "--hold",
        default=env.get("RESTARTER_HOLD", defaults.hold),
        metavar="REASON",
        help="hold every restart (workloads stay pending) while set, for this reason "
        "[RESTARTER_HOLD; default: none]",
    )
    option(
        "--certificate-margin",
        "RESTARTER_CERTIFICATE_MARGIN",
        format_length(defaults.certificate_margin),
        "restart a source's dependents at the latest this long before the certificate "
        "they run with expires, even before their window",
        "LENGTH",
    )
    gate_arguments(parser, env)
    option(
        "--notify-batch",
        "RESTARTER_NOTIFY_BATCH",
        format_length(defaults.notify_batch),
        "send a namespace's notifications (URLs from RESTARTER_NOTIFY_URLS only) as one "
        "message once none joined them for this long",
        "LENGTH",
    )
    return parser


def _waves(args: argparse.Namespace) -> dict[str, Any]:
    """The first wave, soak, quiet time and halt expiry the flags ask for, checked."""
    try:
        return {
            "first_wave": parse_first_wave(args.first_wave),
            "soak": parse_seconds(args.soak, "soak"),
            "quiet": parse_seconds(args.quiet, "quiet time"),
            "halt_expiry": parse_seconds(args.halt_expiry, "halt expiry"),
        }
    except WaveError as error:
        raise SettingsError(str(error)) from None


def gate_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """The gates' flags, for the operator and for ``restarter plan`` alike."""

    def switch(flag: str, variable: str, value: str, what: str, otherwise: str) -> None:
        parser.add_argument(
            flag,
            action="store_true",
            default=env.get(variable, "").lower() == value,
            help=f"{what} [{variable}={value}; default: {otherwise}]",
        )

    parser.add_argument(
        "--gate-alertmanager-url",
        default=env.get("RESTARTER_GATE_ALERTMANAGER_URL", ""),
        metavar="URL",
        help="hold due restarts while alerts fire in this Alertmanager (its v2 API) "
        "[RESTARTER_GATE_ALERTMANAGER_URL; default: none]",
    )
    parser.add_argument(
        "--gate-alert-filter",
        default=env.get("RESTARTER_GATE_ALERT_FILTER", ""),
        metavar="MATCHERS",
        help="only alerts matching these matchers hold restarts, like "
        "'severity=critical,alertname=~Node.*' [RESTARTER_GATE_ALERT_FILTER; default: every "
        "firing alert]",
    )
    parser.add_argument(
        "--gate-blocking-pods",
        default=env.get("RESTARTER_GATE_BLOCKING_PODS", ""),
        metavar="SELECTOR",
        help="hold due restarts while pods matching this label selector exist "
        "[RESTARTER_GATE_BLOCKING_PODS; default: none]",
    )
    switch(
        "--gate-namespace-only",
        "RESTARTER_GATE_NAMESPACE_ONLY",
        "true",
        "only alerts labelled with, and blocking pods in, a workload's own namespace hold it",
        "off",
    )
    switch(
        "--gate-fail-open",
        "RESTARTER_GATE_FAIL_OPEN",
        "true",
        "let restarts go when a gate cannot be read (a warning is logged and counted)",
        "off: restarts wait",
    )


def gates_of(args: argparse.Namespace) -> GateSettings:
    """The gates the flags ask for, checked: a URL, filter or selector that cannot be read
    stops the start (a filter without a URL reads nothing)."""
    url = args.gate_alertmanager_url.strip()
    if url and not url.startswith(("http://", "https://")):
        raise SettingsError(f"gate Alertmanager URL {url!r} must begin with http:// or https://")
    pods = args.gate_blocking_pods.strip()
    try:
        matchers = parse_filter(args.gate_alert_filter)
        if pods:
            parse_selector(pods)
    except GateError as error:
        raise SettingsError(str(error)) from None
    except SelectorError as error:
        raise SettingsError(f"blocking pod selector: {error}") from None
    return GateSettings(
        alertmanager_url=url,
        alert_filter=matchers,
        blocking_pods=pods,
        namespace_only=args.gate_namespace_only,
        fail_open=args.gate_fail_open,
    )


def _count(what: str, text: str) -> int:
    """A limit: a whole number, 0 meaning none."""
    if not (text.isascii() and text.isdigit()):
        raise SettingsError(f"{what} {text!r} must be a whole number ≥ 0 (0: no limit)")
    return int(text)


def _at_least_one(what: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise SettingsError(f"{what} {text!r} must be a whole number ≥ 1")
    return int(text)


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise SettingsError(f"metrics port {text!r} must be 0 (off) or a port up to 65535")
    return int(text)
