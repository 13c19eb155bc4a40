"""The circuit breaker: the blocker that keeps the rest of a change's dependents back until
its first wave has rolled out and stayed healthy, and halts the change when it did not
(``model.waves`` decides; this reads and writes the source's wave record).

A due restart with a wave mark asks ``blocks``. The source's metadata is read (once per
``TTL`` for every restart that asks); while its record is unjudged, the first wave's
workloads and their new pods are read and judged, and a verdict is written on the source
in one patch conditional on the version read, so two judges never both post it. A halted
change is released when the source carries ``restarter.io/resume`` with its id, or when
``--halt-expiry`` has passed. A source that changed again is judged by its new record.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import health, holds, keys, pending, reasons, waves
from restarter.model.health import Health, Verdict
from restarter.model.holds import Hold
from restarter.model.references import SOURCE_KINDS
from restarter.model.resource_versions import compare_versions
from restarter.model.waves import HALTED, RELEASED, WaveRecord
from restarter.restarting.blocking import Cached
from restarter.restarting.rollout_groups import RolloutGroups
from restarter.services import metrics
from restarter.services.events import Events
from restarter.services.kube.api import Api
from restarter.services.kube.errors import Conflict

log = logging.getLogger(__name__)

#: Seconds a source's wave record, once read (and judged), answers every restart that asks.
TTL = 1.0

#: ``Secret`` → ``secret``: the kind as the API client names it.
_KIND_OF = {named: kind for kind, named in SOURCE_KINDS.items()}


@dataclass(frozen=True)
class SourceState:
    """What the breaker reads of a source: its metadata alone."""

    metadata: Mapping[str, Any]

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.get("annotations") or {}

    @property
    def fanning_out(self) -> bool:
        """True while a change's stamps are being sent (its record is written after)."""
        return keys.CHANGE in self.annotations


def _older(record: WaveRecord | None, change: str | None) -> bool:
    """True when a record is missing, or is of a change older than the mark's ``change``."""
    if record is None:
        return True
    order = None if change is None else compare_versions(record.change, change)
    return order is not None and order < 0


