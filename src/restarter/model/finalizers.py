"""Removing restarter's finalizer from a workload without dropping another's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def release_patch(finalizers: Sequence[str] | None, finalizer: str) -> list[dict[str, Any]] | None:
    """A JSON patch removing ``finalizer``, or None if it is not there.

    The ``test`` makes the patch fail (422) if the list changed since it was read, so a
    finalizer another controller added meanwhile is never dropped; other changes to the
    object (status, annotations) do not conflict.
    """
    current = list(finalizers or ())
    if finalizer not in current:
        return None
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {
            "op": "replace",
            "path": "/metadata/finalizers",
            "value": [item for item in current if item != finalizer],
        },
    ]
