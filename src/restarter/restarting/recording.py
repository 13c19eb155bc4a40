"""What the source flow records on the source: the change being scheduled (its id), then
the checksum with the key digests, the certificates' expiry and the wave record; and what a
refused patch costs, told as a Warning on the source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from restarter.model import (
    certificates,
    checksums,
    keys,
    reasons,
    source_changes,
)
from restarter.model.references import SOURCE_KINDS
from restarter.model.source_changes import Change
from restarter.model.windows import ScheduleError
from restarter.restarting.source_context import SourceContext
from restarter.services import metrics
from restarter.services.kube.errors import ApiError, Throttled, Unavailable


def _refused(context: SourceContext, error: ApiError, current: str, what: str) -> str:
    """A refused patch of the source counted and logged; what the Warning says of it: the
    status and the API's message (which names the field and the limit), without the
    checksum should the message echo it."""
    refusal = _told(error, current)
    metrics.SOURCE_PATCH_ERRORS.labels(SOURCE_KINDS[context.kind], str(error.status)).inc()
    context.logger.warning(f"the API refused {what}: {refusal}")
    return refusal


def _transient(context: SourceContext, error: Throttled | Unavailable, current: str) -> NoReturn:
    """No answer, a 429 or a server error: the same patch may pass when tried again, so the
    check fails (counted and logged) and is tried again, the change not taken as recorded.
    Only an answer that refuses the patch itself is a refusal."""
    metrics.SOURCE_PATCH_ERRORS.labels(SOURCE_KINDS[context.kind], str(error.status)).inc()
    told = _told(error, current)
    context.logger.warning(f"could not record the checksum ({told}); trying again")
    raise error


def _told(error: ApiError, current: str) -> str:
    """The error as ``describe`` says it, without the checksum should the API echo it."""
    return error.describe().replace(current.removeprefix("sha256:"), "…")


def begin_change(
    context: SourceContext, source: Mapping[str, Any], change_id: str, current: str
) -> None:
    """The change's id recorded on the source before its first stamp. Refused, it is a
    Warning, and stamping goes on: the restarts matter more than the id that keeps a
    fan-out resumed after a crash from restarting a dependent twice."""
    metadata = source["metadata"]
    patch = source_changes.begin_change_patch(change_id, current)
    try:
        written = context.api.patch_source(
            context.kind, metadata["namespace"], metadata["name"], patch
        )
    except ApiError as error:
        refusal = _refused(context, error, current, "the change annotation")
        context.events.post(
            source,
            reason=reasons.CHANGE_NOT_RECORDED,
            message=f"could not record the change being scheduled ({refusal}); its "
            "dependents are scheduled anyway, but should restarter stop before the change is "
            "recorded, one that already restarted for it may restart again",
        )
    else:
        _wrote(context, metadata, written)


def record(
    context: SourceContext,
    source: Mapping[str, Any],
    change: Change,
    current: str,
    key_change: source_changes.KeyChange,
    also: Mapping[str, str] | None = None,
) -> str | None:
    """Record the checksum, with the most precise key digests that fit, on the source; what
    was recorded, or None when the API refused even the checksum alone.

    A refused patch is a Warning Event on the source and a metric, never only a log line.
    Refused digests are dropped and the checksum sent alone. A refused checksum is not sent
    again (the same patch would be refused again): the caller goes on as if it were
    recorded for this run, so nothing spins on it. A patch with no answer, a 429 or a
    server error is no refusal: the error is raised, and the check is tried again.
    """
    what, digests = SOURCE_KINDS[context.kind], key_change.record
    every = f"every workload that uses this {what} restarts on its next data change"
    refused = _send(context, source, current, digests, also)
    if refused is None:
        return _recorded(context, source, current, key_change, every)
    sent = "the checksum" if digests is None else "the checksum and key digests"
    refusal = _refused(context, refused, current, sent)
    if digests is not None:
        # The digests may be what was refused: the checksum alone still records the change.
        refused = _send(context, source, current, None, also)
        if refused is None:
            context.events.post(
                source,
                reason=reasons.KEY_DIGESTS_NOT_RECORDED,
                message=f"the API refused restarter's key digests ({refusal}); recorded the "
                f"checksum only: {every}, whichever keys it reads",
            )
            return "the checksum only"
        refusal = _refused(context, refused, current, "the checksum")
    context.events.post(
        source,
        reason=reasons.CHECKSUM_NOT_RECORDED,
        message=_not_recorded(change, what, refusal),
    )
    return None


def _send(
    context: SourceContext,
    source: Mapping[str, Any],
    current: str,
    digests: checksums.Digests | None,
    also: Mapping[str, str] | None,
) -> ApiError | None:
    """Patch the checksum (with ``digests``) onto the source: None when recorded, the
    refusal when refused; raised when it may pass if tried again (``_transient``)."""
    metadata = source["metadata"]
    patch = source_changes.checksum_patch(current, digests, drop_digests=True)
    # The earliest certificate expiry of the same data goes with the checksum (deadlines).
    # ``also``: the change's wave record (model.waves), written in the same request.
    patch["metadata"]["annotations"] |= certificates.expiry_annotation(context.kind, source) | dict(
        also or {}
    )
    try:
        written = context.api.patch_source(
            context.kind, metadata["namespace"], metadata["name"], patch
        )
    except (Throttled, Unavailable) as error:
        _transient(context, error, current)
    except ApiError as error:
        return error
    _wrote(context, metadata, written)
    return None


def _wrote(
    context: SourceContext, metadata: Mapping[str, Any], written: Mapping[str, Any] | None
) -> None:
    """The version this write made, told to the sources' watch: its echo needs no read."""
    version = ((written or {}).get("metadata") or {}).get("resourceVersion")
    if version and context.wrote is not None:
        context.wrote((context.kind, metadata["namespace"], metadata["name"]), str(version))


