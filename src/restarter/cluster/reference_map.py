"""Which workloads use which Secret or ConfigMap: a lean map kept from workload events.

Pure: no client, no kopf. Each workload is held only as the set of sources it uses (not
its body), so the map's size follows the number of references. A reference carries the
keys it reads: None (no object) for a whole source, the common case, else one shared
frozenset per distinct set of key names. An event or a whole
listing goes in; what changed in the map comes out (for logs and tests).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model.checksums import BucketChange, ChangedKeys
from restarter.model.fan_out import Target
from restarter.model.optin import OptIn, opt_in
from restarter.model.references import (
    KeyNames,
    Reference,
    WorkloadKey,
    affected_keys,
    workload_references,
)

#: A source: (namespace, source kind, source name).
SourceKey = tuple[str, str, str]


#: Distinct key sets kept shared at most; past it the table starts afresh (sets already
#: shared stay so), which bounds it whatever the workloads list.
MAX_KEY_SETS = 4096
_key_sets: dict[frozenset[str], frozenset[str]] = {}


def _shared(names: KeyNames) -> KeyNames:
    """One copy of each set of key names: the same few repeat across thousands of workloads."""
    if names is None:
        return None
    if (shared := _key_sets.get(names)) is not None:
        return shared
    if len(_key_sets) >= MAX_KEY_SETS:
        _key_sets.clear()
    shared = frozenset(sys.intern(name) for name in names)
    _key_sets[shared] = shared
    return shared


def references_of(body: Mapping[str, Any], optin: OptIn | None = None) -> frozenset[Reference]:
    """The sources a workload body uses (its pod template plus its declarations, and the
    sources its opt-in names, every key of those)."""
    metadata = body.get("metadata") or {}
    pod_spec = ((body.get("spec") or {}).get("template") or {}).get("spec")
    found = workload_references(metadata.get("annotations"), pod_spec)
    if optin is not None and optin.named:
        reads = {(ref.kind, ref.name): ref for ref in found}
        reads.update({named: Reference(*named) for named in optin.named})
        found = frozenset(reads.values())
    # Names repeat across thousands of workloads: keep one copy of each string.
    return frozenset(
        Reference(sys.intern(ref.kind), sys.intern(ref.name), _shared(ref.keys)) for ref in found
    )


def uses_of(
    body: Mapping[str, Any], reloader: bool = False
) -> tuple[frozenset[Reference], OptIn | None]:
    """What the reference map keeps of a workload body: the sources it uses and what it
    opted in for (``reloader``: Reloader's annotations count)."""
    metadata = body.get("metadata") or {}
    template = ((body.get("spec") or {}).get("template") or {}).get("metadata")
    optin = _shared_optin(opt_in(metadata, template, reloader))
    return references_of(body, optin), optin


_optins: dict[OptIn, OptIn] = {}


def _shared_optin(optin: OptIn | None) -> OptIn | None:
    """One copy of each distinct opt-in: thousands of workloads carry the same annotations."""
    if optin is None:
        return None
    if (shared := _optins.get(optin)) is not None:
        return shared
    if len(_optins) >= MAX_KEY_SETS:
        _optins.clear()
    _optins[optin] = optin
    return optin


@dataclass(frozen=True)
class MapChange:
    """Sources that gained or lost a user, as (plural, namespace, name) → sources."""

    gained: dict[WorkloadKey, frozenset[Reference]] = field(default_factory=dict)
    lost: dict[WorkloadKey, frozenset[Reference]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.gained or self.lost)


@dataclass
class ReferenceMap:
    """(namespace, kind, name) of a source → the workloads that use it; thread-safe.

    Which keys a workload reads of a source is in its references (``_uses``), not in
    ``_users``: the common whole-source reader costs nothing more.
    """

    _uses: dict[WorkloadKey, frozenset[Reference]] = field(default_factory=dict)
    _users: dict[SourceKey, set[tuple[str, str]]] = field(default_factory=dict)
    _optins: dict[WorkloadKey, OptIn] = field(default_factory=dict)
    """Only the workloads that opted in: most have no entry."""

    _wanted: dict[SourceKey, int] = field(default_factory=dict)
    """Sources an opted-in workload may ask restarts for → how many such workloads."""

    _patterned: dict[str, set[WorkloadKey]] = field(default_factory=dict)
    """Namespace → opted-in workloads that select sources by a regular expression."""

    on_wanted: Callable[[str, str | None, str | None], None] | None = None
    """Told (namespace, kind, name) of a source that became wanted, or (namespace, None,
    None) when any source there may have (a new expression): the source watcher checks it."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wants(self, namespace: str, kind: str, name: str) -> bool:
        """True when a workload that opted in may ask restarts for a change of this source,
        labelled or not: the source watcher reads such a source when it changes."""
        with self._lock:
            if self._wanted.get((namespace, kind, name)):
                return True
            return any(
                self._optins[key].matches_pattern(kind, name)
                for key in self._patterned.get(namespace, ())
            )

    def targets(
        self,
        namespace: str,
        kind: str,
        name: str,
        changed: ChangedKeys,
        source_metadata: Mapping[str, Any],
    ) -> list[Target]:
        """The workloads that read a key in ``changed`` (None: unknown, so every user; a
        ``BucketChange``: a key whose bucket changed) of the source, sorted; each with its
        opt-in when it selects this source (its window applies), else None (restarted only
        if the source is labelled). A workload that selects sources by an expression and
        does not use this one appears only if it selects it."""
        annotations = source_metadata.get("annotations") or {}
        found: list[Target] = []
        with self._lock:
            users = self._users.get((namespace, kind, name), set())
            matched = {
                (plural, workload)
                for plural, _, workload in self._patterned.get(namespace, ())
                if (plural, workload) not in users
                and self._optins[plural, namespace, workload].selects(kind, name, annotations)
            }
            for plural, workload in sorted(users | matched):
                key = (plural, namespace, workload)
                reads = next(
                    (
                        ref.keys
                        for ref in self._uses.get(key, ())
                        if ref.kind == kind and ref.name == name
                    ),
                    None,  # selected by an expression: read through the API, whole
                )
                if isinstance(changed, BucketChange):
                    seen = changed.read_by(reads)  # possibly changed: its bucket did
                else:
                    seen = affected_keys(reads, changed)
                if not (seen is None or seen):
                    continue
                optin = self._optins.get(key)
                selects = optin is not None and optin.selects(kind, name, annotations)
                found.append(Target(plural, workload, seen, optin if selects else None))
        return found

    def dependents(self, namespace: str, kind: str, name: str) -> list[tuple[str, str]]:
        """(plural, name) of every workload using the source, sorted."""
        with self._lock:
            return sorted(self._users.get((namespace, kind, name), ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._uses)

    def apply(
        self,
        event_type: str,
        plural: str,
        namespace: str,
        name: str,
        refs: frozenset[Reference],
        optin: OptIn | None = None,
    ) -> MapChange:
        """One watch event (ADDED, MODIFIED or DELETED) of one workload."""
        key = (plural, namespace, name)
        with self._lock:
            if event_type == "DELETED":
                refs, optin = frozenset(), None
            wanted = self._set_optin(key, refs, optin)
            change = self._set(key, refs)
        self._tell(wanted)
        return change

    def replace(
        self,
        plural: str,
        namespace: str | None,
        listed: Mapping[tuple[str, str], frozenset[Reference]],
        optins: Mapping[tuple[str, str], OptIn] | None = None,
    ) -> MapChange:
        """A complete listing of one kind, in one namespace (None: all): the map follows it.

        Workloads of that kind and scope that the listing lacks were deleted while no
        watch saw it; they are dropped. ``listed`` maps (namespace, name) → sources, and
        ``optins`` (namespace, name) → opt-in for those that opted in.
        """
        gained: dict[WorkloadKey, frozenset[Reference]] = {}
        lost: dict[WorkloadKey, frozenset[Reference]] = {}
        optins = optins or {}
        wanted: list[tuple[str, str | None, str | None]] = []
        with self._lock:
            stale = [
                key
                for key in self._uses
                if key[0] == plural
                and (namespace is None or key[1] == namespace)
                and key[1:] not in listed
            ]
            updates: Iterable[tuple[WorkloadKey, frozenset[Reference]]] = [
                *((key, frozenset()) for key in stale),
                *(((plural, ns, n), refs) for (ns, n), refs in listed.items()),
            ]
            for key, refs in updates:
                wanted += self._set_optin(key, refs, optins.get(key[1:]))
                change = self._set(key, refs)
                gained.update(change.gained)
                lost.update(change.lost)
        self._tell(wanted)
        return MapChange(gained, lost)

    def _tell(self, wanted: list[tuple[str, str | None, str | None]]) -> None:
        if self.on_wanted is not None:
            for namespace, kind, name in dict.fromkeys(wanted):
                self.on_wanted(namespace, kind, name)

    def _wanted_by(self, refs: frozenset[Reference], optin: OptIn | None) -> set[tuple[str, str]]:
        if optin is None:
            return set()
        return {(ref.kind, ref.name) for ref in refs if optin.may_select(ref.kind, ref.name)}

    def _set_optin(
        self, key: WorkloadKey, refs: frozenset[Reference], optin: OptIn | None
    ) -> list[tuple[str, str | None, str | None]]:
        """Keep the workload's opt-in and the wanted sources in step with it; the sources
        (or namespace) that became wanted."""
        namespace = key[1]
        before = self._optins.get(key)
        old = self._wanted_by(self._uses.get(key, frozenset()), before)
        new = self._wanted_by(refs, optin)
        if optin is None:
            self._optins.pop(key, None)
        else:
            self._optins[key] = optin
        for kind, source in old - new:
            source_key = (namespace, kind, source)
            self._wanted[source_key] -= 1
            if not self._wanted[source_key]:
                del self._wanted[source_key]
        became: list[tuple[str, str | None, str | None]] = []
        for kind, source in new - old:
            source_key = (namespace, kind, source)
            self._wanted[source_key] = self._wanted.get(source_key, 0) + 1
            if self._wanted[source_key] == 1:
                became.append(source_key)
        patterned = self._patterned.setdefault(namespace, set())
        if optin is not None and optin.patterns:
            if key not in patterned or before is None or before.patterns != optin.patterns:
                became.append((namespace, None, None))
            patterned.add(key)
        else:
            patterned.discard(key)
        if not patterned:
            del self._patterned[namespace]
        return became

    def _set(self, key: WorkloadKey, refs: frozenset[Reference]) -> MapChange:
        plural, namespace, name = key
        before = self._uses.get(key, frozenset())
        if refs == before:
            return MapChange()
        if refs:
            self._uses[key] = refs
        else:
            self._uses.pop(key, None)
        for ref in before - refs:
            users = self._users.get((namespace, ref.kind, ref.name))
            if users is not None:
                users.discard((plural, name))
                if not users:
                    del self._users[namespace, ref.kind, ref.name]
        for ref in refs - before:
            self._users.setdefault((namespace, ref.kind, ref.name), set()).add((plural, name))
        gained, lost = refs - before, before - refs
        return MapChange({key: gained} if gained else {}, {key: lost} if lost else {})
