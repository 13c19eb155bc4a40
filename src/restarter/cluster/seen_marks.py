"""The pending marks of each workload at the version restarter's own streams last saw.

kopf's label-selected watch can hand a timer the echo of a DELETED event: the marks as
they were, with a newer resourceVersion at which the workload has none. restarter's
workload streams select no label, so every body they deliver is the workload as it was
at that version. A tick whose body shows exactly the version and marks seen here acts on
that body; any other body is read again first (see ``restarting.ticking._act``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from restarter.model import keys
from restarter.model.references import WorkloadKey, workload_key


def _marks(annotations: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted((k, v) for k, v in (annotations or {}).items() if k.startswith(keys.MARK_PREFIXES))
    )


class SeenMarks:
    """Workloads with pending marks → (resourceVersion, hash of the marks) last seen."""

    def __init__(self) -> None:
        self._seen: dict[WorkloadKey, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def observe(self, plural: str, body: Mapping[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        key, marks = workload_key(plural, body), _marks(metadata.get("annotations"))
        with self._lock:
            if marks:
                self._seen[key] = (str(metadata.get("resourceVersion")), hash(marks))
            else:
                self._seen.pop(key, None)

    def forget(self, key: WorkloadKey) -> None:
        with self._lock:
            self._seen.pop(key, None)

    def vouches_for(self, plural: str, body: Mapping[str, Any]) -> bool:
        """True when the streams saw this workload at the body's version with its marks."""
        metadata = body.get("metadata") or {}
        marks = _marks(metadata.get("annotations"))
        with self._lock:
            seen = self._seen.get(workload_key(plural, body))
        return bool(marks) and seen == (str(metadata.get("resourceVersion")), hash(marks))
