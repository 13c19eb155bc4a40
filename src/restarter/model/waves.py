"""Waves and the circuit breaker: a change reaches a first wave of its dependents, and the
rest only once that wave has rolled out and stayed healthy for the soak time.

A *change* is one source's new content (its change id). When it is stamped, the first
``FirstWave`` of its dependents, in a fixed order (``first_wave``), get marks of wave 1 and
the others marks of wave 2, and the source gets a ``WaveRecord`` naming the first wave.
Wave-2 marks wait until the record says ``released``; a first wave found unhealthy
(``assess``) makes it ``halted`` instead, and nothing more of that change restarts until the
source changes again, someone resumes it, or ``--halt-expiry`` passes.

Everything lives on the objects (the marks, the record on the source, the workloads'
``restart-ts`` and ``restarted-for``, their pods), so a restarted operator judges the
same. Pure: the caller reads the bodies; ``now`` is an argument.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from restarter.model import keys, kinds
from restarter.model.health import Health, Verdict

# The wave of a mark (the mark JSON's ``wave``): the first, or the rest. Read with the rest
# of a mark by ``model.pending``, and named here too.
from restarter.model.pending import FIRST as FIRST
from restarter.model.pending import REST as REST
from restarter.model.references import SOURCE_KINDS

#: At most this many workloads are named in a first wave (a percentage of thousands of
#: dependents would not fit in one annotation, and a first wave that large tests little).
MAX_FIRST_WAVE = 50

#: A change's state on its source, once judged.
RELEASED, HALTED = "released", "halted"


class WaveError(ValueError):
    """A first-wave size, soak or quiet time that cannot be read."""


@dataclass(frozen=True)
class FirstWave:
    """How many dependents of a change restart first: a count, or a percentage (at least
    one when above zero). Zero turns waves off: every dependent restarts as its window
    allows."""

    count: int = 1
    percent: bool = False

    @property
    def enabled(self) -> bool:
        return self.count > 0

    def size(self, dependents: int) -> int:
        if not self.enabled or dependents == 0:
            return 0
        wanted = math.ceil(dependents * self.count / 100) if self.percent else self.count
        return max(1, min(wanted, dependents, MAX_FIRST_WAVE))

    def __str__(self) -> str:
        return f"{self.count}%" if self.percent else str(self.count)


#: Waves off; and the operator's default first wave, one workload.
NO_WAVES, ONE = FirstWave(0), FirstWave(1)

_SIZE = re.compile(r"(\d{1,4})(%?)")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_first_wave(text: str) -> FirstWave:
    """``'1'``, ``'3'``, ``'10%'``; ``'0'`` turns waves off."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise WaveError(f"first wave {text!r} is not a count (1) or a percentage (10%)")
    count, percent = int(found.group(1)), bool(found.group(2))
    if percent and count > 100:
        raise WaveError(f"first wave {text!r} is more than 100%")
    return FirstWave(count, percent)


def parse_seconds(text: str, what: str) -> float:
    """``'0'``, ``'45s'``, ``'10m'``, ``'1h30m'``: a soak or quiet time, zero allowed, at
    most a day."""
    text = text.strip()
    if text == "0":
        return 0.0
    found = _DURATION.fullmatch(text)
    if not text or found is None:
        raise WaveError(f"{what} {text!r} is not like 0, 45s, 10m or 1h")
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total > 86400:
        raise WaveError(f"{what} {text!r} is longer than a day")
    return float(total)


def format_seconds(seconds: float) -> str:
    total = int(seconds)
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)


def source_overrides(
    annotations: Mapping[str, str] | None,
    first_wave: FirstWave,
    soak: float,
    quiet: float,
) -> tuple[FirstWave, float, float]:
    """The first wave, soak and quiet time of a source's changes: its annotations
    (``restarter.io/first-wave``, ``/soak``, ``/quiet``) over the operator's. WaveError
    names an annotation that cannot be read."""
    found = annotations or {}
    try:
        if keys.FIRST_WAVE in found:
            first_wave = parse_first_wave(found[keys.FIRST_WAVE])
        if keys.SOAK in found:
            soak = parse_seconds(found[keys.SOAK], keys.SOAK)
        if keys.QUIET in found:
            quiet = parse_seconds(found[keys.QUIET], keys.QUIET)
    except WaveError as error:
        raise WaveError(f"{error}; the operator's settings are used") from None
    return first_wave, soak, quiet


#: A dependent: (resource plural, name).
Dependent = tuple[str, str]


