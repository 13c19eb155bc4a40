"""Every Event reason restarter posts, with its type and what it tells a user.

One registry, so the Event path can refuse a reason that is not declared here, the
reference page lists them all (``docs/reference.md``), and a unit test fails when the
code posts a reason this module does not know.

Pure: no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

NORMAL = "Normal"
WARNING = "Warning"

#: Where an Event is posted.
SOURCE = "source"
WORKLOAD = "workload"
OPERATOR = "the operator's own Pod"


@dataclass(frozen=True)
class Reason:
    """One Event reason: ``kubectl describe`` shows ``type`` and ``name``."""

    name: str
    type: str
    on: str
    meaning: str
    """One line for users: when it is posted and what it means."""
    warns: bool = False
    """Also posted as a Warning (``as_warning``), when ``meaning`` says."""

    def __str__(self) -> str:
        return self.name

    @property
    def types(self) -> str:
        """The types it is posted with, as the reference page lists them."""
        return f"{self.type} or {WARNING}" if self.warns else self.type

    def as_warning(self) -> Reason:
        """The same reason posted as a Warning; only for a reason declared ``warns``."""
        if not self.warns:
            raise ValueError(f"Event reason {self.name} is not declared to warn")
        return replace(self, type=WARNING)


CHANGE_DETECTED = Reason(
    "ChangeDetected",
    NORMAL,
    SOURCE,
    "its data changed; names the workloads scheduled, and those already restarted for this change",
)
INVALID_WINDOW = Reason(
    "InvalidWindow",
    WARNING,
    f"{SOURCE} or {WORKLOAD}",
    "the window (label or `restarter.io/restart-at`, cron, zone, length) cannot be read; "
    "the message says why, and nothing is scheduled through it",
)
STAMP_FAILED = Reason(
    "StampFailed",
    WARNING,
    SOURCE,
    "a dependent could not be marked (after retries of throttling and 5xx); the others "
    "were, and the whole change is stamped again",
)
KEY_DIGESTS_NOT_RECORDED = Reason(
    "KeyDigestsNotRecorded",
    WARNING,
    SOURCE,
    "no room for the key digests beside the source's own annotations, or the API refused "
    "them: the checksum was recorded alone, so its next change restarts every dependent",
)
CHECKSUM_NOT_RECORDED = Reason(
    "ChecksumNotRecorded",
    WARNING,
    SOURCE,
    "the API refused the checksum (the message gives the status and reason): a change "
    "made while restarter is not running may be missed, or scheduled again after its "
    "next start; not retried in a loop",
)
CHANGE_NOT_RECORDED = Reason(
    "ChangeNotRecorded",
    WARNING,
    SOURCE,
    "the API refused the change annotation: the dependents are scheduled anyway, but a "
    "fan-out resumed after a crash may restart one of them twice",
)
RESTART_SCHEDULED = Reason(
    "RestartScheduled",
    NORMAL,
    WORKLOAD,
    "marked pending for a source's change; names the changed keys it reads, the window, "
    "whose window it is, and the next restart",
)
RESTARTED = Reason(
    "Restarted",
    NORMAL,
    WORKLOAD,
    "restarted in its window, or before it for a certificate deadline (`before its window: "
    "the certificate it runs with ... expires at ...`, a Warning when it already expired); "
    "names the sources and the `restartedAt` value",
    warns=True,
)
RESTART_HELD = Reason(
    "RestartHeld",
    NORMAL,
    WORKLOAD,
    "due, but held: by `restarter.io/hold` on it or its Namespace, the operator's `--hold`, "
    "a firing alert or a blocking pod (named); it stays pending. A Warning when the "
    "Namespace or a gate could not be read (fail closed)",
    warns=True,
)
INVALID_CERTIFICATE_MARGIN = Reason(
    "InvalidCertificateMargin",
    WARNING,
    SOURCE,
    "its `restarter.io/certificate-margin` cannot be read; the operator's "
    "`--certificate-margin` is used",
)
RESTART_DEFERRED = Reason(
    "RestartDeferred",
    NORMAL,
    WORKLOAD,
    "due, but a paused Deployment (it stays pending until resumed), or its window closed "
    "before pacing let it start (it waits for the next window)",
)
RESTART_SKIPPED = Reason(
    "RestartSkipped",
    NORMAL,
    WORKLOAD,
    "marks dropped without a restart: opted out with `restarter.io/ignore`, or marked "
    "again for a change it already restarted for",
)
INVALID_PENDING_MARK = Reason(
    "InvalidPendingMark",
    WARNING,
    WORKLOAD,
    "a pending mark restarter cannot read (edited by hand); posted once per operator run",
)
INVALID_WAVE_SETTING = Reason(
    "InvalidWaveSetting",
    WARNING,
    SOURCE,
    "its `restarter.io/first-wave`, `/soak` or `/quiet` cannot be read; the operator's "
    "settings are used for this change",
)
CHANGE_HALTED = Reason(
    "ChangeHalted",
    WARNING,
    SOURCE,
    "a workload of the change's first wave failed with the new data (named, with the pod, "
    "container, reason and restart count): the rest of its dependents stay pending until "
    "the source changes again, the change is resumed (`restarter resume`), or the halt expires",
)
CHANGE_RELEASED = Reason(
    "ChangeReleased",
    NORMAL,
    SOURCE,
    "the change's first wave rolled out and stayed healthy for the soak time (or a halt was "
    "resumed or expired): the rest of its dependents restart in their windows",
)
RESTART_HALTED = Reason(
    "RestartHalted",
    WARNING,
    WORKLOAD,
    "due, but a change it is pending for is halted: a workload of that change's first wave "
    "failed with the new data (named); it stays pending, marks kept",
)
GATE_FAILED_OPEN = Reason(
    "GateFailedOpen",
    WARNING,
    WORKLOAD,
    "a gate could not be read and the operator fails open (`--gate-fail-open`): the restart "
    "went ahead unguarded; the message names the gate and why",
)
ROLLOUT_STALLED = Reason(
    "RolloutStalled",
    WARNING,
    WORKLOAD,
    "its rollout passed `--rollout-timeout` or its progress deadline; its pacing slot is freed",
)
INVALID_RELOAD_ENTRY = Reason(
    "InvalidReloadEntry",
    WARNING,
    WORKLOAD,
    "with Reloader's annotations honoured: an entry of its reload list is no regular "
    "expression; that entry is skipped, the others still count",
)
CSI_NOT_SERVED = Reason(
    "CSINotServed",
    WARNING,
    OPERATOR,
    "with `--csi`, the Secrets Store CSI Driver's CRDs are not installed: restarter carries "
    "on with Secrets and ConfigMaps and watches SecretProviderClasses once the CRDs are "
    "installed, without a restart; posted once per run (needs `POD_NAME`)",
)
#: kopf's own: restarter sets kopf's posting level to INFO, so a line logged about an
#: object kopf handles (a labelled source, a pending workload) is also an Event on it,
#: typed by the line's level.
LOGGING = Reason(
    "Logging",
    f"{NORMAL}, {WARNING} or Error",
    f"{SOURCE} or {WORKLOAD}",
    "posted by kopf for a line logged about a labelled source or a pending workload "
    "(INFO and above): the Event repeats the log line, such as a handler's error",
)

REASONS: dict[str, Reason] = {
    reason.name: reason
    for reason in (
        CHANGE_DETECTED,
        INVALID_WINDOW,
        STAMP_FAILED,
        KEY_DIGESTS_NOT_RECORDED,
        CHECKSUM_NOT_RECORDED,
        CHANGE_NOT_RECORDED,
        RESTART_SCHEDULED,
        RESTARTED,
        RESTART_HELD,
        INVALID_CERTIFICATE_MARGIN,
        RESTART_DEFERRED,
        RESTART_SKIPPED,
        INVALID_PENDING_MARK,
        ROLLOUT_STALLED,
        INVALID_WAVE_SETTING,
        CHANGE_HALTED,
        CHANGE_RELEASED,
        RESTART_HALTED,
        GATE_FAILED_OPEN,
        INVALID_RELOAD_ENTRY,
        CSI_NOT_SERVED,
        LOGGING,
    )
}


def declared(name: str) -> Reason:
    """The registered reason called ``name``; ValueError for one not declared here."""
    try:
        return REASONS[name]
    except KeyError:
        raise ValueError(
            f"Event reason {name!r} is not declared in restarter.model.reasons"
        ) from None
