"""``restarter plan``'s rows and renderings, from marks as the operator writes them."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from restarter.commands import planning
from restarter.commands.planning import PlanRow
from restarter.model import keys
from restarter.model.windows import MARK_KEYS, WindowRequest

HOUR = dt.timedelta(hours=1)
#: A Wednesday; Warsaw is UTC+1 (CET), Kolkata UTC+5:30 (IST, no DST).
NOW = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
SEEN = dt.datetime(2025, 1, 1, 10, 0, tzinfo=dt.UTC)


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def mark(kind: str, name: str, window: str, seen: dt.datetime = SEEN) -> dict[str, str]:
    return {
        keys.pending_key(kind, name): str(int(seen.timestamp())),
        keys.window_key(kind, name): window,
    }


def daily(at: str, zone: str, source: str, length: str = "1h") -> str:
    return json.dumps({"at": at, "length": length, "source": source, "timezone": zone})


def cron(expression: str, zone: str, source: str) -> str:
    return json.dumps(
        {"at": "cron", "cron": expression, "length": "1h", "source": source, "timezone": zone}
    )


def workload(
    annotations: dict[str, str], name: str = "web", paused: bool = False
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {"paused": paused},
    }


def rows_of(
    annotations: dict[str, str],
    plural: str = "deployments",
    now: dt.datetime = NOW,
    zone: str = "UTC",
    paused: bool = False,
) -> list[PlanRow]:
    return planning.plan([(plural, workload(annotations, paused=paused))], now, zone, HOUR)


def test_a_daily_mark_restarts_at_the_next_start_in_its_own_zone() -> None:
    [row] = rows_of(mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")))
    assert (row.namespace, row.kind, row.name, row.source, row.mark) == (
        "shop",
        "Deployment",
        "web",
        "Secret/db",
        "secret.db",
    )
    assert row.changed_at == SEEN
    assert row.window == "03.00 Europe/Warsaw (1h long)"
    assert row.timezone == "Europe/Warsaw"
    assert row.next_restart == utc("2025-01-02T02:00")
    assert (row.state, row.notes) == ("waiting", ())


def test_a_cron_mark_skips_to_the_next_matching_weekday_in_its_zone() -> None:
    friday = utc("2025-01-03T12:00")
    [row] = rows_of(
        mark("configmap", "cfg", cron("0 3 * * 1-5", "Asia/Kolkata", "ConfigMap/cfg")),
        now=friday,
    )
    assert row.source == "ConfigMap/cfg"
    assert row.window == "cron '0 3 * * 1-5' Asia/Kolkata (1h long)"
    # Monday 03:00 IST is Sunday 21:30 UTC.
    assert row.next_restart == utc("2025-01-05T21:30")


def test_a_now_mark_is_due_at_once_and_shown_in_the_default_zone() -> None:
    [row] = rows_of(
        mark("secret", "db", json.dumps({"at": "now", "source": "Secret/db"})),
        zone="Europe/Warsaw",
    )
    assert (row.window, row.timezone) == ("now", "Europe/Warsaw")
    assert row.next_restart == NOW
    assert row.state == "due"


def test_a_start_lost_to_spring_forward_moves_past_the_gap() -> None:
    before_the_gap = utc("2025-03-29T12:00")
    [row] = rows_of(
        mark("secret", "db", daily("02.30", "Europe/Warsaw", "Secret/db")), now=before_the_gap
    )
    # 02:30 does not exist in Warsaw on 2025-03-30; 03:00 CEST is 01:00 UTC.
    assert row.next_restart == utc("2025-03-30T01:00")


def test_several_sources_all_show_the_earliest_restart_and_which_source_causes_it() -> None:
    annotations = {
        **mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")),
        **mark("configmap", "cfg", cron("0 3 * * *", "Asia/Kolkata", "ConfigMap/cfg")),
    }
    cfg, db = rows_of(annotations)
    assert (cfg.source, db.source) == ("ConfigMap/cfg", "Secret/db")
    # 03:00 IST (21:30 UTC) comes before 03:00 CET (02:00 UTC next day): one rollout.
    assert cfg.next_restart == db.next_restart == utc("2025-01-01T21:30")
    assert cfg.notes == ()
    assert db.notes == ("restarts with ConfigMap/cfg",)


def test_an_open_window_not_yet_used_is_due_from_its_start() -> None:
    inside = utc("2025-01-01T02:20")  # 03:20 in Warsaw
    [row] = rows_of(mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")), now=inside)
    assert row.state == "due"
    assert row.next_restart == utc("2025-01-01T02:00")


def test_a_restart_already_done_in_the_open_window_waits_for_the_next_day() -> None:
    inside = utc("2025-01-01T02:20")
    annotations = {
        **mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")),
        keys.RESTART_TS: str(int(utc("2025-01-01T02:05").timestamp())),
    }
    [row] = rows_of(annotations, now=inside)
    assert row.state == "waiting"
    assert row.next_restart == utc("2025-01-02T02:00")


def test_a_paused_deployment_says_it_stays_pending() -> None:
    [row] = rows_of(
        mark("secret", "db", json.dumps({"at": "now", "source": "Secret/db"})), paused=True
    )
    assert row.state == "paused"
    assert row.next_restart == NOW
    assert row.notes == ("paused: a due restart waits until the Deployment is resumed",)


def test_an_opted_out_workload_has_no_restart_and_says_its_marks_are_dropped() -> None:
    annotations = {
        **mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")),
        keys.IGNORE: "true",
    }
    [row] = rows_of(annotations)
    assert (row.state, row.next_restart) == ("opted-out", None)
    assert row.notes == (f"{keys.IGNORE} is true: the marks are dropped, nothing restarts",)


def test_an_invalid_mark_is_reported_and_the_others_still_schedule() -> None:
    annotations = {
        **mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")),
        keys.pending_key("secret", "bad"): "yesterday",
        keys.window_key("secret", "bad"): json.dumps({"at": "25.00", "source": "Secret/bad"}),
    }
    bad, db = rows_of(annotations)
    assert (bad.source, bad.state, bad.changed_at, bad.next_restart) == (
        "Secret/bad",
        "invalid",
        None,
        None,
    )
    assert bad.notes == (
        "pending-restart mark is not epoch seconds",
        "unreadable mark: window '25.00' is not HH.MM (24-hour, e.g. 03.00 or 23.45)",
        "dropped when it restarts with Secret/db",
    )
    assert (db.state, db.next_restart) == ("waiting", utc("2025-01-02T02:00"))


@pytest.mark.parametrize(
    ("window", "problem"),
    [
        ("{not json", "mark '{not json' is not a window restarter wrote"),
        ("03.00", "mark '03.00' is not a window restarter wrote"),
        (daily("03.00", "Mars/Olympus", "Secret/db"), "unknown time zone 'Mars/Olympus'"),
        (None, "pending mark without its restart-at mark"),
    ],
)
def test_a_workload_with_only_unreadable_marks_never_restarts(
    window: str | None, problem: str
) -> None:
    annotations = {keys.pending_key("secret", "db"): str(int(SEEN.timestamp()))}
    if window is not None:
        annotations[keys.window_key("secret", "db")] = window
    [row] = rows_of(annotations)
    assert (row.state, row.next_restart, row.changed_at) == ("invalid", None, SEEN)
    assert row.notes[0].startswith(f"unreadable mark: {problem}")


def test_a_restart_at_mark_without_its_pending_mark_is_named() -> None:
    annotations = {
        **mark("secret", "db", daily("03.00", "UTC", "Secret/db")),
        keys.window_key("secret", "orphan"): daily("04.00", "UTC", "Secret/orphan"),
    }
    _, orphan = rows_of(annotations)
    assert orphan.changed_at is None
    assert orphan.notes[0] == "restart-at mark without its pending-restart mark"


@pytest.mark.parametrize(
    "annotations",
    [{}, {keys.RESTART_TS: "1735725600"}, {keys.window_key("secret", "db"): "03.00"}],
)
def test_workloads_without_a_pending_mark_have_no_rows(annotations: dict[str, str]) -> None:
    assert rows_of(annotations) == []


def test_rows_name_the_workload_kind_and_sort_by_namespace_kind_name_source() -> None:
    db = mark("secret", "db", daily("03.00", "UTC", "Secret/db"))
    workloads = [
        ("statefulsets", workload(db, name="store")),
        ("daemonsets", workload(db, name="agent")),
        ("deployments", workload(db, name="web")),
    ]
    rows = planning.plan(workloads, NOW, "UTC", HOUR)
    assert [(row.kind, row.name) for row in rows] == [
        ("DaemonSet", "agent"),
        ("Deployment", "web"),
        ("StatefulSet", "store"),
    ]


def test_json_has_the_documented_shape_with_iso_instants() -> None:
    rows = rows_of(mark("configmap", "cfg", cron("0 3 * * *", "Asia/Kolkata", "ConfigMap/cfg")))
    assert json.loads(planning.to_json(rows)) == [
        {
            "namespace": "shop",
            "kind": "Deployment",
            "name": "web",
            "source": "ConfigMap/cfg",
            "mark": "configmap.cfg",
            "changedKeys": None,
            "changedAt": "2025-01-01T10:00:00Z",
            "window": "cron '0 3 * * *' Asia/Kolkata (1h long)",
            "windowFrom": "source",
            "timezone": "Asia/Kolkata",
            "nextRestart": "2025-01-02T03:00:00+05:30",
            "nextRestartUtc": "2025-01-01T21:30:00Z",
            "state": "waiting",
            "notes": [],
        }
    ]
    assert json.loads(planning.to_json([])) == []


def test_json_states_are_the_documented_ones() -> None:
    rows = rows_of(mark("secret", "db", "03.00"))
    assert {row.state for row in rows} <= set(planning.STATES)


def test_table_aligns_columns_and_shows_namespaces_only_when_asked() -> None:
    annotations = {
        **mark("secret", "db", daily("03.00", "Europe/Warsaw", "Secret/db")),
        **mark("configmap", "cfg", cron("0 3 * * *", "Asia/Kolkata", "ConfigMap/cfg")),
    }
    rows = rows_of(annotations)
    assert planning.to_table(rows, with_namespace=False).splitlines() == [
        "WORKLOAD         SOURCE          KEYS      CHANGED                WINDOW"
        "                                    FROM     NEXT RESTART           NEXT RESTART UTC"
        "       STATE     NOTES",
        "Deployment/web   ConfigMap/cfg   unknown   2025-01-01 10:00 UTC   cron '0 3 * * *'"
        " Asia/Kolkata (1h long)   source   2025-01-02 03:00 IST   2025-01-01 21:30 UTC"
        "   waiting",
        "Deployment/web   Secret/db       unknown   2025-01-01 10:00 UTC   03.00 Europe/Warsaw"
        " (1h long)             source   2025-01-01 22:30 CET   2025-01-01 21:30 UTC"
        "   waiting   restarts with ConfigMap/cfg",
    ]
    with_namespace = planning.to_table(rows, with_namespace=True).splitlines()
    assert with_namespace[0].startswith("NAMESPACE   WORKLOAD")
    assert with_namespace[1].startswith("shop        Deployment/web")


def test_rows_name_the_changed_keys_a_mark_names_and_never_more() -> None:
    request = WindowRequest("03.00", "UTC", HOUR)
    named = request.to_mark("Secret/db", "812", ["password", "ca.crt"])
    many = request.to_mark("Secret/big", "813", [f"k{i:02}" for i in range(MARK_KEYS + 3)])
    unknown = request.to_mark("Secret/old", "814")
    rows = rows_of(
        {
            **mark("secret", "db", named),
            **mark("secret", "big", many),
            **mark("secret", "old", unknown),
        }
    )
    by_source = {row.source: row for row in rows}
    assert by_source["Secret/db"].changed_keys == ("ca.crt", "password")
    assert by_source["Secret/old"].changed_keys is None
    big = by_source["Secret/big"]
    assert big.changed_keys is not None and len(big.changed_keys) == MARK_KEYS
    assert "and 3 more changed key(s)" in big.notes
    [db] = [row for row in json.loads(planning.to_json(rows)) if row["source"] == "Secret/db"]
    assert db["changedKeys"] == ["ca.crt", "password"]
    table = planning.to_table(rows, with_namespace=False).splitlines()
    assert any("Secret/db" in line and " ca.crt,password " in line for line in table)
    assert any("Secret/old" in line and " unknown " in line for line in table)
