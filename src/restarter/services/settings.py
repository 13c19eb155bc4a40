"""The operator's settings: one frozen object built from the environment and the CLI."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from restarter.model.gates import GateSettings
from restarter.model.limits import Limits
from restarter.model.namespaces import NamespaceSelector, parse_selector
from restarter.model.waves import ONE, FirstWave
from restarter.model.windows import ScheduleError, from_workload
from restarter.services.option_reading import SettingsError as SettingsError
from restarter.services.options import GATES, OPTIONS


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

    csi: bool = False
    """Restart the workloads that mount a SecretProviderClass through the Secrets Store CSI
    Driver when the object versions their pods report change (``RESTARTER_CSI``:
    ``true``); without the driver's CRDs, one warning, and they are picked up once served."""

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


#: The options that are fields of Settings itself (the gates make one field).
_OPERATOR = tuple(option for option in OPTIONS if option not in GATES)


def build(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    commands: Sequence[tuple[str, str]] = (),
) -> Settings:
    """Settings from CLI flags, falling back to RESTARTER_* variables, then defaults.

    ``commands`` are (name, what it does) of the subcommands, for ``--help``.
    """
    env = os.environ if environ is None else environ
    args = _parser(env, commands).parse_args(argv)
    given = {option.field: option.given(args, env) for option in _OPERATOR}
    values = {option.field: option.parse(given[option.field]) for option in _OPERATOR}
    for check in TOGETHER:
        problem = check(values, given)
        if problem:
            raise SettingsError(problem)
    return Settings(**values, gates=gates_of(args))


def _parser(env: Mapping[str, str], commands: Sequence[tuple[str, str]]) -> argparse.ArgumentParser:
    """The operator's flags; each one's help names its variable and its default."""
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
    for option in OPTIONS:
        if option.flag:
            option.add_to(parser, env)
    return parser


def gate_arguments(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """The gates' flags, for ``restarter plan`` as for the operator."""
    for option in GATES:
        option.add_to(parser, env)


def gates_of(args: argparse.Namespace) -> GateSettings:
    """The gates the flags ask for, checked: a URL, filter or selector that cannot be read
    stops the start (a filter without a URL reads nothing)."""
    return GateSettings(
        **{
            option.field.removeprefix("gates."): option.parse(getattr(args, option.dest))
            for option in GATES
        }
    )


# The checks of options that are read together, after each has been read alone: each
# gets the values read and the texts given, and returns what is wrong, or None.


def _selector_or_namespaces(values: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    if values["namespace_selector"] and values["namespaces"]:
        return (
            "--namespace-selector (RESTARTER_NAMESPACE_SELECTOR) cannot be combined with "
            "--namespace (RESTARTER_NAMESPACES): give one or the other"
        )
    return None


def _window_outlasts_two_ticks(values: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    interval = values["timer_interval"]
    if values["window_length"].total_seconds() <= 2 * interval:
        return (
            f"window length {given['window_length']} must be longer than two timer intervals "
            f"({interval:g}s), or a window could pass between two checks"
        )
    return None


def _reloader_window_reads(values: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    """The Reloader window read as a workload's own would be, in the zone and length."""
    interval = dt.timedelta(seconds=2 * values["timer_interval"])
    try:
        from_workload(
            {}, values["timezone"], values["window_length"], interval, values["reloader_window"]
        )
    except ScheduleError as error:
        return f"reloader window {given['reloader_window']!r}: {error}"
    return None


TOGETHER: tuple[Callable[[Mapping[str, Any], Mapping[str, Any]], str | None], ...] = (
    _selector_or_namespaces,
    _window_outlasts_two_ticks,
    _reloader_window_reads,
)
