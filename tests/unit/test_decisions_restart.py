"""Change classification, stamp patches, pending marks and the restart decision."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, NamedTuple

import pytest
import pytz

from restarter.model import keys, pending
from restarter.model.checksums import checksum
from restarter.model.limits import Limits
from restarter.model.restart_decisions import Action, decide_restart
from restarter.model.source_changes import Change, classify
from restarter.model.stamps import has_pending, stamp_patch
from restarter.model.timer_admission import label_repair
from restarter.model.windows import WindowRequest
from restarter.restarting.pacing import Pacer
from restarter.services.settings import Settings

UTC = pytz.UTC
WARSAW = pytz.timezone("Europe/Warsaw")
HOUR = dt.timedelta(hours=1)
#: Windows are read in Warsaw; in December Warsaw is UTC+1 (CET).
SETTINGS = Settings(timezone="Europe/Warsaw", window_length=HOUR)
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
DATA = {"password": "aHVudGVyMg=="}


class Mark(NamedTuple):
    """What a mark read back pairs: its token, pending time, window mark and change."""

    token: str
    since: int | None
    window: str | None
    change: str | None = None


def pending_marks(annotations: dict[str, str] | None) -> list[Mark]:
    return [
        Mark(mark.token, mark.since, mark.value, mark.change)
        for mark in pending.read(annotations).marks
    ]


def last_restart(annotations: dict[str, str], now: dt.datetime) -> dt.datetime | None:
    return pending.read(annotations).last_restart(now)


SEEN = "1796000000"


def warsaw(text: str) -> dt.datetime:
    """An aware instant from a Warsaw wall-clock ``YYYY-MM-DDTHH:MM[:SS]``."""
    return WARSAW.localize(dt.datetime.fromisoformat(text), is_dst=None)


def epoch(instant: dt.datetime) -> str:
    return str(int(instant.timestamp()))


def secret(
    data: dict[str, str] | None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "db", "namespace": "ns"}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata, "data": data}


def daily(at: str, name: str = "db") -> str:
    """The mark stamping writes for Secret ``name``'s daily window ``at``, in the zone and
    length of ``SETTINGS``."""
    return WindowRequest(at, SETTINGS.timezone, SETTINGS.window_length).to_mark(f"Secret/{name}")


def workload(
    marks: dict[str, str] | None = None,
    *,
    paused: bool = False,
    restart_ts: dt.datetime | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Deployment with a pending mark per ``{secret name: window}``: a mark as written, or
    ``HH.MM`` for the mark of that daily window in ``SETTINGS``' zone and length."""
    annotations = {"deployment.kubernetes.io/revision": "3", **(extra or {})}
    for name, window in (marks or {}).items():
        annotations[keys.pending_key("secret", name)] = SEEN
        mark = window if window.startswith("{") else daily(window, name)
        annotations[keys.window_key("secret", name)] = mark
    if restart_ts is not None:
        annotations[keys.RESTART_TS] = epoch(restart_ts)
    spec: dict[str, Any] = {"replicas": 2, "template": {"metadata": {}, "spec": {}}}
    if paused:
        spec["paused"] = True
    return {
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "resourceVersion": "4242",
            "labels": {"app": "web", keys.PENDING_LABEL: "true"},
            "finalizers": ["example.com/keep", keys.FINALIZER],
            "annotations": annotations,
        },
        "spec": spec,
    }


# --- classify ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first_sight",
    [
        pytest.param(secret(DATA), id="no-annotations"),
        pytest.param(secret(DATA, annotations={}), id="empty-annotations"),
        pytest.param(secret(DATA, annotations={"other": "x"}), id="other-annotations-only"),
        pytest.param({"data": DATA}, id="no-metadata"),
        pytest.param(secret(None), id="no-data"),
    ],
)
def test_a_secret_without_a_checksum_annotation_is_a_baseline(first_sight: dict[str, Any]) -> None:
    change, current = classify(first_sight)
    assert change is Change.BASELINE
    assert current == checksum(first_sight.get("data"))


