"""Change classification, stamp patches and the restart decision."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from restarter import keys
from restarter.checksums import checksum
from restarter.decisions import (
    Action,
    Change,
    classify,
    decide_restart,
    has_pending,
    pending_marks,
    stamp_patch,
)
from restarter.schedule import DailyWindow
from restarter.settings import Settings

UTC = dt.UTC
SETTINGS = Settings(timezone="UTC", window_length=dt.timedelta(hours=1))
IN_WINDOW = dt.datetime(2026, 12, 2, 3, 20, tzinfo=UTC)
OUTSIDE = dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def secret(data: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "db", "annotations": annotations or {}}, "data": data}


def workload(
    marks: dict[str, str], *, paused: bool = False, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    annotations = {"unrelated": "x", **(extra or {})}
    for name, window in marks.items():
        annotations[keys.pending_key("secret", name)] = "1796000000"
        annotations[keys.window_key("secret", name)] = window
    return {
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "resourceVersion": "42",
            "annotations": annotations,
        },
        "spec": {"paused": paused},
    }


def test_first_sight_is_a_baseline() -> None:
    assert classify(secret({"a": "MQ=="}))[0] is Change.BASELINE


def test_equal_data_is_unchanged_whatever_the_metadata() -> None:
    recorded = {keys.CHECKSUM: checksum({"a": "MQ=="}), "cert-manager.io/x": "y"}
    assert classify(secret({"a": "MQ=="}, recorded)) == (Change.UNCHANGED, recorded[keys.CHECKSUM])


def test_different_data_is_a_change() -> None:
    recorded = {keys.CHECKSUM: checksum({"a": "MQ=="})}
    change, current = classify(secret({"a": "Mg=="}, recorded))
    assert change is Change.CHANGED and current == checksum({"a": "Mg=="})


def test_stamp_patch_records_time_and_window() -> None:
    window = DailyWindow.parse("03.00", dt.timedelta(hours=1), UTC)
    patch = stamp_patch("secret", "db", dt.datetime(2026, 12, 2, 15, 15, tzinfo=UTC), window)
    assert patch == {
        "metadata": {
            "annotations": {
                "pending-restart.restarter.io/secret.db": "1796224500",
                "restart-at.restarter.io/secret.db": "03.00",
            }
        }
    }


def test_marks_are_read_back_in_pairs() -> None:
    annotations = workload({"a": "03.00", "b": "04.30"})["metadata"]["annotations"]
    assert [(m.token, m.since, m.window) for m in pending_marks(annotations)] == [
        ("secret.a", 1796000000, "03.00"),
        ("secret.b", 1796000000, "04.30"),
    ]
    assert has_pending(annotations)
    assert not has_pending({"unrelated": "x"}) and not has_pending(None)


def test_waits_outside_the_window_and_says_when() -> None:
    decision = decide_restart(workload({"db": "03.00"}), SETTINGS, OUTSIDE)
    assert decision.action is Action.WAIT
    assert decision.next_start == dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
    assert decision.patch == {}


def test_restarts_inside_the_window_with_one_patch() -> None:
    decision = decide_restart(workload({"db": "03.00", "api": "05.00"}), SETTINGS, IN_WINDOW)
    assert decision.action is Action.RESTART
    meta = decision.patch["metadata"]
    assert meta["resourceVersion"] == "42"
    assert meta["annotations"][keys.RESTART_TS] == str(int(IN_WINDOW.timestamp()))
    cleared = {k for k, v in meta["annotations"].items() if v is None}
    assert cleared == {keys.pending_key("secret", n) for n in ("db", "api")} | {
        keys.window_key("secret", n) for n in ("db", "api")
    }
    template = decision.patch["spec"]["template"]["metadata"]["annotations"]
    assert template == {keys.RESTARTED_AT: "2026-12-02T03:20:00Z"}


def test_paused_deployments_are_not_restarted() -> None:
    decision = decide_restart(workload({"db": "03.00"}, paused=True), SETTINGS, IN_WINDOW)
    assert decision.action is Action.PAUSED and decision.patch == {}


def test_a_bad_mark_is_reported_and_restarts_nothing() -> None:
    decision = decide_restart(workload({"db": "abc"}), SETTINGS, IN_WINDOW)
    assert decision.action is Action.INVALID and decision.problems


def epoch(*parts: int) -> str:
    return str(int(dt.datetime(*parts, tzinfo=UTC).timestamp()))


@pytest.mark.parametrize(
    ("restart_ts", "action"),
    [
        (epoch(2026, 12, 1, 3, 10), Action.RESTART),  # yesterday's occurrence
        (epoch(2026, 12, 2, 2, 59), Action.RESTART),  # before this occurrence opened
        (epoch(2026, 12, 2, 3, 5), Action.WAIT),  # already restarted in this one
    ],
)
def test_at_most_one_restart_per_occurrence(restart_ts: str, action: Action) -> None:
    pending = workload({"db": "03.00"}, extra={keys.RESTART_TS: restart_ts})
    assert decide_restart(pending, SETTINGS, IN_WINDOW).action is action


def test_window_is_read_in_the_operator_zone() -> None:
    warsaw = Settings(timezone="Europe/Warsaw", window_length=dt.timedelta(hours=1))
    # 03:20 UTC is 04:20 in Warsaw: the 03.00 window closed at 04:00 local.
    assert decide_restart(workload({"db": "03.00"}), warsaw, IN_WINDOW).action is Action.WAIT


def test_a_recreated_secret_with_new_data_counts_as_changed() -> None:
    remembered = checksum({"a": "MQ=="})
    assert classify(secret({"a": "Mg=="}), remembered)[0] is Change.CHANGED
    assert classify(secret({"a": "MQ=="}), remembered)[0] is Change.BASELINE
