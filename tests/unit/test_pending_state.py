"""A workload's pending state, read once from its annotations: every field of every mark,
the record of its restarts, its certificate deadline, and what the readers make of them."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from restarter.model import certificates, keys, pending, restart_decisions, stamps, windows
from restarter.model.restart_decisions import Action
from restarter.services.settings import Settings

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
SETTINGS = Settings(timezone="Europe/Warsaw", window_length=HOUR)


def stamped(name: str, request: windows.WindowRequest, **extra: int) -> dict[str, str]:
    patch = stamps.stamp_patch(
        "secret", name, NOW, request, "812", frozenset({"password"}), extra or None
    )
    annotations: dict[str, str] = patch["metadata"]["annotations"]
    return annotations


def test_a_mark_is_read_once_into_every_field_its_json_names() -> None:
    request = windows.WindowRequest("03.00", "UTC", HOUR)
    annotations = stamped("db", request, wave=2, quiet=30)
    [mark] = pending.read(annotations).marks
    assert mark == pending.PendingMark(
        token="secret.db",
        since=int(NOW.timestamp()),
        value=annotations[keys.window_key("secret", "db")],
        change="812",
        source="Secret/db",
        wave=pending.REST,
        quiet=30.0,
        named_keys=(("password",), 0),
        request=request,
        problem=None,
    )


def test_the_workloads_own_annotations_are_read_beside_its_marks() -> None:
    deadline = {
        f"{keys.DEADLINE}/{int(NOW.timestamp())}": json.dumps(
            {"notAfter": "2026-12-08T00:00:00Z", "source": "Secret/tls"}
        )
    }
    annotations = {
        **stamped("db", windows.WindowRequest("03.00", "UTC", HOUR)),
        keys.RESTARTED_FOR: json.dumps({"secret.api": "77"}),
        keys.RESTART_TS: "1700000000",
        keys.IGNORE: "true",
        **deadline,
    }
    state = pending.read(annotations)
    assert state.tokens == ("secret.db",)
    assert state.restarted_for == {"secret.api": "77"}
    assert state.restart_ts == 1700000000
    assert state.opted_out
    assert state.deadline == certificates.Deadline(
        NOW, dt.datetime(2026, 12, 8, tzinfo=dt.UTC), "Secret/tls"
    )


def test_a_now_mark_is_read_in_the_operators_zone_when_it_is_given() -> None:
    annotations = stamped("db", windows.WindowRequest(windows.NOW, "UTC", HOUR))
    [mark] = pending.read(annotations, SETTINGS).marks
    assert mark.request == windows.WindowRequest(windows.NOW, "Europe/Warsaw", HOUR)
    [unzoned] = pending.read(annotations).marks
    assert unzoned.request is not None
    assert isinstance(unzoned.request.window(), windows.Immediately)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param(None, "pending mark without its restart-at mark", id="no-window-mark"),
        pytest.param("03.00", "mark '03.00' is not a window restarter wrote", id="not-json"),
        pytest.param(
            json.dumps({"at": "25.00", "source": "Secret/db"}),
            "window '25.00' is not HH.MM (24-hour, e.g. 03.00 or 23.45)",
            id="bad-window",
        ),
    ],
)
def test_an_unreadable_mark_keeps_the_problem_the_timer_reports(
    value: str | None, problem: str
) -> None:
    annotations = {keys.pending_key("secret", "db"): str(int(NOW.timestamp()))}
    if value is not None:
        annotations[keys.window_key("secret", "db")] = value
    [mark] = pending.read(annotations, SETTINGS).marks
    assert (mark.request, mark.problem) == (None, problem)
    body = {"kind": "Deployment", "metadata": {"name": "web", "annotations": annotations}}
    decision = restart_decisions.decide_restart(body, SETTINGS, NOW)
    assert decision.action is Action.INVALID
    assert decision.problems == (f"secret.db: {problem}",)


def test_a_restart_recorded_for_every_mark_is_found_and_a_clear_is_not() -> None:
    marked = pending.read(stamped("db", windows.WindowRequest("03.00", "UTC", HOUR)))
    later = str(int(NOW.timestamp()) + 5)
    restarted = {keys.RESTARTED_FOR: json.dumps({"secret.db": "812"}), keys.RESTART_TS: later}
    assert pending.read(restarted).restart_for(marked) == int(later)
    assert pending.read({keys.RESTART_TS: later}).restart_for(marked) is None
    earlier = {**restarted, keys.RESTART_TS: str(int(NOW.timestamp()) - 5)}
    assert pending.read(earlier).restart_for(marked) is None
