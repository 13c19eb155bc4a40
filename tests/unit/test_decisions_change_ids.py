"""Change ids: one change of a source causes at most one restart of each dependent."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from restarter.commands import planning
from restarter.model import keys
from restarter.model.pending import read, restarted_for
from restarter.model.restart_decisions import Action, decide_restart
from restarter.model.source_changes import begin_change_patch, change_id, checksum_patch
from restarter.model.stamps import stamp_patch
from restarter.model.windows import WindowRequest
from restarter.services.settings import Settings

HOUR = dt.timedelta(hours=1)
SETTINGS = Settings(timezone="UTC", window_length=HOUR)
#: 03:20 UTC: inside a 03.00 window, six hours before a 09.00 one.
NOW = dt.datetime(2026, 12, 2, 3, 20, tzinfo=dt.UTC)
CHECKSUM = "sha256:" + "ab" * 32
OTHER_CHECKSUM = "sha256:" + "cd" * 32


def window(at: str, source: str = "Secret/db", change: str | None = "812") -> str:
    value = {"at": at, "length": "1h", "source": source, "timezone": "UTC"}
    if change is not None:
        value["change"] = change
    return json.dumps(value)


def workload(marks: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, Any]:
    """A Deployment with one pending mark per ``{secret name: window mark}``."""
    annotations = dict(extra or {})
    for name, value in marks.items():
        annotations[keys.pending_key("secret", name)] = "1796000000"
        annotations[keys.window_key("secret", name)] = value
    metadata = {"name": "web", "namespace": "ns", "resourceVersion": "4242"}
    return {"metadata": metadata | {"annotations": annotations}, "spec": {"template": {}}}


def recorded(**changes: str) -> dict[str, str]:
    return {keys.RESTARTED_FOR: json.dumps({f"secret.{k}": v for k, v in changes.items()})}


# --- the id of a change ------------------------------------------------------------------


def test_a_new_change_is_named_by_the_sources_resource_version_and_must_be_recorded() -> None:
    assert change_id({"resourceVersion": "812"}, CHECKSUM) == ("812", True)


def test_a_change_whose_fan_out_began_keeps_its_id_after_other_updates_of_the_source() -> None:
    metadata = {"resourceVersion": "990", "annotations": {keys.CHANGE: f"812 {CHECKSUM}"}}
    assert change_id(metadata, CHECKSUM) == ("812", False)


@pytest.mark.parametrize(
    "begun",
    [f"812 {OTHER_CHECKSUM}", "812", f" {CHECKSUM}", "", f"812 {CHECKSUM} extra"],
    ids=["other-data", "no-checksum", "no-id", "empty", "three-fields"],
)
def test_a_begun_change_for_other_data_or_unreadable_starts_a_new_id(begun: str) -> None:
    metadata = {"resourceVersion": "990", "annotations": {keys.CHANGE: begun}}
    assert change_id(metadata, CHECKSUM) == ("990", True)


def test_beginning_records_id_and_checksum_and_recording_the_checksum_ends_the_change() -> None:
    assert begin_change_patch("812", CHECKSUM) == {
        "metadata": {"annotations": {keys.CHANGE: f"812 {CHECKSUM}"}}
    }
    assert checksum_patch(CHECKSUM)["metadata"]["annotations"] == {
        keys.CHECKSUM: CHECKSUM,
        keys.CHANGE: None,
    }


def test_a_stamp_names_its_change_and_carries_nothing_derived_from_the_data() -> None:
    request = WindowRequest("03.00", "UTC", HOUR)
    patch = stamp_patch("secret", "db", NOW, request, "812")
    [mark] = read(patch["metadata"]["annotations"]).marks
    assert mark.change == "812"
    assert "sha256" not in json.dumps(patch)


# --- the restart records what it satisfied -----------------------------------------------


def test_a_restart_records_the_change_of_every_mark_it_satisfies() -> None:
    decision = decide_restart(
        workload({"db": window("03.00"), "api": window("09.00", "Secret/api", "77")}),
        SETTINGS,
        NOW,
    )
    assert decision.action is Action.RESTART
    written = decision.patch["metadata"]["annotations"][keys.RESTARTED_FOR]
    assert json.loads(written) == {"secret.db": "812", "secret.api": "77"}


def test_a_restart_keeps_earlier_records_of_other_sources_and_replaces_its_own() -> None:
    extra = {keys.RESTARTED_FOR: json.dumps({"secret.db": "700", "configmap.flags": "5"})}
    decision = decide_restart(workload({"db": window("03.00")}, extra), SETTINGS, NOW)
    written = json.loads(decision.patch["metadata"]["annotations"][keys.RESTARTED_FOR])
    assert written == {"secret.db": "812", "configmap.flags": "5"}


def test_the_record_stays_bounded_however_many_sources_were_restarted_for() -> None:
    many = {f"secret.old-{index:03}": str(index) for index in range(200)}
    extra = {keys.RESTARTED_FOR: json.dumps(many)}
    decision = decide_restart(workload({"db": window("03.00")}, extra), SETTINGS, NOW)
    written = json.loads(decision.patch["metadata"]["annotations"][keys.RESTARTED_FOR])
    assert len(written) == 64
    assert written["secret.db"] == "812"


def test_marks_written_before_change_ids_restart_and_record_nothing() -> None:
    decision = decide_restart(workload({"db": window("03.00", change=None)}), SETTINGS, NOW)
    assert decision.action is Action.RESTART
    assert keys.RESTARTED_FOR not in decision.patch["metadata"]["annotations"]


# --- a mark for a change already restarted for -------------------------------------------


def test_a_mark_for_a_change_already_restarted_for_is_cleared_without_a_restart() -> None:
    decision = decide_restart(workload({"db": window("03.00")}, recorded(db="812")), SETTINGS, NOW)
    assert decision.action is Action.SATISFIED
    patch = decision.patch
    assert "spec" not in patch
    assert patch["metadata"]["resourceVersion"] == "4242"
    assert patch["metadata"]["labels"] == {keys.PENDING_LABEL: None}
    assert patch["metadata"]["$deleteFromPrimitiveList/finalizers"] == [keys.FINALIZER]
    assert set(patch["metadata"]["annotations"]) == {
        keys.pending_key("secret", "db"),
        keys.window_key("secret", "db"),
    }


def test_a_mark_for_a_newer_change_of_the_same_source_restarts() -> None:
    decision = decide_restart(workload({"db": window("03.00")}, recorded(db="700")), SETTINGS, NOW)
    assert decision.action is Action.RESTART


def test_only_the_marks_still_asking_decide_the_window() -> None:
    # db's change is done (its window is open now); api's waits for 09.00.
    marks = {"db": window("03.00"), "api": window("09.00", "Secret/api", "77")}
    decision = decide_restart(workload(marks, recorded(db="812")), SETTINGS, NOW)
    assert decision.action is Action.WAIT
    assert decision.next_start == dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def test_an_opted_out_workload_is_cleared_as_opted_out_even_if_also_satisfied() -> None:
    extra = {keys.IGNORE: "true", **recorded(db="812")}
    decision = decide_restart(workload({"db": window("03.00")}, extra), SETTINGS, NOW)
    assert decision.action is Action.OPTED_OUT


@pytest.mark.parametrize(
    "text", ["not json", "[1, 2]", '{"secret.db": 812}', "null", '"x"'], ids=str
)
def test_an_unreadable_record_counts_as_no_record(text: str) -> None:
    assert restarted_for({keys.RESTARTED_FOR: text}) == {}
    decision = decide_restart(
        workload({"db": window("03.00")}, {keys.RESTARTED_FOR: text}), SETTINGS, NOW
    )
    assert decision.action is Action.RESTART


# --- restarter plan ----------------------------------------------------------------------


def test_plan_shows_a_satisfied_mark_as_done_with_no_restart() -> None:
    body = workload({"db": window("03.00")}, recorded(db="812"))
    [row] = planning.plan([("deployments", body)], NOW, "UTC", HOUR)
    assert (row.state, row.next_restart) == (planning.DONE, None)
    assert row.notes == ("already restarted for this change: the mark is dropped",)


def test_plan_times_a_workload_by_the_marks_still_asking() -> None:
    marks = {"db": window("03.00"), "api": window("09.00", "Secret/api", "77")}
    rows = planning.plan([("deployments", workload(marks, recorded(db="812")))], NOW, "UTC", HOUR)
    states = {row.source: (row.state, row.next_restart) for row in rows}
    assert states == {
        "Secret/db": (planning.DONE, None),
        "Secret/api": (planning.WAITING, dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)),
    }


def test_a_second_restart_within_the_same_second_still_changes_the_pod_template() -> None:
    body = workload({"db": window("03.00")})
    body["spec"]["template"] = {
        "metadata": {"annotations": {keys.KUBECTL_RESTARTED_AT: "2026-12-02T03:20:00Z"}}
    }
    decision = decide_restart(body, SETTINGS, NOW)
    template = decision.patch["spec"]["template"]["metadata"]["annotations"]
    assert template[keys.KUBECTL_RESTARTED_AT] == "2026-12-02T03:20:01Z"
    assert decision.patch["metadata"]["annotations"][keys.RESTART_TS] == str(int(NOW.timestamp()))
