"""The plan of one change's fan-out, decided without the API: which dependents are
stamped, in which window each, and with which patch (one per distinct set of keys read
and window: most dependents share one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from restarter.model import stamps, waves, windows
from restarter.model.optin import OptIn
from restarter.model.references import KeyNames
from restarter.model.windows import ScheduleError

#: A dependent workload: (resource plural, name).
Dependent = tuple[str, str]


class Target(NamedTuple):
    """A workload a change of a source concerns."""

    plural: str
    name: str
    keys: KeyNames
    """The changed keys it reads (None: unknown; a ``PossiblyChanged`` set: keys whose
    digest bucket changed)."""

    optin: OptIn | None
    """Its opt-in when it selects this source: its window applies; else the source's."""


class WindowSettings(Protocol):
    """The settings a workload's own window is read with (``services.settings.Settings``)."""

    @property
    def timezone(self) -> str: ...

    @property
    def window_length(self) -> dt.timedelta: ...

    @property
    def min_window_length(self) -> dt.timedelta: ...

    @property
    def reloader_window(self) -> str: ...


@dataclass(frozen=True)
class UnreadableWindow:
    """A dependent that opted in with a window restarter cannot read: not stamped."""

    plural: str
    name: str
    error: ScheduleError


@dataclass(frozen=True)
class FanOut:
    requests: dict[Dependent, windows.WindowRequest]
    """Every dependent to stamp, with the window it is stamped for."""

    reads: dict[Dependent, KeyNames]
    """The changed keys each dependent to stamp reads."""

    patches: dict[tuple[KeyNames, windows.WindowRequest, int | None], dict[str, Any]]
    """The stamp of each distinct (keys read, window, wave)."""

    not_asked: int
    """Readers of a changed key that did not ask for this source's window (no label's
    window, and no opt-in for it), or whose own window cannot be read."""

    unreadable: tuple[UnreadableWindow, ...]

    first: tuple[Dependent, ...] = ()
    """The change's first wave (``model.waves``); empty when it has no waves: waves are
    off, or every dependent would be in the first."""

    @property
    def targets(self) -> list[Dependent]:
        """The dependents to stamp, sorted."""
        return sorted(self.requests)

    def wave_of(self, dependent: Dependent) -> int | None:
        if not self.first:
            return None
        return waves.FIRST if dependent in self.first else waves.REST

    def patch_for(self, dependent: Dependent) -> dict[str, Any]:
        wave = self.wave_of(dependent)
        return self.patches[self.reads[dependent], self.requests[dependent], wave]


def plan_fan_out(
    *,
    kind: str,
    name: str,
    readers: Sequence[Target],
    source_window: windows.WindowRequest | None,
    settings: WindowSettings,
    change_id: str,
    now: dt.datetime,
    deadline: Mapping[str, str] | None = None,
    first_wave: waves.FirstWave = waves.NO_WAVES,
    prefer: Sequence[str] = (),
    quiet: float = 0.0,
    grouped: bool = False,
) -> FanOut:
    """Only the workloads that read a changed key (``readers``: all of them when which
    keys changed is unknown), each with the changed keys it reads, in its own window when
    it opted in for this source (the workload's window wins), else in the source's
    (``source_window``; None: the label's cannot be read, or there is no label). Every
    stamp also carries ``deadline``: the certificate deadline of the data its pods run
    (``certificates.stamp_deadline``), if any, and its wave: the first ``first_wave`` of
    them (``waves.first_wave``, ``prefer`` first) and then the rest, and ``quiet``. A source
    of a rollout group (``grouped``) has waves even when all its dependents are in its
    first: the group's first wave may be another source's."""
    requests: dict[Dependent, windows.WindowRequest] = {}
    unreadable: list[UnreadableWindow] = []
    for target in readers:
        if target.optin is not None:
            try:
                requests[target.plural, target.name] = windows.from_workload(
                    target.optin.window_annotations(),
                    settings.timezone,
                    settings.window_length,
                    settings.min_window_length,
                    settings.reloader_window,
                )
            except ScheduleError as error:
                unreadable.append(UnreadableWindow(target.plural, target.name, error))
        elif source_window is not None:
            requests[target.plural, target.name] = source_window
    reads = {
        (target.plural, target.name): target.keys
        for target in readers
        if (target.plural, target.name) in requests
    }
    first = waves.first_wave(requests, first_wave, prefer)
    if len(first) == len(requests) and not grouped:
        first = ()  # no rest to protect: no waves
    fan_out = FanOut(requests, reads, {}, len(readers) - len(requests), tuple(unreadable), first)
    for dependent in requests:
        read, request, wave = reads[dependent], requests[dependent], fan_out.wave_of(dependent)
        if (read, request, wave) in fan_out.patches:
            continue
        extra = {"wave": wave} if wave is not None else {}
        if quiet:
            extra["quiet"] = int(quiet)
        patch = stamps.stamp_patch(kind, name, now, request, change_id, read, extra)
        patch["metadata"]["annotations"] |= deadline or {}
        fan_out.patches[read, request, wave] = patch
    return fan_out
