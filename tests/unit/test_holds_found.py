"""Which hold keeps a due restart waiting, and how plan shows it."""

from __future__ import annotations

import datetime as dt
import json

from restarter.commands import planning
from restarter.model import holds, keys
from restarter.model.holds import Hold
from restarter.services.settings import Settings

NOW = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)


def test_nothing_holds_without_an_annotation_or_an_operator_hold() -> None:
    assert holds.find_hold({"other": "x"}, "web", {}, "shop", "") is None
    assert holds.find_hold(None, "web", None, "shop", "   ") is None


def test_the_workload_hold_is_named_before_the_namespace_and_operator_holds() -> None:
    found = holds.find_hold({keys.HOLD: "db migration"}, "web", {keys.HOLD: "freeze"}, "shop", "x")
    assert found == Hold(holds.WORKLOAD, "web", "db migration")
    assert found.describe() == "held by restarter.io/hold on workload web: db migration"


def test_a_namespace_hold_holds_every_workload_in_it() -> None:
    found = holds.find_hold({}, "web", {keys.HOLD: "freeze"}, "shop", "")
    assert found == Hold(holds.NAMESPACE, "shop", "freeze")


def test_an_empty_annotation_still_holds() -> None:
    found = holds.find_hold({keys.HOLD: ""}, "web", {}, "shop", "")
    assert found is not None
    assert found.describe().endswith(": no reason given")


def test_the_operator_hold_holds_everything() -> None:
    found = holds.find_hold({}, "web", {}, "shop", "release freeze")
    assert found == Hold(holds.OPERATOR, "", "release freeze")
    assert found.describe() == "held by the operator's --hold: release freeze"


def test_an_unreadable_namespace_holds_and_says_why() -> None:
    found = holds.unreadable_namespace("shop", "HTTP 403")
    assert found.unreadable
    assert "could not be read (HTTP 403)" in found.describe()


def _pending(at: str) -> dict[str, object]:
    window = json.dumps({"at": at, "length": "1h", "source": "Secret/db", "timezone": "UTC"})
    annotations = {
        keys.pending_key("secret", "db"): str(int(NOW.timestamp()) - 60),
        keys.window_key("secret", "db"): window,
    }
    return {"metadata": {"name": "web", "namespace": "shop", "annotations": annotations}}


def test_plan_shows_a_due_restart_held_and_by_what() -> None:
    hold = Hold(holds.NAMESPACE, "shop", "freeze")
    (row,) = planning.workload_rows("deployments", _pending("11.30"), NOW, Settings(), hold)
    assert row.state == planning.HELD
    assert row.notes[-1].startswith("held by restarter.io/hold on namespace shop: freeze")
    assert row.next_restart is not None and row.next_restart <= NOW


def test_plan_without_a_hold_shows_the_restart_due() -> None:
    (row,) = planning.workload_rows("deployments", _pending("11.30"), NOW, Settings())
    assert row.state == planning.DUE