def test_a_secret_whose_data_matches_its_checksum_is_unchanged() -> None:
    recorded = {keys.CHECKSUM: checksum(DATA)}
    assert classify(secret(DATA, recorded)) == (Change.UNCHANGED, checksum(DATA))


@pytest.mark.parametrize(
    "new_data",
    [
        pytest.param({"password": "c2VjcmV0"}, id="a-changed-value"),
        pytest.param({**DATA, "user": "YWRtaW4="}, id="an-added-key"),
        pytest.param({}, id="emptied"),
        pytest.param(None, id="data-removed"),
    ],
)
def test_a_secret_whose_data_differs_from_its_checksum_is_changed(
    new_data: dict[str, str] | None,
) -> None:
    change, current = classify(secret(new_data, {keys.CHECKSUM: checksum(DATA)}))
    assert change is Change.CHANGED
    assert current == checksum(new_data)


@pytest.mark.parametrize(
    ("annotations", "labels"),
    [
        pytest.param({"cert-manager.io/renewed": "now"}, None, id="an-added-annotation"),
        pytest.param({}, {"restart-at": "05.00"}, id="a-changed-label"),
        pytest.param({"a": "1", "b": "2"}, {"team": "x", "tier": "db"}, id="labels-and-annots"),
    ],
)
def test_labels_or_annotations_changes_alone_leave_a_secret_unchanged(
    annotations: dict[str, str], labels: dict[str, str] | None
) -> None:
    recorded = {keys.CHECKSUM: checksum(DATA), **annotations}
    assert classify(secret(DATA, recorded, labels))[0] is Change.UNCHANGED


def test_a_secret_with_reordered_data_keys_is_unchanged() -> None:
    data = {"a": "MQ==", "b": "Mg=="}
    recorded = {keys.CHECKSUM: checksum(data)}
    assert classify(secret({"b": "Mg==", "a": "MQ=="}, recorded))[0] is Change.UNCHANGED


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"password": "c2VjcmV0"}, Change.CHANGED, id="new-data"),
        pytest.param(DATA, Change.BASELINE, id="same-data"),
    ],
)
def test_a_recreated_secret_is_compared_with_the_checksum_remembered_in_this_run(
    data: dict[str, str], expected: Change
) -> None:
    assert classify(secret(data), remembered=checksum(DATA))[0] is expected


# --- stamp patch and pending marks --------------------------------------------------------


def test_stamp_patch_records_the_epoch_seconds_seen_and_the_window_asked_for() -> None:
    request = WindowRequest("03.00", "Europe/Warsaw", HOUR)
    seen = dt.datetime(2026, 12, 2, 15, 15, 0, 999_999, tzinfo=UTC)
    # Marks only: the label and finalizer come when the window opens (admission).
    assert stamp_patch("secret", "db", seen, request) == {
        "metadata": {
            "annotations": {
                "pending-restart.restarter.io/secret.db": "1796224500",
                "restart-at.restarter.io/secret.db": '{"at":"03.00","length":"1h",'
                '"source":"Secret/db","timezone":"Europe/Warsaw"}',
            },
        }
    }


def test_stamp_patch_for_a_configmap_names_it_in_key_and_value() -> None:
    request = WindowRequest("cron", "UTC", 2 * HOUR, "0 3 * * 1-5")
    seen = dt.datetime(2026, 12, 2, 15, 15, tzinfo=UTC)
    assert stamp_patch("configmap", "app", seen, request)["metadata"]["annotations"] == {
        "pending-restart.restarter.io/configmap.app": "1796224500",
        "restart-at.restarter.io/configmap.app": '{"at":"cron","cron":"0 3 * * 1-5",'
        '"length":"2h","source":"ConfigMap/app","timezone":"UTC"}',
    }


