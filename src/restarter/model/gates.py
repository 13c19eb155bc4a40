"""Gates: a restart that is due, but that should not start now.

Two gates, both off unless configured: alerts firing in Alertmanager that match a filter
(optionally only those labelled with the workload's namespace), and pods matching a label
selector (a backup, a migration). A gate whose source cannot be read holds (fail closed)
unless the operator is told to fail open. Pure: the caller reads the alerts and pods.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from restarter.model.holds import ALERT, GATE, POD, Hold


class GateError(ValueError):
    """A filter or selector that cannot be used; raised at start-up."""


@dataclass(frozen=True)
class Matcher:
    """One label matcher, as Alertmanager writes them: ``=``, ``!=``, ``=~``, ``!~``."""

    label: str
    operator: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        found = labels.get(self.label, "")
        if self.operator == "=":
            return found == self.value
        if self.operator == "!=":
            return found != self.value
        hit = re.fullmatch(self.value, found) is not None
        return hit if self.operator == "=~" else not hit


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"?([^",]*)"?\s*')


def parse_filter(text: str) -> tuple[Matcher, ...]:
    """``alertname=~"Node.*",severity="critical"`` → matchers; an empty text matches every
    alert. GateError names a part that cannot be read."""
    matchers = []
    for part in (p for p in text.split(",") if p.strip()):
        found = _MATCHER.fullmatch(part)
        if found is None:
            raise GateError(f"alert filter part {part.strip()!r} is not like severity=critical")
        label, operator, value = found.groups()
        if operator in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as error:
                raise GateError(f"alert filter {label}{operator}{value!r}: {error}") from None
        matchers.append(Matcher(label, operator, value))
    return tuple(matchers)


def firing(
    alerts: Iterable[Mapping[str, Any]], matchers: Sequence[Matcher], namespace: str | None
) -> list[str]:
    """The names of the active alerts that match every matcher (and carry the label
    ``namespace`` equal to ``namespace``, when given), as Alertmanager's v2 API lists them."""
    names = []
    for alert in alerts:
        state = (alert.get("status") or {}).get("state", "active")
        labels = alert.get("labels") or {}
        if state != "active" or not all(matcher.matches(labels) for matcher in matchers):
            continue
        if namespace is not None and labels.get("namespace") != namespace:
            continue
        names.append(str(labels.get("alertname", "unnamed alert")))
    return sorted(set(names))


def alert_hold(names: Sequence[str]) -> Hold | None:
    """The hold of the firing alerts that match (the first named, the count told)."""
    if not names:
        return None
    more = f" and {len(names) - 1} more" if len(names) > 1 else ""
    return Hold(ALERT, names[0], f"alert {names[0]}{more} firing in Alertmanager")


def pod_hold(pods: Sequence[str], selector: str) -> Hold | None:
    """The hold of blocking pods (``namespace/name``) that exist."""
    if not pods:
        return None
    more = f" and {len(pods) - 1} more" if len(pods) > 1 else ""
    return Hold(POD, pods[0], f"blocking pod {pods[0]}{more} matches {selector!r}")


def unreadable(what: str, why: str) -> Hold:
    """The hold of a gate whose source could not be read (fail closed)."""
    return Hold(GATE, what, f"{what} could not be read ({why}); restarts wait", True)


@dataclass(frozen=True)
class GateSettings:
    alertmanager_url: str = ""
    """Alertmanager's base URL (``http://alertmanager.monitoring:9093``); empty: no alert gate."""

    alert_filter: tuple[Matcher, ...] = ()
    """Matchers an alert must meet to hold restarts; none: every firing alert holds."""

    blocking_pods: str = ""
    """Label selector of pods whose existence holds restarts; empty: no pod gate."""

    namespace_only: bool = False
    """Only alerts labelled with, and pods in, the workload's own namespace hold it."""

    fail_open: bool = False
    """A gate that cannot be read lets restarts go (a Warning still says so)."""

    @property
    def enabled(self) -> bool:
        return bool(self.alertmanager_url or self.blocking_pods)
