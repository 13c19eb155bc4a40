"""SHA-256 over a canonical form of a source's data: stable under key order and metadata."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def checksum(data: Mapping[str, str] | None, binary_data: Mapping[str, str] | None = None) -> str:
    """``sha256:<hex>`` of ``data`` (and a ConfigMap's ``binaryData``, when it has any).

    Values are hashed as the API returns them. Without binaryData the canonical form is
    the one restarter 0.1 recorded on Secrets, so upgrading restarts nothing.
    """
    canonical: dict[str, Any] = {"data": dict(data or {})}
    if binary_data:
        canonical["binaryData"] = dict(binary_data)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
