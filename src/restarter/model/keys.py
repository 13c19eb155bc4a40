"""Every label and annotation key restarter reads or writes, under one prefix.

Per-source pending marks are keyed by the source's name. Secret names may be 253
characters but an annotation name only 63, so a name that does not fit is shortened
to its first characters plus 12 hex digits of the SHA-256 of the full name (the name
is not secret). The full name is always in the key for names up to 56 characters.
"""

from __future__ import annotations

import hashlib

PREFIX = "restarter.io"

#: Label on a Secret or ConfigMap: ``HH.MM`` (24-hour), several joined by ``_``, ``now``,
#: or ``cron``. Only sources with this label are watched (server-side selector).
RESTART_AT_LABEL = "restart-at"

#: Annotation on a source: ``sha256:<hex>`` of its data when restarter last acted on it.
CHECKSUM = f"{PREFIX}/checksum"

#: Annotation on a source: keyed digests of its keys (per key, or per bucket of keys for a
#: source with many), for the same data as ``CHECKSUM``, so a change names the keys it
#: touched (``checksums.KeyDigests`` and ``checksums.BucketDigests`` have the formats).
#: Written with the checksum; a source with only the checksum (the digests had no room, or
#: the API refused them) gets it recorded again on its next event, restarting nothing.
KEY_DIGESTS = f"{PREFIX}/key-digests"

#: Annotation on a source while restarter is stamping its dependents for a change:
#: ``<change id> sha256:<hex>``. The id is the source's resourceVersion when the change
#: was first seen; a fan-out cut short by a crash is resumed under the same id, so the
#: dependents that already restarted for it are not restarted again. Removed when the
#: checksum is recorded.
CHANGE = f"{PREFIX}/change"

#: Annotation on a source labelled ``restart-at=cron`` (or a workload whose
#: ``restarter.io/restart-at`` is ``cron``): 5-field cron of the window starts.
CRON = f"{PREFIX}/cron"

#: Annotation on a source (or a workload with ``restarter.io/restart-at``): IANA zone of
#: its window, overriding the operator's default.
TIMEZONE = f"{PREFIX}/timezone"

#: Annotation on a source (or a workload with ``restarter.io/restart-at``): its window's
#: length (``90m``, ``2h``), overriding the operator's default.
WINDOW_LENGTH = f"{PREFIX}/window-length"

#: Annotation on a Deployment, StatefulSet or DaemonSet: the workload opts in. When a source
#: it uses changes, labelled or not, it restarts in this window (the label's grammar; the
#: ``cron``, ``timezone`` and ``window-length`` annotations on the workload go with it).
WORKLOAD_RESTART_AT = f"{PREFIX}/restart-at"

#: Annotation on a workload: ``"true"`` opts it out; restarter never restarts it.
IGNORE = f"{PREFIX}/ignore"

#: Annotation on a workload or a Namespace: ``"<reason>"`` holds its restarts (every
#: restart in the namespace) until removed; the marks stay, nothing is lost.
HOLD = f"{PREFIX}/hold"

#: Annotation on a source: how many of a change's dependents restart first (``1``,
#: ``10%``; ``0``: no waves), overriding the operator's ``--first-wave``.
FIRST_WAVE = f"{PREFIX}/first-wave"

#: Annotation on a source: how long the first wave must stay healthy after its rollout
#: before the rest restart (``60s``, ``5m``; ``0``), overriding ``--soak``.
SOAK = f"{PREFIX}/soak"

#: Annotation on a source: how long it must stay unchanged before its dependents restart
#: (``10s``, ``1m``; ``0``), so that changes arriving together make one restart
#: (overriding ``--quiet``).
QUIET = f"{PREFIX}/quiet"

#: Label or annotation on a source: sources with the same value (one bundle written into
#: every namespace) whose changes are judged together are one change: one first wave
#: across all of them, and one circuit breaker.
ROLLOUT_GROUP = f"{PREFIX}/rollout-group"

#: Annotation on a source, written by restarter: JSON, the state of its latest change's
#: waves (the change id, the first wave's workloads, the soak, and once judged
#: ``released`` or ``halted`` with the workload that failed and why). Names and reasons
#: only, never a value.
WAVE = f"{PREFIX}/wave"

#: Annotation on a source, written by a person (``restarter resume``): the id of a halted
#: change to let through to the rest of its dependents.
RESUME = f"{PREFIX}/resume"

#: Annotation on a source, written with the checksum: the earliest X.509 ``notAfter``
#: (RFC 3339, UTC) among the certificates in the data it was taken of. A certificate's
#: expiry is public; nothing else of the data is read into it.
NOT_AFTER = f"{PREFIX}/not-after"

#: Annotation on a source: how long before that expiry its dependents restart at the
#: latest (``30m``, ``2h``), overriding the operator's ``--certificate-margin``.
CERTIFICATE_MARGIN = f"{PREFIX}/certificate-margin"

#: Annotation on a workload: comma list of Secrets it depends on beyond its pod template.
DEPENDS_ON_SECRETS = f"{PREFIX}/secrets"

#: Annotation on a workload: comma list of ConfigMaps it depends on beyond its pod template.
DEPENDS_ON_CONFIGMAPS = f"{PREFIX}/configmaps"

#: Annotation prefix on a workload: epoch seconds when a change of the named source was seen.
PENDING_MARK = f"pending-restart.{PREFIX}"

#: Annotation prefix on a workload: the window the named source asked for, as JSON
#: (``{"at":"03.00","length":"1h","source":"Secret/db","timezone":"UTC"}``).
WINDOW_MARK = f"restart-at.{PREFIX}"

