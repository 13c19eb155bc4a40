"""Restarts held while a first wave is judged, without a cluster: of many restarts one
source holds, one asks the blockers again every poll and the rest wait for it; all go as
soon as it sees the hold lift, and each gives up after one timer interval."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

from restarter.model import holds
from restarter.model.holds import Hold
from restarter.restarting import ticking
from restarter.restarting.blocking import Answer
from restarter.restarting.judging_waits import JudgingWaits
from restarter.restarting.pacing import Limits, Pacer
from restarter.restarting.timer_state import TimerContext
from restarter.services.settings import Settings


class _Breaker:
    """Blockers whose breaker judges Secret ``db``'s first wave until ``released``."""

    def __init__(self) -> None:
        self.asks = 0
        self.released = False

    def ask(self, workload: Any, now: dt.datetime) -> Answer:
        self.asks += 1
        if self.released:
            return Answer(None, ())
        return Answer(Hold(holds.BREAKER, "Secret/db", "waiting", judging=True), ())


def _timer(blockers: _Breaker, interval: float, waits: JudgingWaits | None) -> TimerContext:
    return TimerContext(
        plural="deployments",
        settings=Settings(timer_interval=interval),
        api=None,  # type: ignore[arg-type]
        pacer=Pacer(Limits(), stale_after=10),
        seen=None,  # type: ignore[arg-type]
        memo={},
        logger=None,  # type: ignore[arg-type]
        events=None,  # type: ignore[arg-type]
        blockers=blockers,  # type: ignore[arg-type]
        waits=waits,
    )


def _workload(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "annotations": {}}}


async def _held(blockers: _Breaker, waits: JudgingWaits, count: int, release_after: float):
    timers = [_timer(blockers, 10, waits) for _ in range(count)]
    tasks = [
        asyncio.create_task(ticking._blocked(timer, blockers, _workload(f"w{i}")))  # type: ignore[arg-type]
        for i, timer in enumerate(timers)
    ]
    await asyncio.sleep(release_after)
    asks_while_judged = blockers.asks
    blockers.released = True
    started = time.monotonic()
    blocked = await asyncio.gather(*tasks)
    return asks_while_judged, blocked, time.monotonic() - started


def test_one_restart_asks_again_while_the_rest_wait_and_all_go_on_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ticking.tick_reports, "report_blockers", lambda *args: None)
    monkeypatch.setattr(ticking, "PACING_POLL", 0.05)
    blockers, waits = _Breaker(), JudgingWaits()
    asks, blocked, took = asyncio.run(_held(blockers, waits, 200, release_after=0.5))
    # 200 first asks, then one ask per poll (about ten in 0.5 s), not 200 per poll.
    assert 200 <= asks <= 200 + 15
    assert blocked == [False] * 200, "every restart goes once the hold lifts"
    assert took < 1.0
    assert len(waits) == 0


def test_a_restart_still_held_gives_up_after_one_timer_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ticking.tick_reports, "report_blockers", lambda *args: None)
    monkeypatch.setattr(ticking, "PACING_POLL", 0.05)
    blockers, waits = _Breaker(), JudgingWaits()

    async def held() -> list[bool]:
        timers = [_timer(blockers, 0.3, waits) for _ in range(5)]
        return list(
            await asyncio.gather(
                *(ticking._blocked(t, blockers, _workload(str(i))) for i, t in enumerate(timers))  # type: ignore[arg-type]
            )
        )

    assert asyncio.run(held()) == [True] * 5
    assert len(waits) == 0