def _recorded(
    context: SourceContext,
    source: Mapping[str, Any],
    current: str,
    key_change: source_changes.KeyChange,
    every: str,
) -> str:
    """What was recorded, with a Warning when the key digests did not fit."""
    digests = key_change.record
    if digests is None:
        what = SOURCE_KINDS[context.kind]
        needs = source_changes.bucket_annotation_bytes(current)
        context.events.post(
            source,
            reason=reasons.KEY_DIGESTS_NOT_RECORDED,
            message=f"this {what}'s other annotations leave {max(0, key_change.room)} bytes "
            f"of the {source_changes.ANNOTATIONS_LIMIT} the API allows for all annotations of an "
            f"object, less than restarter's key digests need ({needs}); recorded the "
            f"checksum only: {every}, whichever keys it reads",
        )
        return "the checksum only"
    form = "per key" if isinstance(digests, checksums.KeyDigests) else "per bucket of keys"
    return f"the checksum and its key digests ({form})"


def stamped_deadline(context: SourceContext, source: Mapping[str, Any]) -> dict[str, str]:
    """The deadline annotation a change's stamps carry: the expiry recorded on the source
    for the data its dependents run, less the margin; none without one. A margin that
    cannot be read is a Warning, and the operator's margin is used."""
    metadata = source["metadata"]
    named = f"{SOURCE_KINDS[context.kind]}/{metadata['name']}"
    default = context.settings.certificate_margin
    try:
        return certificates.stamp_deadline(metadata, named, default) or {}
    except ScheduleError as error:
        message = f"{error}; the operator's margin is used"
        context.logger.warning(message)
        context.events.post(source, reason=reasons.INVALID_CERTIFICATE_MARGIN, message=message)
        without = {k: v for k, v in (metadata.get("annotations") or {}).items()}
        without.pop(keys.CERTIFICATE_MARGIN, None)
        return certificates.stamp_deadline({"annotations": without}, named, default) or {}


def _not_recorded(change: Change, what: str, refusal: str) -> str:
    """The Warning of a checksum the API refused: what that costs, by the kind of change."""
    if change is Change.UNCHANGED:
        return (
            f"could not record the key digests of this {what} ({refusal}): every workload "
            "that uses it restarts on its next data change, whichever keys it reads"
        )
    if change is Change.BASELINE:
        return (
            f"could not record the checksum of this {what} ({refusal}): a data change is "
            "noticed while this restarter runs, but one made while it is not running is missed"
        )
    return (
        f"could not record the checksum of this {what} ({refusal}): the dependents are "
        "scheduled for this change, but restarter sees it again when it next starts and "
        "schedules them again"
    )