def test_stamp_patch_uses_the_shortened_token_for_a_long_name() -> None:
    name = "n" * 100
    request = WindowRequest("23.30", "Europe/Warsaw", HOUR)
    annotations = stamp_patch("secret", name, warsaw("2026-12-02T10:00"), request)["metadata"][
        "annotations"
    ]
    assert set(annotations) == {keys.pending_key("secret", name), keys.window_key("secret", name)}
    assert json.loads(annotations[keys.window_key("secret", name)])["source"] == f"Secret/{name}"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(
            workload({"b": "04.30", "a": "03.00"})["metadata"]["annotations"],
            [
                Mark("secret.a", 1796000000, daily("03.00", "a")),
                Mark("secret.b", 1796000000, daily("04.30", "b")),
            ],
            id="pairs-sorted-by-token",
        ),
        pytest.param(
            {keys.pending_key("secret", "a"): "17"},
            [Mark("secret.a", 17, None)],
            id="pending-without-window",
        ),
        pytest.param(
            {keys.window_key("secret", "a"): "03.00"},
            [Mark("secret.a", None, "03.00")],
            id="window-without-pending",
        ),
        pytest.param(
            {keys.pending_key("secret", "a"): "soon", keys.window_key("secret", "a"): "abc"},
            [Mark("secret.a", None, "abc")],
            id="a-non-numeric-time",
        ),
        pytest.param({"unrelated": "x", keys.RESTART_TS: "1"}, [], id="no-marks"),
        pytest.param(None, [], id="no-annotations"),
    ],
)
def test_pending_marks_pair_each_pending_time_with_its_window(
    annotations: dict[str, str] | None, expected: list[Mark]
) -> None:
    assert pending_marks(annotations) == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({keys.pending_key("secret", "a"): SEEN}, True, id="a-pending-key"),
        pytest.param(workload({"a": "03.00"})["metadata"]["annotations"], True, id="a-full-mark"),
        pytest.param({keys.window_key("secret", "a"): "03.00"}, False, id="a-window-key-only"),
        pytest.param({keys.RESTART_TS: "1", "other": "x"}, False, id="other-keys"),
        pytest.param({}, False, id="empty"),
        pytest.param(None, False, id="none"),
    ],
)
def test_has_pending_is_true_exactly_when_a_pending_key_is_present(
    annotations: dict[str, str] | None, expected: bool
) -> None:
    assert has_pending(annotations) is expected


# --- decide_restart ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "next_start"),
    [
        pytest.param("2026-12-02T02:59", "2026-12-02T03:00", id="just-before"),
        pytest.param("2026-12-02T04:00", "2026-12-03T03:00", id="at-the-end"),
        pytest.param("2026-12-02T12:00", "2026-12-03T03:00", id="at-noon"),
    ],
)
def test_decide_restart_waits_outside_the_window_and_says_when_it_opens(
    now: str, next_start: str
) -> None:
    decision = decide_restart(workload({"db": "03.00"}), SETTINGS, warsaw(now))
    assert decision.action is Action.WAIT
    assert decision.next_start == warsaw(next_start)
    assert decision.patch == {}
    assert decision.sources == ("secret.db",)


def test_decide_restart_restarts_inside_the_window_with_one_conditional_patch() -> None:
    now = warsaw("2026-12-02T03:20")  # 02:20 UTC
    decision = decide_restart(workload({"db": "03.00", "api": "05.00"}), SETTINGS, now)
    assert decision.action is Action.RESTART
    assert decision.sources == ("secret.api", "secret.db")
    assert decision.patch == {
        "metadata": {
            "resourceVersion": "4242",
            "labels": {"restarter.io/pending": None},
            "$deleteFromPrimitiveList/finalizers": ["restarter.io/finalizer"],
            "annotations": {
                "pending-restart.restarter.io/secret.db": None,
                "restart-at.restarter.io/secret.db": None,
                "pending-restart.restarter.io/secret.api": None,
                "restart-at.restarter.io/secret.api": None,
                "restarter.io/restart-ts": epoch(now),
            },
        },
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T02:20:00Z"}
                }
            }
        },
    }


def test_the_restarted_at_stamp_is_rfc3339_in_utc_without_fractions() -> None:
    now = warsaw("2026-12-02T03:20:07.654321")
    patch = decide_restart(workload({"db": "03.00"}), SETTINGS, now).patch
    stamp = patch["spec"]["template"]["metadata"]["annotations"][keys.KUBECTL_RESTARTED_AT]
    assert RFC3339_UTC.match(stamp)
    assert stamp == "2026-12-02T02:20:07Z"
    # `date -u -d @1796178007` prints 2026-12-02 02:20:07 UTC.
    assert patch["metadata"]["annotations"][keys.RESTART_TS] == "1796178007"