def named(dependent: Dependent) -> str:
    """``Deployment/web``: how a record, an Event and ``plan`` name a dependent."""
    plural, name = dependent
    return f"{kinds.WORKLOAD_KINDS[plural]}/{name}"


def dependent_of(text: str) -> Dependent | None:
    """``Deployment/web`` → ``("deployments", "web")``; None for a kind restarter lacks."""
    kind, _, name = text.partition("/")
    for plural, known in kinds.WORKLOAD_KINDS.items():
        if known == kind and name:
            return plural, name
    return None


def first_wave(
    dependents: Iterable[Dependent], size: FirstWave, prefer: Sequence[str] = ()
) -> tuple[Dependent, ...]:
    """The first wave of a change: the dependents whose names come first alphabetically
    (then by kind), after those named in ``prefer`` (the workload that failed the last
    change of the source, so that the fix is tried where the failure was seen)."""
    ordered = sorted(dependents, key=lambda dependent: (dependent[1], dependent[0]))
    preferred = [dependent for dependent in ordered if named(dependent) in prefer]
    ordered = preferred + [dependent for dependent in ordered if dependent not in preferred]
    return tuple(ordered[: size.size(len(ordered))])


@dataclass(frozen=True)
class WaveRecord:
    """The state of a source's latest change, on the source (``restarter.io/wave``)."""

    change: str
    first: tuple[str, ...]
    """The first wave, named ``Kind/name``."""

    soak: float
    state: str = ""
    """``""`` while the first wave is judged; ``RELEASED`` or ``HALTED``."""

    at: int | None = None
    """Epoch seconds when ``state`` was set."""

    why: str = ""
    """What released or halted it: the failed workload and its reason, never a value."""

    failed: str = ""
    """The first-wave workload that failed (``Kind/name``), when halted."""

    group: str = ""
    """The source's rollout group (``restarter.io/rollout-group``), if any."""

    since: float | None = None
    """Epoch seconds (to the millisecond) when the change was recorded on the source: the
    group's earliest unjudged change leads it (``pilot``). The time of the record, not of
    the change: a source recorded later never leads one already judging its first wave."""

    def to_annotation(self) -> str:
        value: dict[str, Any] = {"change": self.change, "first": list(self.first)}
        value["soak"] = int(self.soak)
        for name in ("state", "at", "why", "failed", "group", "since"):
            if getattr(self, name):
                value[name] = getattr(self, name)
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    def judged(self, state: str, now: dt.datetime, why: str, failed: str = "") -> WaveRecord:
        return dataclasses.replace(
            self, state=state, at=int(now.timestamp()), why=why[:512], failed=failed
        )


