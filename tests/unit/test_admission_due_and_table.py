"""Admission: when a pending workload is for kopf's timer, the patches that hand it over and
back, and the table of workloads waiting for their window."""

from __future__ import annotations

import datetime as dt

import pytest

from restarter.model import keys
from restarter.model.kinds import KINDS
from restarter.model.stamps import stamp_patch
from restarter.model.timer_admission import (
    admission_due,
    admit_patch,
    admitted_stamp,
    due_at_stamp,
    hand_back_patch,
)
from restarter.model.windows import WindowRequest
from restarter.restarting.admitting import Admissions
from tests.unit.test_decisions_restart import SETTINGS, warsaw, workload

# --- when ---------------------------------------------------------------------------------


def test_a_workload_waiting_hours_is_due_at_its_window_start() -> None:
    now = warsaw("2026-12-02T15:15")
    assert admission_due(workload({"db": "03.00"}), SETTINGS, now) == (
        warsaw("2026-12-03T03:00").timestamp()
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(workload({"db": "03.00"}), id="window-open"),
        pytest.param(workload({"db": "now"}), id="now"),
        pytest.param(workload({"db": "03.00"}, paused=True), id="paused-to-report"),
        pytest.param(workload({"db": "27.00"}), id="unreadable-to-report"),
        pytest.param(
            workload({"db": "15.00"}, extra={keys.IGNORE: "true"}), id="opted-out-to-clear"
        ),
    ],
)
def test_a_workload_with_something_for_its_timer_to_do_is_due_now(body: dict) -> None:
    now = warsaw("2026-12-02T03:20")
    assert admission_due(body, SETTINGS, now) == now.timestamp()


def test_a_workload_restarted_in_the_open_window_is_due_at_the_next_one_not_now() -> None:
    # Changed again after this window restarted it: a window restarts a workload once.
    now = warsaw("2026-12-02T03:20")
    body = workload({"db": "03.00"}, restart_ts=warsaw("2026-12-02T03:05"))
    assert admission_due(body, SETTINGS, now) == warsaw("2026-12-03T03:00").timestamp()


def test_the_earliest_of_several_marks_windows_counts() -> None:
    now = warsaw("2026-12-02T15:15")
    body = workload({"db": "03.00", "tls": "22.30"})
    assert admission_due(body, SETTINGS, now) == warsaw("2026-12-02T22:30").timestamp()


# --- the patches ------------------------------------------------------------------------


def test_admission_sets_label_and_finalizer_only_at_the_version_the_marks_were_read() -> None:
    assert admit_patch(workload({"db": "03.00"})["metadata"]) == {
        "metadata": {
            "resourceVersion": "4242",
            "labels": {keys.PENDING_LABEL: "true"},
            "finalizers": [keys.FINALIZER],
        }
    }


def test_handing_back_removes_label_and_finalizer_and_keeps_the_marks() -> None:
    patch = hand_back_patch(workload({"db": "03.00"})["metadata"])
    assert patch == {
        "metadata": {
            "resourceVersion": "4242",
            "labels": {keys.PENDING_LABEL: None},
            "$deleteFromPrimitiveList/finalizers": [keys.FINALIZER],
        }
    }


# --- the table ----------------------------------------------------------------------------

KEY_A, KEY_B, KEY_C = (("deployments", "ns", name) for name in ("a", "b", "c"))


def test_only_due_workloads_are_taken_earliest_due_first() -> None:
    table = Admissions(limit=10)
    table.wait(KEY_A, "1", due=300.0)
    table.wait(KEY_B, "2", due=100.0)
    table.wait(KEY_C, "3", due=200.0)
    assert table.take_due(now=250.0) == [(KEY_B, "2"), (KEY_C, "3")]
    assert table.counts() == (1, 2)
    assert table.take_due(now=299.0) == []
    assert table.take_due(now=300.0) == [(KEY_A, "1")]


def test_no_more_than_the_limit_hold_the_label_and_a_restart_frees_a_place() -> None:
    table = Admissions(limit=2)
    for name, key in (("1", KEY_A), ("2", KEY_B), ("3", KEY_C)):
        table.wait(key, name, due=0.0)
    assert [key for key, _ in table.take_due(now=1.0)] == [KEY_A, KEY_B]
    assert table.take_due(now=1.0) == []
    table.forget(KEY_A)  # restarted: its marks and label are gone
    assert table.take_due(now=1.0) == [(KEY_C, "3")]


