"""A fan-out's stamps go out a bounded number at a time, and its messages stay short."""

from __future__ import annotations

import threading
import time

from restarter.restarting.fanning_out import NAMED, Names, _bounded


def test_no_more_calls_are_submitted_than_run_at_once() -> None:
    lock = threading.Lock()
    running, most = 0, 0

    def call(item: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.002)
        with lock:
            running -= 1
        return item * 2

    results = dict(_bounded(call, list(range(200)), 4))
    assert results == {item: item * 2 for item in range(200)}
    assert 1 < most <= 4


def test_the_items_taken_follow_the_answers() -> None:
    submitted: list[int] = []

    def call(item: int) -> int:
        submitted.append(item)
        return item

    pairs = _bounded(call, list(range(100)), 3)
    first = next(pairs)
    # Only the first few were submitted when the first answer was taken: the rest wait.
    assert first[0] in range(4)
    assert len(submitted) <= 4
    assert len(list(pairs)) == 99


def test_an_error_is_a_result_not_the_end() -> None:
    def call(item: int) -> int | Exception:
        return ValueError(item) if item == 3 else item

    results = dict(_bounded(call, list(range(6)), 2))
    assert isinstance(results[3], ValueError) and results[5] == 5


def test_names_count_all_and_name_the_first() -> None:
    names = Names()
    for index in range(NAMED + 25):
        names.add(f"Deployment web-{index:05d}")
    text = str(names)
    assert len(names) == NAMED + 25
    assert text.startswith("Deployment web-00000, ") and text.endswith(" and 25 more")
    assert text.count("Deployment") == NAMED


def test_a_few_names_are_all_named() -> None:
    names = Names()
    for name in ("Deployment b", "Deployment a"):
        names.add(name)
    assert str(names) == "Deployment a, Deployment b"
