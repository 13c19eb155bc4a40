"""kopf's insights, made without importing kopf's private modules, are what ``kopf.run``
takes and what ``LateKind`` adds a kind to."""

from __future__ import annotations

import asyncio
import typing

import kopf

from restarter.operator.late_kinds import kopf_insights


def test_the_insights_are_of_the_type_kopf_run_takes() -> None:
    insights = kopf_insights()
    assert isinstance(insights, typing.get_args(typing.get_type_hints(kopf.run)["insights"]))
    assert insights is not kopf_insights()


def test_the_insights_have_what_a_late_kind_uses() -> None:
    insights = kopf_insights()
    assert insights.watched_resources == set()
    assert isinstance(insights.ready_resources, asyncio.Event)
    assert isinstance(insights.revised, asyncio.Condition)
