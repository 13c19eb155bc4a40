"""The request concurrency restarter allows itself: halved by 429s, grown back by answers;
what a retried request says in the log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from restarter.services.kube.requesting import Concurrency, retrying


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


def _failing_once(error: Exception) -> Callable[[], str]:
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return "answered"

    return call


def test_a_request_without_an_answer_is_tried_again_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timeout = urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out.")  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="restarter.services.kube.requesting"):
        assert retrying(_failing_once(timeout), "patch") == "answered"
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("patch: no answer (ReadTimeoutError")
    assert "trying again in 0.5s" in record.getMessage()


def test_a_server_error_is_logged_and_throttling_only_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="restarter.services.kube.requesting"):
        retrying(_failing_once(ApiException(status=503, reason="Service Unavailable")), "get")
        retrying(_failing_once(ApiException(status=429, reason="Too Many Requests")), "get")
    assert [record.getMessage() for record in caplog.records] == [
        "get: API error 503 Service Unavailable; trying again in 0.5s"
    ]
