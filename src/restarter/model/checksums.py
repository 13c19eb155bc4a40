"""SHA-256 over a canonical form of a source's data: stable under key order and metadata.

Beside the whole-data checksum, a source keeps keyed digests of its keys, so a change can
name the keys it touched. Every digest is an HMAC-SHA256 keyed by a random salt of the
source's own, so no value shows and none compares across keys or sources. Two forms:

- per key (``KeyDigests``): one 128-bit digest per key, while that annotation is small
  (``EXACT_BUDGET``): a change names exactly the keys modified, added or removed;
- per bucket (``BucketDigests``): each key name is hashed, with the salt, into one of
  ``BUCKETS`` buckets, and each bucket keeps one 64-bit digest of its keys. The
  annotation's size does not grow with the number of keys. A change is known by its
  buckets: a key counts as changed when its bucket changed, so a reader may restart for
  a change of another key of its bucket (never the reverse).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Bytes of a source's salt, and of each key's digest.
SALT_BYTES = DIGEST_BYTES = 16

#: The per-key scheme's name in the annotation: a reader of a digest written otherwise
#: ignores it.
SCHEME = "hmac-sha256-128"

#: The per-bucket scheme's name, the buckets written, and the bytes of each bucket's digest.
BUCKET_SCHEME = "hmac-sha256-64-buckets"
BUCKETS = 256
BUCKET_DIGEST_BYTES = 8
#: Most buckets a recorded annotation may declare (by its length) and still be read.
MAX_BUCKETS = 4096

#: Largest key-digests annotation (bytes of its value) written with one digest per key;
#: past it the digests are kept per bucket (about 2.9 KB with ``BUCKETS``).
EXACT_BUDGET = 4096


def checksum(data: Mapping[str, str] | None, binary_data: Mapping[str, str] | None = None) -> str:
    """``sha256:<hex>`` of ``data`` (and a ConfigMap's ``binaryData``, when it has any).

    Values are hashed as the API returns them; ``binaryData`` is part of the canonical
    form only when the source has some.
    """
    canonical: dict[str, Any] = {"data": dict(data or {})}
    if binary_data:
        canonical["binaryData"] = dict(binary_data)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _raw_digests(
    data: Mapping[str, str] | None, binary_data: Mapping[str, str] | None, salt: str
) -> dict[str, bytes]:
    """Key → HMAC-SHA256(salt, field NUL key NUL value), cut to ``DIGEST_BYTES``."""
    secret = salt.encode()
    digests = {}
    for field, values in (("data", data), ("binaryData", binary_data)):
        for key, value in (values or {}).items():
            message = "\0".join((field, key, value)).encode()
            digests[key] = hmac.new(secret, message, hashlib.sha256).digest()[:DIGEST_BYTES]
    return digests


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
        return _dumps(value)


@dataclass(frozen=True)
class BucketDigests:
    """One digest per bucket of keys, and the checksum of the data they describe.

    Annotation value: compact JSON ``{"buckets": "<b64>", "checksum": "sha256:…", "salt":
    "<b64>", "scheme": "hmac-sha256-64-buckets"}``. ``buckets`` is the digests of bucket 0,
    1, … concatenated (``BUCKET_DIGEST_BYTES`` each; their number is its length). A key's
    bucket is HMAC-SHA256(salt, "bucket" NUL key) mod the number of buckets; a bucket's
    digest is HMAC-SHA256(salt, the per-key digests of its keys in key order), cut to
    ``BUCKET_DIGEST_BYTES``: any key of it modified, added or removed changes it.
    """

    checksum: str
    salt: str
    buckets: bytes

    @property
    def count(self) -> int:
        return len(self.buckets) // BUCKET_DIGEST_BYTES

    def bucket(self, index: int) -> bytes:
        return self.buckets[index * BUCKET_DIGEST_BYTES : (index + 1) * BUCKET_DIGEST_BYTES]

    def to_annotation(self) -> str:
        value = {
            "buckets": _b64(self.buckets),
            "checksum": self.checksum,
            "salt": self.salt,
            "scheme": BUCKET_SCHEME,
        }
        return _dumps(value)


#: The digests recorded on a source, in either form.
Digests = KeyDigests | BucketDigests


def key_digests(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None,
    salt: str,
    whole: str | None = None,
) -> KeyDigests:
    """The digests of every key under ``salt``; ``whole`` is the data's checksum, if known."""
    raw = _raw_digests(data, binary_data, salt)
    digests = {key: _b64(digest) for key, digest in sorted(raw.items())}
    return KeyDigests(whole or checksum(data, binary_data), salt, digests)


def bucket_of(salt: str, key: str, count: int) -> int:
    """The bucket of a key name under the source's salt."""
    message = b"bucket\0" + key.encode()
    digest = hmac.new(salt.encode(), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % count


def bucket_digests(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None,
    salt: str,
    whole: str | None = None,
    count: int = BUCKETS,
) -> BucketDigests:
    """The digests of ``count`` buckets of the keys under ``salt``."""
    members: list[list[bytes]] = [[] for _ in range(count)]
    for key, digest in sorted(_raw_digests(data, binary_data, salt).items()):
        members[bucket_of(salt, key, count)].append(digest)
    secret = salt.encode()
    buckets = b"".join(
        hmac.new(secret, b"".join(digests), hashlib.sha256).digest()[:BUCKET_DIGEST_BYTES]
        for digests in members
    )
    return BucketDigests(whole or checksum(data, binary_data), salt, buckets)


def fitting_digests(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None,
    salt: str,
    whole: str,
    room: int,
) -> Digests | None:
    """The most precise digests whose annotation fits: per key while it takes at most
    ``EXACT_BUDGET`` bytes (and ``room``), else per bucket if that fits ``room``, else
    None (only the whole checksum can be kept)."""
    exact = key_digests(data, binary_data, salt, whole)
    if len(exact.to_annotation()) <= min(EXACT_BUDGET, room):
        return exact
    buckets = bucket_digests(data, binary_data, salt, whole)
    if len(buckets.to_annotation()) <= room:
        return buckets
    return None


def new_salt(random_bytes: bytes) -> str:
    """A salt from ``SALT_BYTES`` random bytes (the caller draws them: this module is pure)."""
    return _b64(random_bytes[:SALT_BYTES])


def read_key_digests(value: str | None) -> Digests | None:
    """The digests an annotation holds (either form); None when absent or not ours."""
    if not value:
        return None
    try:
        fields = json.loads(value)
        scheme = fields.get("scheme")
        whole, salt = fields["checksum"], fields["salt"]
        if not (isinstance(whole, str) and isinstance(salt, str) and salt):
            return None
        if scheme == SCHEME:
            return _read_per_key(whole, salt, fields["digests"])
        if scheme == BUCKET_SCHEME:
            return _read_buckets(whole, salt, fields["buckets"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def _read_per_key(whole: str, salt: str, digests: Any) -> KeyDigests | None:
    if not isinstance(digests, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items()):
        return None
    return KeyDigests(whole, salt, digests)


def _read_buckets(whole: str, salt: str, text: Any) -> BucketDigests | None:
    if not isinstance(text, str):
        return None
    try:
        raw = _unb64(text)
    except (binascii.Error, ValueError):
        return None
    count, rest = divmod(len(raw), BUCKET_DIGEST_BYTES)
    if rest or not 1 <= count <= MAX_BUCKETS:
        return None
    return BucketDigests(whole, salt, raw)


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


class PossiblyChanged(frozenset[str]):
    """Key names whose bucket changed: each may have changed, or shares its bucket with one
    that did. A plain frozenset of names is exact; set operations on this one return plain
    frozensets, so it is built only where the names are final."""

    __slots__ = ()


@dataclass(frozen=True)
class BucketChange:
    """A change known by the buckets it touched: which keys it touched, up to their bucket."""

    salt: str
    count: int
    buckets: frozenset[int]
    """The changed buckets (never empty)."""

    present: frozenset[str]
    """The keys of the data now that fall in a changed bucket."""

    def touches(self, key: str) -> bool:
        """True when the key's bucket changed: it may have changed (or been removed)."""
        return bucket_of(self.salt, key, self.count) in self.buckets

    def read_by(self, reads: frozenset[str] | None) -> frozenset[str] | None:
        """The keys a reader reads that may have changed (empty: it is not affected).

        A whole-source reader (``reads`` None) sees the keys now in a changed bucket, or,
        when those buckets hold no key now (a key removed), an unknown set (None).
        """
        if reads is None:
            return PossiblyChanged(self.present) if self.present else None
        return PossiblyChanged(key for key in reads if self.touches(key))


#: Which keys a change touched: exact names, names known by their bucket, or unknown (None).
ChangedKeys = frozenset[str] | BucketChange | None


def changes(
    before: Digests,
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None,
    whole: str,
) -> ChangedKeys:
    """What changed from the recorded digests to the data now (digested under the recorded
    salt and form): exact names from per-key digests, buckets from per-bucket ones; None
    when the digests cannot tell (the checksums differ while every digest agrees)."""
    if isinstance(before, KeyDigests):
        return changed_keys(before, key_digests(data, binary_data, before.salt, whole))
    now = bucket_digests(data, binary_data, before.salt, whole, before.count)
    moved = frozenset(i for i in range(before.count) if before.bucket(i) != now.bucket(i))
    if not moved:
        return frozenset() if before.checksum == whole else None
    names: Iterable[str] = (*(data or {}), *(binary_data or {}))
    present = frozenset(k for k in names if bucket_of(before.salt, k, before.count) in moved)
    return BucketChange(before.salt, before.count, moved, present)
