"""Prometheus metrics: what a user alerts on. Names and labels follow Prometheus rules.

Labels hold kinds, results, verbs and status codes only, never object names: their
number of values stays small whatever the cluster's size.
"""

from __future__ import annotations

import sys
import threading

import prometheus_client
from prometheus_client import Counter, Gauge, Histogram

CHANGES = Counter(
    "restarter_changes_detected_total",
    "Data changes of labelled sources that scheduled restarts, by source kind.",
    ["kind"],
)
STAMPED = Counter(
    "restarter_workloads_stamped_total",
    "Workloads marked pending for a change, by workload kind.",
    ["kind"],
)
RESTARTS = Counter(
    "restarter_restarts_total",
    "Restart decisions carried out, by workload kind and result: restarted; deferred "
    "(a window closed before pacing let it start); failed (the API refused the restart); "
    "skipped (marks dropped: opted out, or already restarted for that change).",
    ["kind", "result"],
)
STALLED = Counter(
    "restarter_rollouts_stalled_total",
    "Restarts whose rollout did not complete within the rollout timeout, or failed.",
    ["kind"],
)
PENDING = Gauge(
    "restarter_pending_workloads",
    "Workloads carrying pending marks, by workload kind.",
    ["kind"],
)
WAITING = Gauge(
    "restarter_pending_waiting_workloads",
    "Pending workloads waiting for their window in restarter's own table (no timer, no "
    "finalizer yet).",
)
ADMITTED = Gauge(
    "restarter_pending_admitted_workloads",
    "Pending workloads handed to kopf's timers (the pending label set): due now, or being "
    "restarted; at most --max-timers.",
)
ALLOCATED_BLOCKS = Gauge(
    "restarter_python_allocated_blocks",
    "Memory blocks the Python interpreter has allocated and not freed (live objects), as "
    "sys.getallocatedblocks() counts them: what the process holds, apart from what the "
    "allocator keeps for reuse.",
)
ALLOCATED_BLOCKS.set_function(sys.getallocatedblocks)
IN_FLIGHT = Gauge(
    "restarter_restarts_in_flight",
    "Restarts whose rollout is not complete yet (the pacing limit counts these).",
)
CHANGE_TO_RESTART = Histogram(
    "restarter_change_to_restart_seconds",
    "Seconds from seeing a change to restarting a workload for it.",
    buckets=(1, 10, 60, 300, 900, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400),
)
INVALID_WINDOWS = Counter(
    "restarter_invalid_windows_total",
    "Changes or first sights of sources whose window could not be read, by source kind.",
    ["kind"],
)
API_ERRORS = Counter(
    "restarter_api_errors_total",
    "Failed requests to the Kubernetes API (each attempt, retried ones too), by verb and "
    "HTTP status (0: no answer). 404 and 409 are expected answers and not counted.",
    ["verb", "code"],
)
SOURCE_PATCH_ERRORS = Counter(
    "restarter_source_patch_errors_total",
    "Patches of a Secret or ConfigMap (its checksum, key digests or change annotation) "
    "that the API refused or did not answer, by source kind and HTTP status (0: no "
    "answer). Each is also a Warning Event on the source.",
    ["kind", "status"],
)
HELD = Counter(
    "restarter_restarts_held_total",
    "Due restarts found held (each hold counted once per workload, when first reported), "
    "by workload kind and where the hold was set: workload, namespace (also a namespace "
    "that could not be read) or operator.",
    ["kind", "where"],
)
DEADLINE_RESTARTS = Counter(
    "restarter_deadline_restarts_total",
    "Restarts moved before their window by a certificate deadline, by workload kind and "
    "whether the certificate the pods ran with had already expired: before, expired.",
    ["kind", "when"],
)
EVENTS_FAILED = Counter(
    "restarter_events_failed_total",
    "Events restarter posted that the API did not take (refused, or left without an "
    "answer after retries), by reason. What they reported was done all the same; its log "
    "line says so.",
    ["reason"],
)
NOTIFICATIONS = Counter(
    "restarter_notifications_total",
    "Notification messages (each a batch of one namespace's Events) by result: sent, "
    "failed (a URL did not take it).",
    ["result"],
)
GATE_ERRORS = Counter(
    "restarter_gate_errors_total",
    "Reads of a gate's source that failed, by gate: alerts (Alertmanager) or pods. Restarts "
    "wait meanwhile unless the gates fail open.",
    ["gate"],
)
GATE_FAILED_OPEN = Counter(
    "restarter_gate_failed_open_total",
    "Restarts let through although a gate could not be read (the gates fail open), by gate.",
    ["gate"],
)
CHANGES_HALTED = Counter(
    "restarter_changes_halted_total",
    "Changes halted by the circuit breaker: a workload of the change's first wave failed "
    "with the new data, and the rest of its dependents stay pending.",
    ["kind"],
)
CHANGES_RELEASED = Counter(
    "restarter_changes_released_total",
    "Changes let through to the rest of their dependents, by how: healthy (the first wave "
    "soaked), group (the first wave of its rollout group decided), resumed (by hand) or "
    "expired (the halt expiry passed).",
    ["how"],
)
CSI_SERVED = Gauge(
    "restarter_csi_served",
    "With --csi: 1 while the Secrets Store CSI Driver's SecretProviderClassPodStatus kind is "
    "served (its CRDs installed), 0 while restarter waits for it.",
)
LEADER = Gauge(
    "restarter_leader",
    "1 while this replica is the one acting (holds the Lease or runs alone), else 0.",
)

for _result in ("restarted", "deferred", "failed", "skipped"):
    RESTARTS.labels("Deployment", _result)


class PendingWorkloads:
    """The pending gauge, from the workloads the watch streams see."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, set[tuple[str, str]]] = {}

    def observe(self, kind: str, namespace: str, name: str, pending: bool) -> None:
        with self._lock:
            names = self._pending.setdefault(kind, set())
            if pending:
                names.add((namespace, name))
            else:
                names.discard((namespace, name))
            PENDING.labels(kind).set(len(names))


def serve(port: int) -> None:
    """The ``/metrics`` endpoint on every interface, in a daemon thread."""
    prometheus_client.start_http_server(port)
