"""SHA-256 over a canonical form of a Secret's data: stable under key order and metadata."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping


def checksum(data: Mapping[str, str] | None) -> str:
    """``sha256:<hex>`` of the data mapping (base64 values as the API returns them)."""
    canonical = json.dumps({"data": dict(data or {})}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
