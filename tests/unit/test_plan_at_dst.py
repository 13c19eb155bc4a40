"""``restarter plan --at``: the instant read by the windows' DST rules, and the plan as of
it agreeing with the timer's own decision, across DST nights in Europe/Warsaw (one hour)
and Australia/Lord_Howe (thirty minutes)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from restarter.commands import planning
from restarter.commands.plan_at import parse_at
from restarter.model import keys, restart_decisions
from restarter.model.restart_decisions import Action
from restarter.model.windows import ScheduleError
from restarter.services.settings import Settings

WARSAW, LORD_HOWE = "Europe/Warsaw", "Australia/Lord_Howe"


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-03-29T03:00+02:00", "2026-03-29T01:00"),
        ("2026-03-29T01:00Z", "2026-03-29T01:00"),
        # Warsaw springs forward at 02:00: 02:30 does not exist, the gap ends at 03:00 CEST.
        ("2026-03-29 02:30 Europe/Warsaw", "2026-03-29T01:00"),
        # Warsaw falls back at 03:00: 02:30 exists twice, the first (CEST) is meant.
        ("2026-10-25 02:30 Europe/Warsaw", "2026-10-25T00:30"),
        # Lord Howe springs forward 30 minutes at 02:00: 02:15 does not exist.
        ("2026-10-04 02:15 Australia/Lord_Howe", "2026-10-03T15:30"),
        # Lord Howe falls back 30 minutes at 02:00: 01:45 exists twice (+11, then +10:30).
        ("2026-04-05 01:45 Australia/Lord_Howe", "2026-04-04T14:45"),
        ("2026-04-05T01:45+10:30", "2026-04-04T15:15"),
    ],
)
def test_at_reads_an_offset_or_a_local_time_in_a_zone(text: str, instant: str) -> None:
    assert parse_at(text) == utc(instant)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-03-29T03:00", "has no offset"),
        ("2026-03-29 03:00 Mars/Base", "Mars/Base"),
        ("2026-03-29T03:00+02:00 Europe/Warsaw", "not both"),
        ("sunday 3am", "is not like"),
    ],
)
def test_at_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_at(text)


def pending(at: str, zone: str, length: str = "1h") -> dict[str, object]:
    window = json.dumps({"at": at, "length": length, "source": "Secret/db", "timezone": zone})
    annotations = {
        keys.pending_key("secret", "db"): str(int(utc("2026-01-01T00:00").timestamp())),
        keys.window_key("secret", "db"): window,
    }
    metadata = {"name": "web", "namespace": "shop", "annotations": annotations}
    return {"kind": "Deployment", "metadata": metadata, "spec": {}}


CASES = [
    # (window, zone, length, --at, state, next restart in UTC)
    ("02.30", WARSAW, "1h", "2026-03-29 01:59 Europe/Warsaw", planning.WAITING, "2026-03-29T01:00"),
    # A window at 02.30, a time that does not exist that day, opens when the gap ends.
    ("02.30", WARSAW, "1h", "2026-03-29 03:00 Europe/Warsaw", planning.DUE, "2026-03-29T01:00"),
    # A window at a time that exists twice opens at the first; it is still open at 02:45
    # CEST, and closed at the second 02:45 (CET): it never opens twice that night.
    ("02.30", WARSAW, "1h", "2026-10-25T02:45+02:00", planning.DUE, "2026-10-25T00:30"),
    ("02.30", WARSAW, "1h", "2026-10-25T02:45+01:00", planning.WAITING, "2026-10-26T01:30"),
    ("02.15", LORD_HOWE, "1h", "2026-10-04T01:59+10:30", planning.WAITING, "2026-10-03T15:30"),
    (
        "02.15",
        LORD_HOWE,
        "1h",
        "2026-10-04 02:30 Australia/Lord_Howe",
        planning.DUE,
        "2026-10-03T15:30",
    ),
    ("01.45", LORD_HOWE, "20m", "2026-04-05T01:50+11:00", planning.DUE, "2026-04-04T14:45"),
    ("01.45", LORD_HOWE, "20m", "2026-04-05T01:45+10:30", planning.WAITING, "2026-04-05T15:15"),
]


@pytest.mark.parametrize(("window", "zone", "length", "at", "state", "restart"), CASES)
def test_the_plan_as_of_an_instant_agrees_with_the_timer(
    window: str, zone: str, length: str, at: str, state: str, restart: str
) -> None:
    instant = parse_at(at)
    body = pending(window, zone, length)
    (row,) = planning.workload_rows("deployments", body, instant, Settings())
    assert (row.state, row.next_restart) == (state, utc(restart))
    timer = restart_decisions.decide_restart(body, Settings(), instant)
    assert timer.action is (Action.RESTART if state == planning.DUE else Action.WAIT)
