"""The stamp: the pending marks restarter writes on a dependent of a changed source.
``model.pending`` reads them back (with everything else a pending workload carries)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from restarter.model import keys
from restarter.model.references import MARKED_KINDS, KeyNames
from restarter.model.windows import WindowRequest


def stamp_patch(
    kind: str,
    name: str,
    seen: dt.datetime,
    request: WindowRequest,
    change: str | None = None,
    changed_keys: KeyNames = None,
    extra: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Merge patch marking a workload as pending for one change of the named source (the
    changed keys it reads named in the mark, never their values; None: unknown).

    Marks only: the pending label and the finalizer, which hand the workload to kopf's
    timer, come when its window opens (``admit_patch``), so a workload waiting hours for
    its window costs kopf nothing; a stamp sent while its window is open carries them
    itself (``timer_admission.admitted_stamp``).
    """
    return {
        "metadata": {
            "annotations": {
                keys.pending_key(kind, name): str(int(seen.timestamp())),
                keys.window_key(kind, name): request.to_mark(
                    f"{MARKED_KINDS[kind]}/{name}", change, changed_keys, extra
                ),
            }
        }
    }


#: Entries kept in restarted-for: more than the sources any workload uses.
MAX_RECORDED = 64


def has_pending(annotations: Mapping[str, str] | None) -> bool:
    """True when the workload carries any pending mark (the timer's filter)."""
    return any(key.startswith(keys.PENDING_MARK + "/") for key in (annotations or {}))
