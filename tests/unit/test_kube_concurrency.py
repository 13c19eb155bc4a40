"""The request concurrency restarter allows itself: halved by 429s, grown back by answers."""

from __future__ import annotations

import threading
import time

from restarter.runtime.kube import Concurrency


def test_each_429_halves_the_limit_down_to_one() -> None:
    limit = Concurrency(16)
    for expected in (8, 4, 2, 1, 1):
        limit.answered(throttled=True)
        assert limit.limit == expected


def test_answers_grow_the_limit_back_by_about_one_per_limit_answers() -> None:
    limit = Concurrency(16)
    for _ in range(4):
        limit.answered(throttled=True)
    for _ in range(10):
        limit.answered(throttled=False)
    assert 4 <= limit.limit < 6
    for _ in range(1000):
        limit.answered(throttled=False)
    assert limit.limit == 16  # never above the ceiling


def test_requests_beyond_the_limit_wait_for_one_to_finish() -> None:
    limit = Concurrency(4)
    for _ in range(2):
        limit.answered(throttled=True)  # limit 1
    entered = threading.Event()

    def second() -> None:
        with limit:
            entered.set()

    with limit:
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        assert not entered.is_set()
    thread.join(5)
    assert entered.is_set()