class Breaker:
    """The blocker of changes whose first wave has not proven them (``blocking.Blocker``)."""

    name = "breaker"
    fails_open = False

    def __init__(
        self,
        api: Api,
        rollout_timeout: float,
        halt_expiry: float | None,
        *,
        groups: RolloutGroups | None = None,
        events: Events | None = None,
        read_only: bool = False,
    ) -> None:
        """``groups``: the rollout groups, shared with the source flow (None: a private
        index, filled by what this breaker reads). ``events``: where its verdicts are
        posted (None: nowhere, as when ``read_only``). ``read_only``: judge, but write no
        verdict and post nothing (``restarter plan``)."""
        self.api, self.rollout_timeout, self.halt_expiry = api, rollout_timeout, halt_expiry
        self.groups = groups or RolloutGroups()
        self.events, self.read_only = events, read_only
        self._sources: Cached[SourceState | None] = Cached(TTL)
        self._records: Cached[WaveRecord | None] = Cached(TTL)
        self._judging = threading.Lock()
        self._rereads: dict[tuple[waves.SourceKey, str | None], float] = {}
        self._reread_lock = threading.Lock()

    def blocks(self, workload: Mapping[str, Any], now: dt.datetime) -> Hold | None:
        metadata = workload.get("metadata") or {}
        namespace = metadata.get("namespace", "")
        for mark in pending.read(metadata.get("annotations")).marks:
            wave, source = mark.wave, mark.source
            if wave is None or source is None:
                continue
            held = self._mark_hold(namespace, source, wave, mark.change, now)
            if held is not None:
                return Hold(
                    holds.BREAKER, source, held.why, halted=held.halted, judging=not held.halted
                )
        return None

    def _mark_hold(
        self, namespace: str, source: str, wave: int, change: str | None, now: dt.datetime
    ) -> waves.MarkHold | None:
        named_kind, _, name = source.partition("/")
        kind = _KIND_OF.get(named_kind)
        if kind is None:
            return None
        key = (namespace, kind, name)
        found = self._judged(key, now)
        if found is not None and _older(found[1], change) and self._reread(key, change):
            # The mark is newer than what was read, maybe a second ago: read again (once
            # per change and TTL), or a stale read could let the rest of a new change
            # through before its record.
            found = self._read_again(key, now)
        if found is None:
            return None  # the source is gone: nothing left to judge the change by
        state, record = found
        leader = self._pilot(key, record)
        if leader is not None and record is not None and not record.state:
            # The pilot is judged here too: its own marks are all of its first wave, and
            # once those restarted nothing of it asks.
            self._judge(leader, now)
            found = self._judged(key, now)
            if found is None:
                return None
            state, record = found
            if not record or record.state or self._pilot(key, record) is None:
                leader = None
        if leader is not None and record is not None:
            return self._waiting_for_group(leader, record)
        if _older(record, change) and not state.fanning_out:
            # No record of this change, and none coming: its fan-out ended without one (the
            # API refused it), and nothing is held for a judgement that will never come. The
            # one answer that lets the rest through unjudged is confirmed on a read of its own.
            found = self._read_again(key, now)
            if found is None:
                return None
            state, record = found
            if _older(record, change) and not state.fanning_out:
                return None
        newer = (
            None if record is None or change is None else compare_versions(record.change, change)
        )
        return waves.mark_hold(wave, change, record, newer)

    def _read_again(
        self, key: waves.SourceKey, now: dt.datetime
    ) -> tuple[SourceState, WaveRecord | None] | None:
        """The source read again, whatever was remembered of it."""
        self._sources.forget(key)
        self._records.forget(key)
        return self._judged(key, now)

    def _reread(self, key: waves.SourceKey, change: str | None) -> bool:
        """True when a mark of ``change`` has not made the source be read again within
        ``TTL``: a fan-out's thousand marks ask once a second, not once each."""
        moment = time.monotonic()
        with self._reread_lock:
            last = self._rereads.get((key, change))
            if last is not None and moment - last < TTL:
                return False
            self._rereads = {k: v for k, v in self._rereads.items() if moment - v < TTL}
            self._rereads[key, change] = moment
        return True

    def _judged(
        self, key: waves.SourceKey, now: dt.datetime
    ) -> tuple[SourceState, WaveRecord | None] | None:
        """The source's metadata and its wave record, judged if due; None when it is gone."""
        namespace, kind, name = key
        state = self._state(namespace, kind, name)
        if state is None:
            return None
        # The record is judged from this very state: a record cached from an older read
        # (no record yet, while the change was fanning out) never pairs with a newer state
        # (record written, fan-out over), which would let the rest of a change through.
        record = self._records.get(
            key,
            lambda: self.record_of(namespace, kind, name, state, now),
            version=state.metadata.get("resourceVersion"),
        )
        return state, record

    def _waiting_for_group(self, leader: waves.SourceKey, record: WaveRecord) -> waves.MarkHold:
        """The hold of a source whose rollout group's change another source's first wave judges."""
        lead = self.groups.members(record.group).get(leader)
        first = ", ".join(lead.first) if lead is not None else "?"
        where = waves.named_source(leader)
        return waves.MarkHold(
            f"waiting for the first wave of its rollout group {record.group} ({where}: {first})",
            False,
        )

    def _state(self, namespace: str, kind: str, name: str) -> SourceState | None:
        def read() -> SourceState | None:
            found = self.api.read_source_metadata(kind, namespace, name)
            return None if found is None else SourceState(found.get("metadata") or {})

        return self._sources.get((namespace, kind, name), read)

    def _judge(self, key: waves.SourceKey, now: dt.datetime) -> None:
        """Judge a source's change (once per ``TTL``), spreading a verdict to its group."""
        if self._judged(key, now) is None:
            self.groups.record(key, None)

    def _pilot(self, key: waves.SourceKey, record: WaveRecord | None) -> waves.SourceKey | None:
        """The source whose first wave judges this one's change, when that is another
        source of its rollout group; None when it judges its own."""
        if record is None or not record.group:
            return None
        members = self.groups.members(record.group) | {key: record}
        leader = waves.pilot(members)
        return None if leader == key else leader

    def record_of(
        self, namespace: str, kind: str, name: str, state: SourceState, now: dt.datetime
    ) -> WaveRecord | None:
        """The source's wave record, judged now if it is not yet (and, for a rollout
        group's pilot, the same verdict spread to the group's other unjudged sources)."""
        record = waves.read_record(state.annotations)
        self.groups.record((namespace, kind, name), record)
        if record is None or record.state == RELEASED:
            return record
        if record.group and not record.state:
            joined = waves.group_verdict(
                self.groups.members(record.group), (namespace, kind, name), record
            )
            if joined is not None:  # the group's verdict, not spread to this source yet
                return self._join(namespace, kind, name, state, record, joined, now)
        if not record.state and self._pilot((namespace, kind, name), record) is not None:
            return record  # another source's first wave judges it
        with self._judging:
            if record.state == HALTED:
                resumed = waves.released_by_hand(
                    record, state.annotations.get(keys.RESUME), now, self.halt_expiry
                )
                if resumed is None:
                    return record
                how = "resumed" if "resumed" in resumed else "expired"
                judged = record.judged(RELEASED, now, resumed)
                return self._write(namespace, kind, name, state, judged, how)
            verdicts = {
                first: self._assess(namespace, kind, name, first, record, now)
                for first in record.first
            }
            verdict, why, failed = waves.judge(record, verdicts)
            if not verdict:
                return record
            written = self._write(
                namespace, kind, name, state, record.judged(verdict, now, why, failed), "healthy"
            )
            if record.group and written is not None and written.state == verdict:
                self._spread(record.group, (namespace, kind, name), written, now)
            return written

    def _join(
        self,
        namespace: str,
        kind: str,
        name: str,
        state: SourceState,
        record: WaveRecord,
        joined: tuple[waves.SourceKey, WaveRecord],
        now: dt.datetime,
    ) -> WaveRecord | None:
        """The group's verdict on this source, written as the pilot's spread writes it; it
        answers even when the write lost to the spread's (the next read shows that one)."""
        judged = waves.group_judged(record, *joined, now)
        self._write(namespace, kind, name, state, judged, "group")
        return judged

    def _spread(
        self, group: str, pilot: waves.SourceKey, verdict: WaveRecord, now: dt.datetime
    ) -> None:
        """The pilot's verdict on the other sources of its group whose change is not judged:
        one change, one breaker. Each is read fresh and written conditionally."""
        for key, known in self.groups.members(group).items():
            if key == pilot or known.state:
                continue
            for _ in range(2):  # a conflict (the source written meanwhile): read it again
                if self._spread_to(group, key, pilot, verdict, now):
                    break

    def _spread_to(
        self,
        group: str,
        key: waves.SourceKey,
        pilot: waves.SourceKey,
        verdict: WaveRecord,
        now: dt.datetime,
    ) -> bool:
        """The verdict on one source of the group, read fresh; False on a conflict."""
        namespace, kind, name = key
        found = self.api.read_source_metadata(kind, namespace, name)
        if found is None:
            self.groups.record(key, None)
            return True
        state = SourceState(found.get("metadata") or {})
        record = waves.read_record(state.annotations)
        if record is None or record.state or record.group != group:
            self.groups.record(key, record)
            return True
        judged = waves.group_judged(record, pilot, verdict, now)
        written = self._write(namespace, kind, name, state, judged, "group")
        return written is not None and bool(written.state)

    def _assess(
        self, namespace: str, kind: str, name: str, first: str, record: WaveRecord, now: dt.datetime
    ) -> Verdict:
        dependent = waves.dependent_of(first)
        if dependent is None:
            return Verdict(Health.GONE)
        plural, workload_name = dependent
        body = self.api.read_workload(plural, namespace, workload_name)
        token = keys.source_token(kind, name)
        pods: list[dict[str, Any]] = []
        annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
        if pending.restarted_for(annotations).get(token) == record.change:
            selector = health.template_selector(body or {})
            pods = self.api.list_pods(namespace, selector) if selector else []
        return health.assess(
            plural, body, pods, token, record.change, now, record.soak, self.rollout_timeout
        )

    def _write(
        self,
        namespace: str,
        kind: str,
        name: str,
        state: SourceState,
        judged: WaveRecord,
        how: str,
    ) -> WaveRecord | None:
        """Write the verdict, and tell it (Event, metric, log) once: a conflict means the
        source changed (another judge, or new data), and the next ask reads it again."""
        if self.read_only:
            return judged
        version = state.metadata.get("resourceVersion")
        try:
            written = self.api.patch_source(
                kind, namespace, name, waves.record_patch(judged, version)
            )
        except Conflict:
            written = None
        self._sources.forget((namespace, kind, name))
        self._records.forget((namespace, kind, name))
        if written is None:
            return waves.read_record(state.annotations)
        self.groups.record((namespace, kind, name), judged)
        source = {
            "apiVersion": "v1",
            "kind": SOURCE_KINDS[kind],
            "metadata": {
                "namespace": namespace,
                "name": name,
                "uid": state.metadata.get("uid", ""),
            },
        }
        if judged.state == HALTED:
            metrics.CHANGES_HALTED.labels(SOURCE_KINDS[kind]).inc()
            message = (
                f"change {judged.change} halted: {judged.why}; the rest of its dependents stay "
                f"pending. Fix the data (its next change starts again from a first wave), or "
                f"let it through: restarter resume -n {namespace} {kind}/{name}"
            )
        else:
            metrics.CHANGES_RELEASED.labels(how).inc()
            message = f"change {judged.change} released: {judged.why}"
        log.log(
            logging.WARNING if judged.state == HALTED else logging.INFO,
            f"{SOURCE_KINDS[kind]} {namespace}/{name}: {message}",
        )
        if self.events is not None:  # the verdict is written; a failed Event is logged
            self.events.post(
                source,
                reason=reasons.CHANGE_HALTED if judged.state == HALTED else reasons.CHANGE_RELEASED,
                message=message,
            )
        return judged
