"""A source's data against what restarter recorded on it: is this a change, which keys
changed, under which change id, and the patches that record it (the checksum, the key
digests, the change annotation)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from restarter.model import keys
from restarter.model.checksums import (
    SALT_BYTES,
    ChangedKeys,
    Digests,
    bucket_digests,
    changes,
    checksum,
    fitting_digests,
    new_salt,
    read_key_digests,
)


class Change(enum.Enum):
    BASELINE = "baseline"  # first sight: record the checksum, restart nothing
    UNCHANGED = "unchanged"
    CHANGED = "changed"


def classify(source: Mapping[str, Any], remembered: str | None = None) -> tuple[Change, str]:
    """Compare a source's data with its recorded checksum; return the new checksum too.

    ``remembered`` is the checksum this operator saw for the same name earlier in its run:
    a source replaced or re-created with new data has lost its annotation but still
    counts as changed.
    """
    current = checksum(source.get("data"), source.get("binaryData"))
    recorded = (source.get("metadata", {}).get("annotations") or {}).get(keys.CHECKSUM)
    if recorded is None:
        changed = remembered is not None and remembered != current
        return (Change.CHANGED if changed else Change.BASELINE), current
    return (Change.UNCHANGED if recorded == current else Change.CHANGED), current


def recorded_key_digests(metadata: Mapping[str, Any]) -> Digests | None:
    """The source's key digests (either form), if they describe the data its checksum was
    taken of."""
    annotations = metadata.get("annotations") or {}
    digests = read_key_digests(annotations.get(keys.KEY_DIGESTS))
    if digests is None or digests.checksum != annotations.get(keys.CHECKSUM):
        return None  # none yet, or the checksum was recorded without them (no room)
    return digests


def key_digests_current(source: Mapping[str, Any], current: str) -> bool:
    """True when the source's key digests are recorded for its data now."""
    digests = recorded_key_digests(source.get("metadata") or {})
    return digests is not None and digests.checksum == current


#: The apiserver's limit on all of an object's annotations together: the bytes of every
#: key and value (``TotalAnnotationSizeLimitB``).
ANNOTATIONS_LIMIT = 256 * 1024


#: Bytes left unused below it: another writer may add an annotation between restarter's
#: read of the source and its patch.
ANNOTATIONS_MARGIN = 1024


#: The annotations the checksum patch sets or removes.
_RECORDED = (keys.CHECKSUM, keys.KEY_DIGESTS, keys.CHANGE)


def annotation_bytes(annotations: Mapping[str, str], skip: tuple[str, ...] = ()) -> int:
    """The bytes annotations take, as the apiserver counts them against its limit."""
    return sum(
        len(key.encode()) + len(value.encode())
        for key, value in annotations.items()
        if key not in skip
    )


def digests_room(metadata: Mapping[str, Any], current: str) -> int:
    """Bytes the key-digests annotation's value may take on the source: the limit, less
    the source's other annotations, the checksum, the margin and the key's own name."""
    others = annotation_bytes(metadata.get("annotations") or {}, _RECORDED)
    recorded = len(keys.CHECKSUM) + len(current) + len(keys.KEY_DIGESTS)
    return ANNOTATIONS_LIMIT - ANNOTATIONS_MARGIN - others - recorded


@dataclass(frozen=True)
class KeyChange:
    """The key digests to record for the data now, and what changed since those recorded."""

    record: Digests | None
    """None: not even per-bucket digests fit beside the source's own annotations; only
    the checksum is recorded, and the next change affects every reader."""

    changed: ChangedKeys
    """None: unknown (no digests recorded, the checksum alone): every reader counts as
    affected."""

    room: int
    """Bytes the digests annotation could take (what ``record`` None could not fit in)."""


def key_change(source: Mapping[str, Any], current: str, fresh_salt: str) -> KeyChange:
    """The key digests of the source's data now, in the most precise form that fits, and
    the keys changed since the recorded ones, as precisely as those tell.

    The recorded salt is kept; ``fresh_salt`` serves a source that has none yet.
    """
    metadata = source.get("metadata") or {}
    data, binary = source.get("data"), source.get("binaryData")
    before = recorded_key_digests(metadata)
    salt = fresh_salt if before is None else before.salt
    room = digests_room(metadata, current)
    record = fitting_digests(data, binary, salt, current, room)
    changed = None if before is None else changes(before, data, binary, current)
    return KeyChange(record, changed, room)


def bucket_annotation_bytes(current: str) -> int:
    """The bytes of a per-bucket digests annotation (the same for any data and salt)."""
    salt = new_salt(bytes(SALT_BYTES))
    return len(bucket_digests(None, None, salt, current).to_annotation())


def change_id(metadata: Mapping[str, Any], current: str) -> tuple[str, bool]:
    """The id of the change being acted on, and whether it must be recorded on the source.

    A change whose fan-out began before (the source's change annotation holds the same
    checksum) keeps the id it began with, even if the source was updated since without a
    data change; otherwise the id is the source's resourceVersion now.
    """
    begun = ((metadata.get("annotations") or {}).get(keys.CHANGE) or "").split(" ")
    if len(begun) == 2 and begun[1] == current and begun[0]:
        return begun[0], False
    return str(metadata.get("resourceVersion") or ""), True


def begin_change_patch(change: str, current: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {keys.CHANGE: f"{change} {current}"}}}


def checksum_patch(
    value: str, digests: Digests | None = None, *, drop_digests: bool = False
) -> dict[str, Any]:
    """The checksum (and the key digests of the same data) recorded; the change annotation
    (if any) dropped: the change is done. ``drop_digests``: the recorded digests removed
    (they fit no longer, and would describe other data)."""
    annotations: dict[str, str | None] = {keys.CHECKSUM: value, keys.CHANGE: None}
    if digests is not None:
        annotations[keys.KEY_DIGESTS] = digests.to_annotation()
    elif drop_digests:
        annotations[keys.KEY_DIGESTS] = None
    return {"metadata": {"annotations": annotations}}
