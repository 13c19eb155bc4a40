"""Which Events are notified, and how one namespace's batch reads."""

from __future__ import annotations

import logging

import pytest

from restarter.main import main
from restarter.model import notices
from restarter.services.settings import build


def workload(name: str) -> dict[str, object]:
    return {"kind": "Deployment", "metadata": {"name": name, "namespace": "shop"}}


def test_only_restarts_holds_and_failed_stamps_are_notified() -> None:
    assert notices.notice_of(workload("web"), "Normal", "RestartScheduled", "x") is None
    held = notices.notice_of(workload("web"), "Normal", "RestartHeld", "restart due but held")
    assert held == notices.Notice(
        "shop", "Deployment/web", "RestartHeld", "restart due but held", False
    )


def test_a_batch_counts_each_kind_and_lists_each_event() -> None:
    batch = [
        notices.notice_of(workload("a"), "Normal", "Restarted", "restarted in window (x)"),
        notices.notice_of(
            workload("b"), "Warning", "Restarted", "restarted before its window: the certificate"
        ),
        notices.notice_of(workload("c"), "Normal", "Restarted", "restarted in window (x)"),
    ]
    title, body, warns = notices.render("shop", [n for n in batch if n is not None])
    assert title == "restarter in shop: 2 restarted, 1 restarted early for a certificate"
    assert body.splitlines()[0] == "Deployment/a: Restarted: restarted in window (x)"
    assert warns  # the expired certificate's Warning


def test_a_large_batch_lists_the_first_and_counts_the_rest() -> None:
    batch = [
        notices.Notice("shop", f"Deployment/w{i}", "Restarted", "restarted in window", False)
        for i in range(notices.LISTED + 7)
    ]
    title, body, warns = notices.render("shop", batch)
    assert title == f"restarter in shop: {notices.LISTED + 7} restarted"
    assert body.splitlines()[-1] == "and 7 more"
    assert not warns


def test_a_failed_stamp_warns() -> None:
    failed = notices.notice_of(
        {"kind": "Secret", "metadata": {"name": "db", "namespace": "shop"}},
        "Warning",
        "StampFailed",
        "could not schedule the restart of Deployment web; will retry",
    )
    assert failed is not None
    title, _, warns = notices.render("shop", [failed])
    assert title == "restarter in shop: 1 could not be scheduled" and warns


def test_a_url_apprise_cannot_use_stops_the_start_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # main sets up the process's logging (services.logs) before it checks the URLs, so
    # that apprise's lines cannot show them: the other tests get the loggers back as they were.
    for name in ("", "asyncio"):
        logger = logging.getLogger(name or None)
        for attribute in ("handlers", "level", "propagate"):
            value = getattr(logger, attribute)
            monkeypatch.setattr(
                logger, attribute, list(value) if attribute == "handlers" else value
            )
    monkeypatch.setenv("RESTARTER_NOTIFY_URLS", "json://127.0.0.1:9/ok, nosuch://token-abc@host")
    assert main([]) == 2
    error = capsys.readouterr().err
    assert "notification URL #2 (scheme 'nosuch')" in error
    assert "token-abc" not in error


def test_the_urls_are_read_from_the_environment_only_and_never_shown() -> None:
    settings = build([], {"RESTARTER_NOTIFY_URLS": "json://a/x  json://b/y,json://c/z"})
    assert settings.notify_urls == ("json://a/x", "json://b/y", "json://c/z")
    assert "json://" not in repr(settings)