def test_a_newer_sight_replaces_the_version_and_due_instant() -> None:
    table = Admissions(limit=10)
    table.wait(KEY_A, "1", due=100.0)
    table.wait(KEY_A, "5", due=500.0)  # stamped again for a later window
    assert table.take_due(now=200.0) == []
    assert table.take_due(now=500.0) == [(KEY_A, "5")]


def test_a_workload_seen_labelled_counts_and_one_gone_is_forgotten() -> None:
    table = Admissions(limit=1)
    table.labelled(KEY_A)  # admitted before a restart of the operator
    table.wait(KEY_B, "2", due=0.0)
    assert table.take_due(now=1.0) == []
    table.forget(KEY_B)
    table.forget(KEY_A)
    assert table.counts() == (0, 0)


def test_a_refused_label_frees_its_place_and_is_retried_only_if_nothing_newer_came() -> None:
    table = Admissions(limit=1)
    table.wait(KEY_A, "1", due=0.0)
    assert table.take_due(now=1.0) == [(KEY_A, "1")]
    table.refused(KEY_A, "1", retry_at=6.0)  # the API was away
    assert table.take_due(now=5.0) == []
    assert table.take_due(now=6.0) == [(KEY_A, "1")]
    table.wait(KEY_A, "2", due=7.0)  # its newer version arrived meanwhile
    table.refused(KEY_A, "1", retry_at=None)  # a conflict: the newer one stands
    assert table.counts() == (1, 0)
    assert table.take_due(now=7.0) == [(KEY_A, "2")]


def test_a_handed_back_workload_waits_again_for_its_window() -> None:
    table = Admissions(limit=1)
    table.labelled(KEY_A)
    table.wait(KEY_A, "9", due=dt.datetime(2026, 12, 3, tzinfo=dt.UTC).timestamp())
    assert table.counts() == (1, 0)


# --- a stamp sent while its window is open ------------------------------------------------


def _stamp(window: str, now: dt.datetime, quiet: int | None = None) -> dict:
    """A stamp's patch as a fan-out sends it: the marks of one change of Secret db."""
    extra = {"quiet": quiet} if quiet else None
    request = WindowRequest(window, "Europe/Warsaw", dt.timedelta(hours=1))
    return stamp_patch("secret", "db", now, request, "7", frozenset({"password"}), extra)


def test_a_stamp_in_its_open_window_hands_its_workload_to_the_timer() -> None:
    now = warsaw("2026-12-02T03:20")
    assert due_at_stamp("deployments", _stamp("03.00", now), SETTINGS, now)
    assert due_at_stamp("rollouts", _stamp("03.00", now), SETTINGS, now)
    assert not due_at_stamp("deployments", _stamp("15.00", now), SETTINGS, now)


def test_a_stamp_held_by_a_quiet_time_waits_for_the_admitter() -> None:
    # The default quiet time (10 s) too: the admitter hands it over when it ends.
    now = warsaw("2026-12-02T03:20")
    assert not due_at_stamp("deployments", _stamp("03.00", now, quiet=10), SETTINGS, now)
    assert not due_at_stamp("deployments", _stamp("03.00", now, quiet=600), SETTINGS, now)


def test_an_admitted_stamp_carries_the_marks_the_label_and_the_finalizer() -> None:
    now = warsaw("2026-12-02T03:20")
    stamp = _stamp("03.00", now)
    admitted = admitted_stamp(stamp, KINDS["deployments"])
    assert admitted == {
        "metadata": {
            "annotations": stamp["metadata"]["annotations"],
            "labels": {keys.PENDING_LABEL: "true"},
            "finalizers": [keys.FINALIZER],
        }
    }
    assert "labels" not in stamp["metadata"]  # the plan's shared stamp is left as it was
    # A Rollout takes a JSON merge patch, which would replace its finalizer list: the
    # label only, and kopf adds the finalizer before its first tick.
    assert admitted_stamp(stamp, KINDS["rollouts"])["metadata"] == {
        "annotations": stamp["metadata"]["annotations"],
        "labels": {keys.PENDING_LABEL: "true"},
    }


def test_a_place_reserved_by_a_stamp_counts_and_is_freed_when_the_stamp_fails() -> None:
    table = Admissions(limit=2)
    table.labelled(KEY_A)
    assert table.reserve(KEY_A) is False  # held already: nothing to free on failure
    assert table.reserve(KEY_B) is True
    assert table.reserve(KEY_C) is None  # no place: stamped alone, admitted later
    table.wait(KEY_C, "3", due=0.0)
    assert table.take_due(now=1.0) == []
    table.unreserve(KEY_B)  # its stamp was refused
    assert table.take_due(now=1.0) == [(KEY_C, "3")]
