"""What a source's label and annotations ask for, and how the request travels in a mark."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from restarter.model import keys
from restarter.model.pending import parse_mark
from restarter.model.windows import (
    AnyWindow,
    CronWindow,
    DailyWindow,
    Immediately,
    ScheduleError,
    WindowRequest,
    format_length,
    from_mark,
    from_source,
)

HOUR = dt.timedelta(hours=1)
TWO_TICKS = dt.timedelta(seconds=120)


def metadata(label: str | None, **annotations: str) -> dict[str, Any]:
    labels = {} if label is None else {keys.RESTART_AT_LABEL: label}
    names = {
        "cron": keys.CRON,
        "timezone": keys.TIMEZONE,
        "length": keys.WINDOW_LENGTH,
    }
    return {"labels": labels, "annotations": {names[k]: v for k, v in annotations.items()}}


def request_of(label: str | None, **annotations: str) -> WindowRequest:
    return from_source(metadata(label, **annotations), "UTC", HOUR, TWO_TICKS)


@pytest.mark.parametrize(
    ("label", "annotations", "expected"),
    [
        pytest.param("03.00", {}, WindowRequest("03.00", "UTC", HOUR), id="hhmm-defaults"),
        pytest.param(
            "15.00_03.00_15.00",
            {},
            WindowRequest("03.00_15.00", "UTC", HOUR),
            id="several-sorted-once",
        ),
        pytest.param("now", {}, WindowRequest("now", "UTC", HOUR), id="now"),
        pytest.param(
            "cron",
            {"cron": " 0 3  * * 1-5"},
            WindowRequest("cron", "UTC", HOUR, "0 3 * * 1-5"),
            id="cron",
        ),
        pytest.param(
            "03.00",
            {"timezone": "Europe/Warsaw", "length": "90m"},
            WindowRequest("03.00", "Europe/Warsaw", dt.timedelta(minutes=90)),
            id="zone-and-length-overrides",
        ),
        pytest.param(
            "cron",
            {"cron": "30 2 * * 0", "timezone": "Australia/Lord_Howe", "length": "2h"},
            WindowRequest("cron", "Australia/Lord_Howe", 2 * HOUR, "30 2 * * 0"),
            id="cron-with-overrides",
        ),
    ],
)
def test_a_source_asks_for_a_window_with_its_label_and_annotations(
    label: str, annotations: dict[str, str], expected: WindowRequest
) -> None:
    assert request_of(label, **annotations) == expected


@pytest.mark.parametrize(
    ("label", "annotations", "reason"),
    [
        pytest.param("25.00", {}, "not HH.MM", id="hour-25"),
        pytest.param("03.00_", {}, "not HH.MM", id="trailing-separator"),
        pytest.param("03.00_3.30", {}, "not HH.MM", id="one-bad-of-two"),
        pytest.param("NOW", {}, "not HH.MM", id="now-is-lowercase"),
        pytest.param("", {}, "not HH.MM", id="empty"),
        pytest.param(None, {}, "not HH.MM", id="no-label"),
        pytest.param("cron", {}, "needs the annotation", id="cron-without-expression"),
        pytest.param("cron", {"cron": "61 3 * * *"}, "not a valid cron", id="minute-61"),
        pytest.param("03.00", {"cron": "0 3 * * *"}, "only read with", id="cron-with-hhmm"),
        pytest.param("03.00", {"timezone": "Nope/Nowhere"}, "unknown time zone", id="bad-zone"),
        pytest.param("03.00", {"length": "2h30"}, "not like 1h", id="length-2h30"),
        pytest.param("03.00", {"length": "25h"}, "at most 24h", id="length-25h"),
        pytest.param("03.00", {"length": "2m"}, "two timer intervals", id="shorter-than-ticks"),
        pytest.param("03.00", {"length": "99999999999h"}, "not like 1h", id="length-overflow"),
        pytest.param("now", {"timezone": "Nope/Nowhere"}, "unknown time zone", id="now-bad-zone"),
        pytest.param("cron", {"cron": "R 3 * * *"}, "no random", id="cron-random"),
    ],
)
def test_a_bad_request_is_refused_naming_what_is_wrong(
    label: str | None, annotations: dict[str, str], reason: str
) -> None:
    with pytest.raises(ScheduleError, match=reason):
        request_of(label, **annotations)


def test_now_needs_no_minimum_length() -> None:
    assert request_of("now", length="1s").at == "now"


@pytest.mark.parametrize(
    ("request_", "window_type"),
    [
        pytest.param(WindowRequest("03.00", "UTC", HOUR), DailyWindow, id="one-start"),
        pytest.param(WindowRequest("03.00_15.00", "UTC", HOUR), AnyWindow, id="two-starts"),
        pytest.param(WindowRequest("cron", "UTC", HOUR, "0 3 * * *"), CronWindow, id="cron"),
        pytest.param(WindowRequest("now", "UTC", HOUR), Immediately, id="now"),
    ],
)
def test_each_request_builds_its_window(request_: WindowRequest, window_type: type) -> None:
    assert isinstance(request_.window(), window_type)


@pytest.mark.parametrize(
    "request_",
    [
        WindowRequest("03.00", "Europe/Warsaw", dt.timedelta(minutes=90)),
        WindowRequest("03.00_15.30", "Asia/Kolkata", HOUR),
        WindowRequest("cron", "America/New_York", 2 * HOUR, "0 3 * * 1-5"),
    ],
    ids=["hhmm", "several", "cron"],
)
def test_a_mark_carries_the_request_exactly(request_: WindowRequest) -> None:
    mark = request_.to_mark("Secret/db")
    assert from_mark(mark, "UTC", dt.timedelta(hours=5)) == request_
    assert parse_mark("secret.db", None, mark).source == "Secret/db"


def test_a_now_mark_reads_back_as_now() -> None:
    mark = WindowRequest("now", "Europe/Warsaw", HOUR).to_mark("ConfigMap/app")
    assert json.loads(mark) == {"at": "now", "source": "ConfigMap/app"}
    assert from_mark(mark, "UTC", HOUR).at == "now"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("{not json", "not a window restarter wrote", id="broken-json"),
        pytest.param('{"at":"03.00"}', "not a window restarter wrote", id="missing-fields"),
        pytest.param("[1]", "not a window restarter wrote", id="a-list"),
        pytest.param("03.00", "not a window restarter wrote", id="bare-hhmm"),
        pytest.param(
            '{"at":"03.00","length":"1h","timezone":"Mars/Base"}',
            "unknown time zone",
            id="bad-zone",
        ),
        pytest.param(
            '{"at":"cron","cron":"61 3 * * *","length":"1h","timezone":"UTC"}',
            "not a valid cron",
            id="bad-cron",
        ),
    ],
)
def test_an_unreadable_mark_is_an_error_not_a_crash(value: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason):
        from_mark(value, "UTC", HOUR)


@pytest.mark.parametrize(
    ("length", "text"),
    [
        (dt.timedelta(hours=1), "1h"),
        (dt.timedelta(minutes=90), "1h30m"),
        (dt.timedelta(seconds=45), "45s"),
        (dt.timedelta(hours=24), "24h"),
        (dt.timedelta(hours=2, seconds=5), "2h5s"),
    ],
)
def test_lengths_are_written_as_they_are_read(length: dt.timedelta, text: str) -> None:
    assert format_length(length) == text


@pytest.mark.parametrize(
    ("request_", "text"),
    [
        (
            WindowRequest("03.00_15.00", "Europe/Warsaw", HOUR),
            "03.00, 15.00 Europe/Warsaw (1h long)",
        ),
        (WindowRequest("cron", "UTC", 2 * HOUR, "0 3 * * 1-5"), "cron '0 3 * * 1-5' UTC (2h long)"),
        (WindowRequest("now", "UTC", HOUR), "now"),
    ],
    ids=["several", "cron", "now"],
)
def test_a_request_describes_itself_for_events(request_: WindowRequest, text: str) -> None:
    assert request_.describe() == text
