"""The API's failures are parsed once, into the types callers catch: each status to its
type, the API's message and Retry-After read from the answer, and a ``describe()`` that
says the status and the message; the request path raises them for every error answer and
every request left without an answer."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from restarter.services.kube import errors, requesting
from restarter.services.kube.errors import (
    ApiError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NoAnswer,
    NotFound,
    OtherError,
    Refused,
    Throttled,
    Unavailable,
)


def status_body(message: str, code: int) -> str:
    return json.dumps({"kind": "Status", "message": message, "code": code})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, Invalid),
        (401, OtherError),
        (403, Forbidden),
        (404, NotFound),
        (405, Refused),
        (409, Conflict),
        (410, Expired),
        (413, Refused),
        (422, Invalid),
        (429, Throttled),
        (500, Unavailable),
        (503, Unavailable),
        (504, Unavailable),
        (302, OtherError),
    ],
)
def test_each_status_is_its_type(status: int, kind: type[ApiError]) -> None:
    error = errors.from_answer(status, "Reason", status_body("said", status))
    assert type(error) is kind
    assert error.status == status


def test_forbidden_and_invalid_are_refusals_and_no_answer_is_unavailable() -> None:
    assert issubclass(Forbidden, Refused) and issubclass(Invalid, Refused)
    assert issubclass(NoAnswer, Unavailable)


def test_describe_says_the_status_the_reason_and_the_apis_message() -> None:
    message = 'secrets "db" is forbidden: ValidatingAdmissionPolicy denied request'
    error = errors.from_answer(403, "Forbidden", status_body(message, 403))
    assert error.describe() == f"HTTP 403 Forbidden: {message}"
    assert error.brief == "HTTP 403"


def test_a_long_message_is_cut_and_a_body_that_is_no_status_is_left_out() -> None:
    long = errors.from_answer(422, "Unprocessable Entity", status_body("x" * 5000, 422))
    assert long.describe() == "HTTP 422 Unprocessable Entity: " + "x" * errors.MESSAGE_LIMIT
    for body in (None, "", "<html>bad gateway</html>", "[1, 2]"):
        assert errors.from_answer(502, "Bad Gateway", body).describe() == "HTTP 502 Bad Gateway"


def test_retry_after_is_read_in_seconds_and_ignored_when_it_is_a_date() -> None:
    assert errors.from_answer(429, "", None, {"Retry-After": "3"}).retry_after == 3.0
    dated = {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    assert errors.from_answer(429, "", None, dated).retry_after == 0.0


def test_a_watch_error_event_is_typed_from_its_status_object() -> None:
    expired = errors.from_status({"code": 410, "reason": "Expired", "message": "too old"})
    assert isinstance(expired, Expired)
    assert expired.describe() == "HTTP 410 Expired: too old"
    assert isinstance(errors.from_status({"code": 500, "reason": "InternalError"}), Unavailable)


def test_no_answer_names_what_failed() -> None:
    error = errors.no_answer(TimeoutError("read timed out"))
    assert isinstance(error, NoAnswer) and error.status == 0
    assert error.brief == "no answer (TimeoutError)"
    assert error.describe() == "no answer (TimeoutError: read timed out)"


def test_the_request_path_raises_a_refusal_as_its_type_without_trying_again() -> None:
    calls = []

    def refused() -> None:
        calls.append(1)
        answer = ApiException(status=403, reason="Forbidden")
        answer.body = status_body("denied by policy", 403)
        raise answer

    with pytest.raises(Forbidden, match="denied by policy"):
        requesting.retrying(refused, "patch")
    assert len(calls) == 1


def test_the_request_path_raises_no_answer_once_its_attempts_are_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(requesting.time, "sleep", lambda _: None)

    def silent() -> None:
        raise urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out.")  # type: ignore[arg-type]

    with pytest.raises(NoAnswer) as caught:
        requesting.retrying(silent, "get")
    assert caught.value.reason == "ReadTimeoutError"


def test_the_request_path_gives_up_on_throttling_as_throttled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(requesting.time, "sleep", lambda _: None)
    # Each 429 halves the shared limit: this test's own, so no other test inherits it.
    monkeypatch.setattr(requesting, "CONCURRENCY", requesting.Concurrency(4))

    def throttled() -> None:
        raise ApiException(status=429, reason="Too Many Requests")

    with pytest.raises(Throttled):
        requesting.retrying(throttled, "patch")
