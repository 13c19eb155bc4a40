"""Events on the objects a handler is about, through kopf's queue (its handler context)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf


def event(obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """An Event on the object, posted by kopf's queue as component ``restarter``."""
    kopf.event(cast(Any, obj), type=type, reason=reason, message=message)


def warn(obj: Mapping[str, Any], *, reason: str, message: str) -> None:
    kopf.warn(cast(Any, obj), reason=reason, message=message)