def test_a_restart_clears_every_mark_key_including_unpaired_and_invalid_ones() -> None:
    extra = {
        keys.pending_key("secret", "lonely"): SEEN,
        keys.window_key("secret", "orphan"): "05.00",
        keys.window_key("secret", "bad"): "abc",
        keys.pending_key("secret", "bad"): SEEN,
        "unrelated.example/keep": "x",
    }
    decision = decide_restart(
        workload({"db": "03.00"}, extra=extra), SETTINGS, warsaw("2026-12-02T03:20")
    )
    assert decision.action is Action.RESTART
    cleared = {
        key for key, value in decision.patch["metadata"]["annotations"].items() if value is None
    }
    expected = {
        key
        for key in workload({"db": "03.00"}, extra=extra)["metadata"]["annotations"]
        if key.startswith(("pending-restart.restarter.io/", "restart-at.restarter.io/"))
    }
    assert cleared == expected and len(expected) == 6
    assert "unrelated.example/keep" not in decision.patch["metadata"]["annotations"]
    assert any("abc" in problem for problem in decision.problems)


def test_a_paused_deployment_inside_its_window_is_paused_not_restarted() -> None:
    decision = decide_restart(
        workload({"db": "03.00"}, paused=True), SETTINGS, warsaw("2026-12-02T03:20")
    )
    assert decision.action is Action.PAUSED
    assert decision.patch == {}
    assert decision.next_start == warsaw("2026-12-02T03:00")


def test_a_paused_deployment_outside_its_window_waits() -> None:
    decision = decide_restart(
        workload({"db": "03.00"}, paused=True), SETTINGS, warsaw("2026-12-02T12:00")
    )
    assert decision.action is Action.WAIT


@pytest.mark.parametrize(
    "marks",
    [
        pytest.param({"db": "abc"}, id="a-malformed-window"),
        pytest.param({"db": "25.00"}, id="an-impossible-hour"),
        pytest.param({"db": ""}, id="an-empty-window"),
        pytest.param({"db": "abc", "api": "3:00"}, id="every-mark-bad"),
    ],
)
def test_a_workload_whose_marks_all_have_bad_windows_is_invalid(marks: dict[str, str]) -> None:
    decision = decide_restart(workload(marks), SETTINGS, warsaw("2026-12-02T03:20"))
    assert decision.action is Action.INVALID
    assert decision.patch == {} and decision.next_start is None
    assert len(decision.problems) == len(marks)
    for token, window in ((f"secret.{name}", window) for name, window in marks.items()):
        assert any(p.startswith(f"{token}: ") and repr(window) in p for p in decision.problems)


@pytest.mark.parametrize(
    ("now", "action", "next_start"),
    [
        pytest.param("2026-12-02T03:20", Action.RESTART, "2026-12-02T03:00", id="first-open"),
        pytest.param("2026-12-02T04:20", Action.WAIT, "2026-12-02T05:00", id="between"),
        pytest.param("2026-12-02T05:20", Action.RESTART, "2026-12-02T05:00", id="second-open"),
        pytest.param("2026-12-02T12:00", Action.WAIT, "2026-12-03T03:00", id="both-closed"),
    ],
)
def test_with_two_marks_in_different_windows_either_open_window_restarts(
    now: str, action: Action, next_start: str
) -> None:
    decision = decide_restart(workload({"db": "03.00", "api": "05.00"}), SETTINGS, warsaw(now))
    assert decision.action is action
    assert decision.next_start == warsaw(next_start)


@pytest.mark.parametrize(
    ("restart_ts", "action"),
    [
        pytest.param("2026-12-01T03:10", Action.RESTART, id="in-yesterdays-occurrence"),
        pytest.param("2026-12-02T02:59:59", Action.RESTART, id="just-before-this-occurrence"),
        pytest.param("2026-12-02T03:00", Action.WAIT, id="at-this-occurrences-start"),
        pytest.param("2026-12-02T03:05", Action.WAIT, id="inside-this-occurrence"),
    ],
)
def test_a_workload_is_restarted_at_most_once_per_occurrence(
    restart_ts: str, action: Action
) -> None:
    pending = workload({"db": "03.00"}, restart_ts=warsaw(restart_ts))
    assert decide_restart(pending, SETTINGS, warsaw("2026-12-02T03:20")).action is action


