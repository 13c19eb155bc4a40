"""Certificate deadlines: the expiry recorded from a source's data, the deadline stamped on
its dependents, and the timer's and plan's decisions with it."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from restarter.commands import planning
from restarter.model import certificates, keys, pending, restart_decisions, timer_admission
from restarter.model.restart_decisions import Action
from restarter.model.windows import ScheduleError
from restarter.services.settings import Settings
from tests.certificates import private_key, self_signed

NOW = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def pem(not_after: dt.datetime, name: str = "test") -> bytes:
    return self_signed(not_after, name)


def b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def tls_secret(annotations: dict[str, str] | None = None) -> dict[str, object]:
    chain = pem(NOW + 5 * HOUR, "leaf") + pem(NOW + 50 * HOUR, "intermediate")
    return {
        "metadata": {"name": "tls", "annotations": annotations or {}},
        "data": {
            "tls.crt": b64(chain),
            "ca.crt": b64(pem(NOW + 500 * HOUR, "root")),
            "tls.key": b64(private_key()),
            "broken.pem": b64(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n"),
            "password": b64(b"hunter2"),
        },
    }


def test_the_earliest_expiry_among_every_certificate_of_a_secret() -> None:
    assert certificates.earliest_not_after("secret", tls_secret()) == NOW + 5 * HOUR
    assert certificates.expiry_annotation("secret", tls_secret()) == {
        keys.NOT_AFTER: "2025-01-01T17:00:00Z"
    }


def test_a_configmap_certificate_in_plain_data_counts_too() -> None:
    bundle = {"metadata": {}, "data": {"bundle.pem": pem(NOW + 2 * HOUR).decode()}}
    assert certificates.earliest_not_after("configmap", bundle) == NOW + 2 * HOUR


def test_a_source_without_a_certificate_records_nothing() -> None:
    plain = {"metadata": {}, "data": {"password": b64(b"secret")}}
    assert certificates.earliest_not_after("secret", plain) is None
    assert certificates.expiry_annotation("secret", plain) == {}
    assert certificates.expiry_current("secret", plain)


def test_an_expiry_recorded_for_data_that_holds_no_certificate_any_more_is_removed() -> None:
    plain = {"metadata": {"annotations": {keys.NOT_AFTER: "2025-01-01T17:00:00Z"}}, "data": {}}
    assert certificates.expiry_annotation("secret", plain) == {keys.NOT_AFTER: None}
    assert not certificates.expiry_current("secret", plain)


def test_the_recorded_expiry_is_current_only_for_the_data_it_was_read_from() -> None:
    recorded = tls_secret({keys.NOT_AFTER: "2025-01-01T17:00:00Z"})
    assert certificates.expiry_current("secret", recorded)
    stale = tls_secret({keys.NOT_AFTER: "2025-01-01T16:00:00Z"})
    assert not certificates.expiry_current("secret", stale)


def test_the_deadline_is_the_recorded_expiry_less_the_margin() -> None:
    metadata = {"annotations": {keys.NOT_AFTER: "2025-01-01T17:00:00Z"}}
    stamped = certificates.stamp_deadline(metadata, "Secret/tls", HOUR)
    at = int((NOW + 4 * HOUR).timestamp())
    assert stamped == {
        f"{keys.DEADLINE}/{at}": '{"notAfter":"2025-01-01T17:00:00Z","source":"Secret/tls"}'
    }


def test_a_source_overrides_the_margin_and_a_bad_one_is_an_error() -> None:
    metadata = {
        "annotations": {keys.NOT_AFTER: "2025-01-01T17:00:00Z", keys.CERTIFICATE_MARGIN: "3h"}
    }
    (key,) = certificates.stamp_deadline(metadata, "Secret/tls", HOUR) or {}
    assert key == f"{keys.DEADLINE}/{int((NOW + 2 * HOUR).timestamp())}"
    metadata["annotations"][keys.CERTIFICATE_MARGIN] = "soon"
    with pytest.raises(ScheduleError, match="certificate-margin"):
        certificates.stamp_deadline(metadata, "Secret/tls", HOUR)


def test_no_recorded_expiry_stamps_no_deadline() -> None:
    assert certificates.stamp_deadline({"annotations": {}}, "Secret/tls", HOUR) is None


def deadline(at: dt.datetime, not_after: dt.datetime, source: str = "Secret/tls") -> dict[str, str]:
    value = {"notAfter": certificates.format_instant(not_after), "source": source}
    return {f"{keys.DEADLINE}/{int(at.timestamp())}": json.dumps(value)}


def test_a_workload_pending_for_several_changes_keeps_the_earliest_deadline() -> None:
    annotations = deadline(NOW + 3 * HOUR, NOW + 4 * HOUR) | deadline(
        NOW + HOUR, NOW + 2 * HOUR, "Secret/other"
    )
    annotations[f"{keys.DEADLINE}/garbage"] = "{}"
    found = pending.read(annotations).deadline
    assert found == certificates.Deadline(NOW + HOUR, NOW + 2 * HOUR, "Secret/other")


def workload(at: str, extra: dict[str, str]) -> dict[str, object]:
    window = json.dumps({"at": at, "length": "1h", "source": "Secret/tls", "timezone": "UTC"})
    annotations = {
        keys.pending_key("secret", "tls"): str(int((NOW - HOUR).timestamp())),
        keys.window_key("secret", "tls"): window,
        **extra,
    }
    metadata = {"name": "web", "namespace": "shop", "annotations": annotations}
    return {"kind": "Deployment", "metadata": metadata, "spec": {}}


def test_a_deadline_past_restarts_before_a_window_hours_away() -> None:
    body = workload("18.00", deadline(NOW - 60 * dt.timedelta(seconds=1), NOW + HOUR))
    decision = restart_decisions.decide_restart(body, Settings(), NOW)
    assert decision.action is Action.RESTART
    assert decision.deadline is not None
    assert decision.due == NOW - dt.timedelta(minutes=1)
    assert decision.closes is None  # pacing may hold it; no window closes on it
    assert decision.deadline.describe(NOW) == (
        "before its window: the certificate it runs with (Secret/tls) expires at "
        "2025-01-01T13:00:00Z"
    )


def test_a_deadline_ahead_makes_the_workload_due_then() -> None:
    body = workload("18.00", deadline(NOW + 2 * HOUR, NOW + 3 * HOUR))
    decision = restart_decisions.decide_restart(body, Settings(), NOW)
    assert decision.action is Action.WAIT
    assert decision.next_due == NOW + 2 * HOUR
    assert timer_admission.admission_due(body, Settings(), NOW) == (NOW + 2 * HOUR).timestamp()


def test_a_window_before_the_deadline_restarts_in_it_as_today() -> None:
    body = workload("11.30", deadline(NOW + 2 * HOUR, NOW + 3 * HOUR))
    decision = restart_decisions.decide_restart(body, Settings(), NOW)
    assert decision.action is Action.RESTART and decision.deadline is None
    assert (
        restart_decisions.decide_restart(workload("14.00", {}), Settings(), NOW).action
        is Action.WAIT
    )


def test_an_expired_certificate_restarts_at_once_and_says_it_expired() -> None:
    body = workload("18.00", deadline(NOW - 2 * HOUR, NOW - HOUR))
    decision = restart_decisions.decide_restart(body, Settings(), NOW)
    assert decision.action is Action.RESTART
    assert decision.deadline is not None and decision.deadline.expired(NOW)
    assert "expired at 2025-01-01T11:00:00Z" in decision.deadline.describe(NOW)


def test_the_restart_removes_the_deadlines_with_the_marks() -> None:
    body = workload("18.00", deadline(NOW - HOUR, NOW + HOUR))
    decision = restart_decisions.decide_restart(body, Settings(), NOW)
    removed = decision.patch["metadata"]["annotations"]
    assert removed[f"{keys.DEADLINE}/{int((NOW - HOUR).timestamp())}"] is None


def test_plan_shows_the_restart_moved_before_its_window_and_why() -> None:
    body = workload("18.00", deadline(NOW + 2 * HOUR, NOW + 3 * HOUR))
    (row,) = planning.workload_rows("deployments", body, NOW, Settings())
    assert row.next_restart == NOW + 2 * HOUR
    assert row.state == planning.WAITING
    assert row.notes[-1].startswith("before its window: the certificate it runs with")
    (later,) = planning.workload_rows("deployments", body, NOW + 2 * HOUR, Settings())
    assert later.state == planning.DUE
