"""Which sources a workload's annotations opt it in for (restarter's own, and Reloader's
1.4.21 rules when the operator honours them), and whose window applies."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from restarter.cluster.reference_map import ReferenceMap, uses_of
from restarter.model import keys, windows
from restarter.model.optin import OptIn, opt_in
from restarter.model.windows import ScheduleError

HOUR = dt.timedelta(hours=1)


def body(annotations: dict[str, str], pod: dict[str, str] | None = None) -> dict[str, Any]:
    container = {
        "name": "app",
        "envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "c"}}],
    }
    return {
        "metadata": {"namespace": "ns", "name": "web", "annotations": annotations},
        "spec": {
            "template": {
                "metadata": {"annotations": pod or {}},
                "spec": {"containers": [container]},
            }
        },
    }


def selected(optin: OptIn | None, source: dict[str, str] | None = None) -> set[str]:
    if optin is None:
        return set()
    candidates = [("secret", "s"), ("configmap", "c"), ("secret", "app-1"), ("configmap", "x")]
    return {f"{k}/{n}" for k, n in candidates if optin.selects(k, n, source or {})}


def optin_of(annotations: dict[str, str], reloader: bool = True, **kw: Any) -> OptIn | None:
    item = body(annotations, **kw)
    return opt_in(item["metadata"], item["spec"]["template"]["metadata"], reloader)


def test_restarters_own_annotation_selects_every_source_whatever_the_reloader_setting() -> None:
    for reloader in (False, True):
        optin = optin_of({keys.WORKLOAD_RESTART_AT: "03.00"}, reloader)
        assert selected(optin) == {"secret/s", "configmap/c", "secret/app-1", "configmap/x"}
        assert optin is not None and optin.window_annotations() == {
            keys.WORKLOAD_RESTART_AT: "03.00"
        }


def test_no_annotation_and_restarter_ignore_opt_in_for_nothing() -> None:
    assert optin_of({}) is None
    assert optin_of({keys.WORKLOAD_RESTART_AT: "now", keys.IGNORE: "true"}) is None


def test_reloader_annotations_are_read_only_when_the_operator_honours_them() -> None:
    assert optin_of({"reloader.stakater.com/auto": "true"}, reloader=False) is None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {"reloader.stakater.com/auto": "true"},
            {"secret/s", "configmap/c", "secret/app-1", "configmap/x"},
        ),
        ({"reloader.stakater.com/auto": "false"}, set()),
        ({"secret.reloader.stakater.com/auto": "true"}, {"secret/s", "secret/app-1"}),
        ({"configmap.reloader.stakater.com/auto": "True"}, {"configmap/c", "configmap/x"}),
        ({"secret.reloader.stakater.com/reload": "s, other"}, {"secret/s"}),
        ({"secret.reloader.stakater.com/reload": "app-.*"}, {"secret/app-1"}),
        ({"configmap.reloader.stakater.com/reload": "c,x"}, {"configmap/c", "configmap/x"}),
        (
            {
                "reloader.stakater.com/auto": "true",
                "secrets.exclude.reloader.stakater.com/reload": "s",
            },
            {"configmap/c", "configmap/x", "secret/app-1"},
        ),
        # Reloader reads ignore on sources only: on a workload it changes nothing.
        (
            {"reloader.stakater.com/auto": "true", "reloader.stakater.com/ignore": "true"},
            {"secret/s", "configmap/c", "secret/app-1", "configmap/x"},
        ),
    ],
    ids=[
        "auto",
        "auto-false",
        "secret-auto",
        "configmap-auto",
        "reload-names",
        "reload-regex",
        "configmap-reload",
        "exclude",
        "ignore-on-workload",
    ],
)
def test_reloaders_workload_annotations(annotations: dict[str, str], expected: set[str]) -> None:
    assert selected(optin_of(annotations)) == expected


def test_reloader_reads_the_pod_templates_annotations_when_the_workload_has_none() -> None:
    optin = optin_of({}, pod={"secret.reloader.stakater.com/auto": "true"})
    assert selected(optin) == {"secret/s", "secret/app-1"}


def test_search_selects_only_sources_that_match_and_ignore_on_a_source_wins() -> None:
    optin = optin_of({"reloader.stakater.com/search": "true"})
    assert selected(optin) == set()
    assert "configmap/c" in selected(optin, {"reloader.stakater.com/match": "true"})
    auto = optin_of({"reloader.stakater.com/auto": "true"})
    assert selected(auto, {"reloader.stakater.com/ignore": "true"}) == set()
    # With restarter's own opt-in, Reloader's ignore on a source does not take it out.
    own = optin_of({"reloader.stakater.com/auto": "true", keys.WORKLOAD_RESTART_AT: "now"})
    assert "secret/s" in selected(own, {"reloader.stakater.com/ignore": "true"})


def test_the_window_comes_from_the_workload_or_the_reloader_default() -> None:
    own = windows.from_workload({keys.WORKLOAD_RESTART_AT: "03.00_15.00"}, "UTC", HOUR)
    assert (own.at, own.origin) == ("03.00_15.00", windows.FROM_WORKLOAD)
    zoned = windows.from_workload(
        {keys.WORKLOAD_RESTART_AT: "cron", keys.CRON: "0 3 * * 1-5", keys.TIMEZONE: "Asia/Tokyo"},
        "UTC",
        HOUR,
    )
    assert (zoned.at, zoned.timezone, zoned.cron) == ("cron", "Asia/Tokyo", "0 3 * * 1-5")
    default = windows.from_workload({}, "UTC", HOUR, default_at="04.30")
    assert (default.at, default.origin) == ("04.30", windows.FROM_RELOADER)
    # The mark keeps where the window came from, and plan reads it back.
    mark = own.to_mark("Secret/db", "812")
    assert windows.from_mark(mark, "UTC", HOUR).origin == windows.FROM_WORKLOAD
    assert (
        windows.from_mark(
            windows.WindowRequest("03.00", "UTC", HOUR).to_mark("Secret/db"), "UTC", HOUR
        ).origin
        == windows.FROM_SOURCE
    )
    with pytest.raises(ScheduleError, match=keys.WORKLOAD_RESTART_AT):
        windows.from_workload({keys.WORKLOAD_RESTART_AT: "25.00"}, "UTC", HOUR)


def test_the_reference_map_wants_only_what_opted_in_workloads_may_select() -> None:
    told: list[tuple[str, str | None, str | None]] = []
    reference_map = ReferenceMap(on_wanted=lambda *key: told.append(key))
    plain = body({})
    refs, optin = uses_of(plain, reloader=True)
    reference_map.apply("ADDED", "deployments", "ns", "plain", refs, optin)
    assert not reference_map.wants("ns", "secret", "s") and told == []

    opted = body(
        {
            "secret.reloader.stakater.com/auto": "true",
            "configmap.reloader.stakater.com/reload": "app-.*",
        }
    )
    refs, optin = uses_of(opted, reloader=True)
    reference_map.apply("ADDED", "deployments", "ns", "web", refs, optin)
    assert reference_map.wants("ns", "secret", "s")
    assert not reference_map.wants("ns", "configmap", "c")  # used, but not selected
    assert reference_map.wants("ns", "configmap", "app-7")  # named by the expression
    assert told == [("ns", "secret", "s"), ("ns", None, None)]
    targets = reference_map.targets("ns", "secret", "s", None, {})
    assert [(t.plural, t.name, t.optin is not None) for t in targets] == [
        ("deployments", "plain", False),
        ("deployments", "web", True),
    ]
    assert [t.name for t in reference_map.targets("ns", "configmap", "app-7", None, {})] == ["web"]

    reference_map.apply("DELETED", "deployments", "ns", "web", frozenset())
    assert not reference_map.wants("ns", "secret", "s")
    assert not reference_map.wants("ns", "configmap", "app-7")
