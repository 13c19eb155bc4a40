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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


def references_of(body: Mapping[str, Any]) -> frozenset[Reference]:
    """The sources a workload body uses (its pod template plus its declarations)."""
    metadata = body.get("metadata") or {}
    pod_spec = ((body.get("spec") or {}).get("template") or {}).get("spec")
    found = workload_references(metadata.get("annotations"), pod_spec)
    # Names repeat across thousands of workloads: keep one copy of each string.
    return frozenset(
        Reference(sys.intern(ref.kind), sys.intern(ref.name), _shared(ref.keys)) for ref in found
    )


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
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def dependents(self, namespace: str, kind: str, name: str) -> list[tuple[str, str]]:
        """(plural, name) of every workload using the source, sorted."""
        with self._lock:
            return sorted(self._users.get((namespace, kind, name), ()))

    def affected(
        self, namespace: str, kind: str, name: str, changed: KeyNames
    ) -> list[tuple[str, str, KeyNames]]:
        """(plural, name, the changed keys it reads) of every workload that reads a key in
        ``changed`` (None: unknown, so every user, with None), sorted."""
        found = []
        with self._lock:
            for plural, workload in sorted(self._users.get((namespace, kind, name), ())):
                reads = next(
                    ref.keys
                    for ref in self._uses[plural, namespace, workload]
                    if ref.kind == kind and ref.name == name
                )
                seen = affected_keys(reads, changed)
                if seen is None or seen:
                    found.append((plural, workload, seen))
        return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._uses)

    def apply(
        self, event_type: str, plural: str, namespace: str, name: str, refs: frozenset[Reference]
    ) -> MapChange:
        """One watch event (ADDED, MODIFIED or DELETED) of one workload."""
        key = (plural, namespace, name)
        with self._lock:
            return self._set(key, frozenset() if event_type == "DELETED" else refs)

    def replace(
        self,
        plural: str,
        namespace: str | None,
        listed: Mapping[tuple[str, str], frozenset[Reference]],
    ) -> MapChange:
        """A complete listing of one kind, in one namespace (None: all): the map follows it.

        Workloads of that kind and scope that the listing lacks were deleted while no
        watch saw it; they are dropped. ``listed`` maps (namespace, name) → sources.
        """
        gained: dict[WorkloadKey, frozenset[Reference]] = {}
        lost: dict[WorkloadKey, frozenset[Reference]] = {}
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
                change = self._set(key, refs)
                gained.update(change.gained)
                lost.update(change.lost)
        return MapChange(gained, lost)

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
