"""SHA-256 over a canonical form of a source's data: stable under key order and metadata.

Beside the whole-data checksum, a source keeps one digest per key, so a change can name
the keys it touched. Each is an HMAC-SHA256, keyed by a random salt of the source's own,
of the key's field, name and value, cut to 128 bits (see ``KeyDigests``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Bytes of a source's salt, and of each key's digest.
SALT_BYTES = DIGEST_BYTES = 16

#: The scheme's name in the annotation: a reader of a digest written otherwise ignores it.
SCHEME = "hmac-sha256-128"


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


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True)
class KeyDigests:
    """One digest per key of a source's data, and the checksum of the data they describe.

    Annotation value: compact JSON ``{"checksum": "sha256:…", "digests": {"<key>": "<b64>"},
    "salt": "<b64>", "scheme": "hmac-sha256-128"}``. A key's digest covers its field
    (``data`` or ``binaryData``), name and value; the salt is random per source and kept
    across changes (the same value must give the same digest), so equal values in two
    keys or two sources do not show, and no precomputed table applies.
    """

    checksum: str
    salt: str
    digests: Mapping[str, str]

    def to_annotation(self) -> str:
        value = {
            "checksum": self.checksum,
            "digests": dict(self.digests),
            "salt": self.salt,
            "scheme": SCHEME,
        }
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def key_digests(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None,
    salt: str,
    whole: str | None = None,
) -> KeyDigests:
    """The digests of every key under ``salt``; ``whole`` is the data's checksum, if known."""
    secret = salt.encode()
    digests = {}
    for field, values in (("data", data), ("binaryData", binary_data)):
        for key, value in (values or {}).items():
            message = "\0".join((field, key, value)).encode()
            digest = hmac.new(secret, message, hashlib.sha256).digest()[:DIGEST_BYTES]
            digests[key] = _b64(digest)
    return KeyDigests(whole or checksum(data, binary_data), salt, dict(sorted(digests.items())))


def new_salt(random_bytes: bytes) -> str:
    """A salt from ``SALT_BYTES`` random bytes (the caller draws them: this module is pure)."""
    return _b64(random_bytes[:SALT_BYTES])


def read_key_digests(value: str | None) -> KeyDigests | None:
    """The digests an annotation holds; None when absent or not ours."""
    if not value:
        return None
    try:
        fields = json.loads(value)
        if fields.get("scheme") != SCHEME:
            return None
        whole, salt, digests = fields["checksum"], fields["salt"], fields["digests"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not (
        isinstance(whole, str) and isinstance(salt, str) and salt and isinstance(digests, dict)
    ):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items()):
        return None
    return KeyDigests(whole, salt, digests)


def changed_keys(before: KeyDigests, after: KeyDigests) -> frozenset[str] | None:
    """The keys modified, added or removed from ``before`` to ``after`` (same salt).

    None (unknown) when the digests cannot tell: other salts, or the checksums differ
    while every digest agrees.
    """
    if before.salt != after.salt:
        return None
    names = before.digests.keys() | after.digests.keys()
    changed = frozenset(k for k in names if before.digests.get(k) != after.digests.get(k))
    if not changed and before.checksum != after.checksum:
        return None
    return changed