def test_a_restart_in_one_window_does_not_block_another_windows_occurrence() -> None:
    pending = workload({"db": "03.00", "api": "05.00"}, restart_ts=warsaw("2026-12-02T03:10"))
    assert decide_restart(pending, SETTINGS, warsaw("2026-12-02T05:20")).action is Action.RESTART


def test_a_non_numeric_restart_ts_counts_as_never_restarted() -> None:
    pending = workload({"db": "03.00"}, extra={keys.RESTART_TS: "yesterday"})
    assert decide_restart(pending, SETTINGS, warsaw("2026-12-02T03:20")).action is Action.RESTART


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(keys.RESTART_TS, id="restart-ts"),
        pytest.param(keys.pending_key("secret", "db"), id="pending-restart"),
    ],
)
def test_a_digit_like_but_non_decimal_timestamp_counts_as_absent(key: str) -> None:
    pending = workload({"db": "03.00"})
    pending["metadata"]["annotations"][key] = "\u00b2"
    assert decide_restart(pending, SETTINGS, warsaw("2026-12-02T03:20")).action is Action.RESTART


# --- each mark's own zone, length and schedule --------------------------------------------


def mark(at: str, zone: str = "UTC", length: str = "1h", cron: str | None = None) -> str:
    value = {"at": at, "timezone": zone, "length": length, "source": "Secret/db"}
    if cron is not None:
        value["cron"] = cron
    return json.dumps(value)


@pytest.mark.parametrize(
    ("window", "now", "expected"),
    [
        pytest.param(mark("03.00", "Asia/Kolkata"), "2026-12-01T21:40", Action.RESTART, id="zone"),
        pytest.param(mark("03.00", "UTC", "30m"), "2026-12-02T03:40", Action.WAIT, id="short"),
        pytest.param(mark("03.00", "UTC", "2h"), "2026-12-02T04:40", Action.RESTART, id="long"),
        pytest.param(mark("03.00_15.00"), "2026-12-02T15:10", Action.RESTART, id="second-start"),
        pytest.param(
            mark("cron", cron="0 3 * * 1-5"), "2026-12-02T03:10", Action.RESTART, id="cron-wed"
        ),
        pytest.param(
            mark("cron", cron="0 3 * * 1-5"), "2026-12-05T03:10", Action.WAIT, id="cron-saturday"
        ),
        pytest.param(json.dumps({"at": "now"}), "2026-12-02T12:34", Action.RESTART, id="now"),
    ],
)
def test_a_json_mark_is_read_in_its_own_zone_length_and_schedule(
    window: str, now: str, expected: Action
) -> None:
    instant = dt.datetime.fromisoformat(now).replace(tzinfo=UTC)
    # The operator's own defaults (Warsaw, 1 h) must not matter for a JSON mark.
    assert decide_restart(workload({"db": window}), SETTINGS, instant).action is expected


def test_a_now_mark_restarts_the_whole_workload_at_once() -> None:
    now = dt.datetime(2026, 12, 2, 12, 34, tzinfo=UTC)
    decision = decide_restart(
        workload({"db": json.dumps({"at": "now"}), "api": "03.00"}), SETTINGS, now
    )
    assert decision.action is Action.RESTART
    assert all(
        value is None
        for key, value in decision.patch["metadata"]["annotations"].items()
        if key != keys.RESTART_TS
    )


def test_an_opted_out_workload_has_its_marks_cleared_and_is_not_restarted() -> None:
    now = warsaw("2026-12-02T03:20")  # inside the window
    decision = decide_restart(workload({"db": "03.00"}, extra={keys.IGNORE: "true"}), SETTINGS, now)
    assert decision.action is Action.OPTED_OUT
    assert decision.patch == {
        "metadata": {
            "resourceVersion": "4242",
            "labels": {"restarter.io/pending": None},
            "$deleteFromPrimitiveList/finalizers": ["restarter.io/finalizer"],
            "annotations": {
                "pending-restart.restarter.io/secret.db": None,
                "restart-at.restarter.io/secret.db": None,
            },
        }
    }