#: Annotation prefix on a workload: ``<epoch seconds>`` names the instant by which it
#: restarts at the latest, as the certificate its pods run with expires; the value is JSON
#: (``{"notAfter":"2026-01-01T00:00:00Z","source":"Secret/tls"}``). One key per deadline, so
#: a merge patch for a later change adds its own and the earliest is kept; removed with the
#: marks.
DEADLINE = f"deadline.{PREFIX}"

#: Annotation prefix on a workload: per SecretProviderClass it mounts
#: (``csi-versions.restarter.io/secretproviderclass.<name>``), JSON list of the short
#: digests of the object versions (provider id and version identifier, never a value) its
#: pods reported when restarter last looked: a version not in it is a change. Written in
#: the same patch as the change's marks.
CSI_VERSIONS = f"csi-versions.{PREFIX}"

#: Annotation prefix on a workload: per SecretProviderClass it mounts that syncs into a
#: Secret (``spec.secretObjects``) holding a certificate
#: (``csi-not-after.restarter.io/secretproviderclass.<name>``), JSON: the earliest X.509
#: ``notAfter`` among the synced keys and the Secret it is in
#: (``{"notAfter":"2026-01-01T00:00:00Z","secret":"shop-tls"}``), recorded with the
#: versions: the expiry of the certificate its pods run with when the versions next change.
#: A certificate's expiry is public; nothing else of the Secret is read into it.
CSI_NOT_AFTER = f"csi-not-after.{PREFIX}"

#: How the annotation keys of a pending mark (both halves, and its deadlines) begin.
MARK_PREFIXES = (PENDING_MARK + "/", WINDOW_MARK + "/", DEADLINE + "/")

#: Label on a workload while it has pending marks: kopf's watch of workloads selects it
#: server-side, so kopf (its timers, finalizer and memory) sees only pending workloads.
PENDING_LABEL = f"{PREFIX}/pending"

#: Annotation on a workload: epoch seconds of restarter's last restart of it.
RESTART_TS = f"{PREFIX}/restart-ts"

#: Annotation on a workload: JSON ``{"<mark token>": "<change id>"}``, the changes of each
#: source that restarter's restarts of it satisfied. A mark for a change listed here is
#: cleared without a restart. Change ids are resourceVersions: they reveal nothing of data.
RESTARTED_FOR = f"{PREFIX}/restarted-for"

#: Pod-template annotation that ``kubectl rollout restart`` writes; a change rolls the pods.
KUBECTL_RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"

#: Finalizer that kopf adds while a workload has a pending timer.
FINALIZER = f"{PREFIX}/finalizer"

#: kopf's own annotation prefix for progress and diff-base storage.
KOPF_PREFIX = f"{PREFIX}.kopf"

#: Every change restarter, and kopf on its behalf, makes to the objects it watches: the
#: chart's ValidatingAdmissionPolicy lets its ServiceAccount make these and no other.
#: ``python -m restarter.model.keys`` prints them as the chart's
#: ``files/written-keys.json``; tests/unit/test_policy_keys.py fails when that file or a
#: patch the code builds strays from them.
WRITTEN: dict[str, tuple[str, ...]] = {
    # On a Secret or ConfigMap. Not kopf's prefix: a diff base there would copy its data.
    # RESUME is a person's (`restarter resume`), allowed so that the same command works
    # with the operator's identity too.
    "sourceAnnotations": (CHECKSUM, KEY_DIGESTS, CHANGE, NOT_AFTER, WAVE, RESUME),
    "workloadAnnotations": (RESTART_TS, RESTARTED_FOR),
    # The pending marks, and kopf's own progress, diff base and markers on workloads.
    "workloadAnnotationPrefixes": (
        *MARK_PREFIXES,
        f"{KOPF_PREFIX}/",
        f"{CSI_VERSIONS}/",
        f"{CSI_NOT_AFTER}/",
    ),
    "workloadLabels": (PENDING_LABEL,),
    "workloadFinalizers": (FINALIZER,),
    "podTemplateAnnotations": (KUBECTL_RESTARTED_AT,),
    # An Argo Rollout is restarted through its spec.
    "rolloutSpecFields": ("restartAt",),
}

MAX_NAME = 63
HASH_DIGITS = 12


def source_token(kind: str, name: str) -> str:
    """The annotation name (after the ``/``) for a source: ``secret.<name>``, shortened to fit."""
    token = f"{kind}.{name}"
    if len(token) <= MAX_NAME:
        return token
    digest = hashlib.sha256(name.encode()).hexdigest()[:HASH_DIGITS]
    head = token[: MAX_NAME - HASH_DIGITS - 1].rstrip(".-")
    return f"{head}-{digest}"


def pending_key(kind: str, name: str) -> str:
    return f"{PENDING_MARK}/{source_token(kind, name)}"


def window_key(kind: str, name: str) -> str:
    return f"{WINDOW_MARK}/{source_token(kind, name)}"


#: 9999-12-31T23:59:59Z: later epochs are not instants datetime can hold.
_MAX_EPOCH = 253402300799


def epoch_seconds(value: str | None) -> int | None:
    """Whole epoch seconds from an epoch annotation (``restart-ts``, a mark's ``since``);
    None for anything else (even ``'²'``)."""
    if not (value and value.isascii() and value.isdigit()):
        return None
    seconds = int(value)
    return seconds if seconds <= _MAX_EPOCH else None


if __name__ == "__main__":
    import json

    print(json.dumps({name: list(values) for name, values in WRITTEN.items()}, indent=2))
