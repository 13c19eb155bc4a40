"""A kopf diff-base storage that keeps and builds nothing.

kopf builds every event's "essence" (a deep copy of the whole body, then a second one to
drop its progress annotations) and diffs it against the last handled one, for its
change handlers (on.create, on.update, on.field) and for timers that wait for an idle
object. restarter registers neither: its timers tick on pending workloads whatever
changed. The copies served a diff nothing read; dropping them did not move the
operator's CPU beyond a benchmark's noise (docs/benchmarks.md). With no essence, kopf's
diff of every event is empty and nothing is stored on any object.

A change handler added later would see every object as unchanged: a unit test refuses
such a registry (``tests/unit/test_no_diffs.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf


class NoDiffBase(kopf.DiffBaseStorage):
    """No essence is built, fetched or stored."""

    def build(self, *, body: Any, extra_fields: Iterable[Any] | None = None) -> Any:
        return None

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None