@pytest.mark.parametrize(
    "restart_ts",
    [
        pytest.param("253402300800", id="after-year-9999"),
        pytest.param("9" * 40, id="forty-digits"),
        pytest.param("4102444800", id="in-2100-after-now"),
    ],
)
def test_a_restart_ts_restarter_cannot_have_written_is_ignored(restart_ts: str) -> None:
    now = warsaw("2026-12-02T03:20")
    body = workload({"db": "03.00"}, extra={keys.RESTART_TS: restart_ts})
    assert last_restart(body["metadata"]["annotations"], now) is None
    assert decide_restart(body, SETTINGS, now).action is Action.RESTART


def test_a_pending_time_past_year_9999_is_unreadable_not_a_crash() -> None:
    annotations = {
        keys.pending_key("secret", "db"): "9" * 30,
        keys.window_key("secret", "db"): "03.00",
    }
    assert pending_marks(annotations) == [Mark("secret.db", None, "03.00")]


def test_a_restart_removes_our_finalizer_even_if_kopf_had_not_added_it_when_read() -> None:
    body = workload({"db": "03.00"})
    body["metadata"]["finalizers"] = ["example.com/keep"]
    patch = decide_restart(body, SETTINGS, warsaw("2026-12-02T03:20")).patch
    assert patch["metadata"]["$deleteFromPrimitiveList/finalizers"] == [keys.FINALIZER]
    assert patch["metadata"]["labels"] == {keys.PENDING_LABEL: None}


def test_label_repair_leaves_marks_without_the_label_to_admission() -> None:
    metadata = workload({"db": "03.00"})["metadata"]
    del metadata["labels"][keys.PENDING_LABEL]
    assert label_repair(metadata) is None


def test_label_repair_removes_a_label_whose_marks_are_gone_only_at_the_version_read() -> None:
    metadata = workload()["metadata"]
    assert label_repair(metadata) == {
        "metadata": {"resourceVersion": "4242", "labels": {keys.PENDING_LABEL: None}}
    }


@pytest.mark.parametrize("marks", [{"db": "03.00"}, None], ids=["pending", "idle"])
def test_label_repair_leaves_an_agreeing_workload_alone(marks: dict[str, str] | None) -> None:
    metadata = workload(marks)["metadata"]
    if not marks:
        del metadata["labels"][keys.PENDING_LABEL]
    assert label_repair(metadata) is None


@pytest.mark.parametrize(
    ("ahead", "counted"),
    [
        pytest.param(0, True, id="now"),
        pytest.param(30, True, id="30s-ahead-another-replicas-clock"),
        pytest.param(60, True, id="a-minute-ahead"),
        pytest.param(61, False, id="past-a-minute-ahead-not-ours"),
    ],
)
def test_restart_ts_has_one_rule_for_the_timer_plan_and_pacing(ahead: int, counted: bool) -> None:
    """The timer's decision, ``plan`` and the pacer read restart-ts alike: up to a minute
    ahead of now it is restarter's own (a replica's clock, a now read earlier)."""
    now = warsaw("2026-12-02T03:20")
    body = workload({"db": "03.00"}, restart_ts=now + dt.timedelta(seconds=ahead))
    annotations = body["metadata"]["annotations"]
    expected = now + dt.timedelta(seconds=ahead) if counted else None
    assert last_restart(annotations, now) == expected
    pacer = Pacer(Limits(max_per_minute=1), stale_after=10)
    pacer.observe("deployments", body, now.timestamp())
    refused = pacer.try_start(("deployments", "ns", "other"), now.timestamp(), now.timestamp())
    assert (refused is not None) is counted, refused
    # Counted, it is this window's restart: the marks wait for the next window.
    action = decide_restart(body, SETTINGS, now).action
    assert action is (Action.WAIT if counted else Action.RESTART)