def read_record(annotations: Mapping[str, str] | None) -> WaveRecord | None:
    """The source's wave record; None when absent or not one restarter wrote."""
    try:
        value = json.loads((annotations or {}).get(keys.WAVE) or "")
        record = WaveRecord(
            change=str(value["change"]),
            first=tuple(str(name) for name in value["first"]),
            soak=float(value.get("soak", 0)),
            state=str(value.get("state", "")),
            at=int(value["at"]) if "at" in value else None,
            why=str(value.get("why", "")),
            failed=str(value.get("failed", "")),
            group=str(value.get("group", "")),
            since=float(value["since"]) if "since" in value else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return record if record.state in ("", RELEASED, HALTED) else None


def record_patch(record: WaveRecord, resource_version: str | None = None) -> dict[str, Any]:
    """The source patch that writes ``record`` (conditional on ``resource_version`` when
    given: two judges of one change never both post its halt)."""
    metadata: dict[str, Any] = {"annotations": {keys.WAVE: record.to_annotation()}}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


def judge(record: WaveRecord, verdicts: Mapping[str, Verdict]) -> tuple[str, str, str]:
    """The state of a change from its first wave's verdicts (by ``Kind/name``): ``HALTED``
    as soon as one is unhealthy, ``RELEASED`` once every one is healthy (or gone), else
    ``""``; with why, and the workload that failed."""
    for name in record.first:
        verdict = verdicts.get(name)
        if verdict is not None and verdict.health is Health.UNHEALTHY:
            return HALTED, f"{name} failed: {verdict.why}", name
    waiting = [
        f"{name} {verdicts[name].why}"
        for name in record.first
        if name in verdicts and verdicts[name].health not in (Health.HEALTHY, Health.GONE)
    ]
    if waiting:
        return "", "; ".join(waiting), ""
    soak = format_seconds(record.soak)
    return RELEASED, f"first wave {', '.join(record.first)} healthy for {soak}", ""


@dataclass(frozen=True)
class MarkHold:
    """Why the breaker keeps one mark's restart back."""

    why: str
    halted: bool
    """True when the change is halted (a Warning); False while its first wave is judged."""


def mark_hold(
    wave: int | None,
    change: str | None,
    record: WaveRecord | None,
    newer_than: int | None,
) -> MarkHold | None:
    """Whether a mark of wave ``wave`` for ``change`` may restart now, given the source's
    record (``newer_than``: how the record's change compares with the mark's, as
    ``compare_versions`` answers: 1 newer, 0 the same, -1 older, None unknown).

    A first-wave mark waits only for a halt of its own change. A mark of the rest waits
    until the source's latest change is released: a restart now reads the source as it
    is, whichever change stamped the mark."""
    if wave is None:
        return None
    if record is None or (newer_than is not None and newer_than < 0):
        if wave == FIRST:
            return None
        return MarkHold("its first wave is not chosen yet", False)
    if record.state == HALTED:
        if wave == FIRST and newer_than != 0:
            return None
        return MarkHold(f"change halted: {record.why}", True)
    if wave == FIRST or record.state == RELEASED:
        return None
    first = ", ".join(record.first)
    return MarkHold(f"waiting for its first wave ({first})", False)


def released_by_hand(
    record: WaveRecord, resume: str | None, now: dt.datetime, expiry: float | None
) -> str | None:
    """Why a halted change goes on: resumed on its source for this change (``resume``), or
    halted for longer than ``expiry`` seconds; None while it stays halted."""
    if record.state != HALTED:
        return None
    if resume is not None and resume.strip() == record.change:
        return f"resumed by {keys.RESUME}"
    if expiry and record.at is not None and now.timestamp() - record.at >= expiry:
        return f"halted for longer than the halt expiry ({format_seconds(expiry)})"
    return None


def group_of(metadata: Mapping[str, Any]) -> str:
    """A source's rollout group: its label, else its annotation; empty for none."""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    return str(labels.get(keys.ROLLOUT_GROUP) or annotations.get(keys.ROLLOUT_GROUP) or "")


#: A source: (namespace, kind, name).
SourceKey = tuple[str, str, str]


def pilot(members: Mapping[SourceKey, WaveRecord]) -> SourceKey | None:
    """The member of a rollout group whose first wave judges the group's change: of those
    whose change is not judged yet, the one recorded first (then by namespace, kind and
    name). Changes recorded while it is judged join it; one recorded after starts anew."""
    unjudged = [key for key, record in members.items() if not record.state]
    if not unjudged:
        return None
    return min(unjudged, key=lambda key: (members[key].since or 0, key))


def group_verdict(
    members: Mapping[SourceKey, WaveRecord], key: SourceKey, record: WaveRecord
) -> tuple[SourceKey, WaveRecord] | None:
    """The verdict of the group's change that ``record`` (unjudged) belongs to, and the
    member it was first written on (the pilot, recorded first): a member whose own change
    was recorded no later than ``record``, judged no earlier than ``record`` was recorded.
    A source the verdict is still being spread to takes it, rather than judging a first
    wave of its own. The verdict's time is whole seconds: a halt also takes what was
    recorded in its second, a release does not (that source tries its own first wave)."""
    if record.state or record.since is None:
        return None
    joined = [
        (known.since, member, known)
        for member, known in members.items()
        if member != key
        and known.state
        and known.at is not None
        and known.since is not None
        and known.since <= record.since <= known.at + (1 if known.state == HALTED else 0)
    ]
    if not joined:
        return None
    _, member, known = min(joined)
    return member, known


def named_source(key: SourceKey) -> str:
    """``namespace/Kind/name``: a source as its group's verdicts and holds name it."""
    return f"{key[0]}/{SOURCE_KINDS[key[1]]}/{key[2]}"


def group_judged(
    record: WaveRecord, pilot: SourceKey, verdict: WaveRecord, now: dt.datetime
) -> WaveRecord:
    """``record`` judged by its rollout group's verdict, written on ``pilot`` (or, when
    taken from another member the verdict was spread to, naming what the pilot decided)."""
    decided = verdict.why.split(" decided: ")[-1]
    where = named_source(pilot)
    why = f"with its rollout group {record.group}, whose first wave ({where}) decided: {decided}"
    return record.judged(verdict.state, now, why)
