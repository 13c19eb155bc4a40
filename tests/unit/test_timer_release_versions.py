"""Which bodies a timer that restarted (or cleared) its workload still acts on.

kopf hands a timer's memo every later body of the same object until its watch reports
the object DELETED. The timer remembers the resourceVersions it settled the workload at
(``TimerMemo.settled``): bodies up to its result (the DELETED echo, events delivered late)
are skipped; a newer body
(stamped again after kopf's watch missed the DELETED) is decided again.
"""

from __future__ import annotations

from typing import Any

import pytest

from restarter.model import keys
from restarter.model.resource_versions import compare_versions
from restarter.restarting.timer_state import settle, settled, timer_wanted

PENDING = {keys.pending_key("secret", "db"): "1796000000"}


def body(version: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version, "annotations": dict(PENDING)}}


@pytest.mark.parametrize(
    ("left", "right", "order"),
    [
        ("9", "10", -1),
        ("10", "9", 1),
        ("123", "123", 0),
        ("1000", "0999", None),  # a leading zero: not a Kubernetes resourceVersion
        ("12a", "12", None),
        ("", "1", None),
        ("١٢", "12", None),  # digits outside ASCII
    ],
)
def test_resource_versions_compare_by_length_then_digits(
    left: str, right: str, order: int | None
) -> None:
    assert compare_versions(left, right) == order


def test_nothing_is_settled_before_a_restart_or_clear() -> None:
    memo: dict[str, Any] = {}
    assert not settled(memo, body("5")["metadata"])
    assert timer_wanted(PENDING, body("5")["metadata"], memo)


def test_bodies_up_to_the_settled_result_are_skipped_and_newer_ones_decided() -> None:
    memo: dict[str, Any] = {}
    # The tick read 98, its patch conflicted, it read 100 and patched it into 101.
    settle(memo, body("98"), body("100"), body("101"))
    for seen in ("98", "99", "100", "101"):  # late events and the DELETED echo
        assert not timer_wanted(PENDING, body(seen)["metadata"], memo), seen
    for later in ("102", "1000"):  # stamped again after it was settled
        assert timer_wanted(PENDING, body(later)["metadata"], memo), later


def test_versions_that_cannot_be_compared_are_skipped_only_when_equal() -> None:
    memo: dict[str, Any] = {}
    settle(memo, body("a7"), body("a7"), body("a9"))
    assert settled(memo, body("a7")["metadata"])
    assert settled(memo, body("a9")["metadata"])
    assert not settled(memo, body("a8")["metadata"])


def test_a_body_without_marks_is_not_ticked() -> None:
    assert not timer_wanted({}, {"resourceVersion": "7"}, {})
