"""A source check reads its source only when it can use it: a check queued before the
workload streams' first listing waits as a name, and reads once they are in sync, so no
body waits in memory for the reference map."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from restarter.restarting.checking import LABELLED_CONCURRENCY, SourceChecks


class Reads:
    def __init__(self) -> None:
        self.reads: list[tuple[str, str, str]] = []

    def read_source(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append((kind, namespace, name))
        return None  # gone: the check ends there


def test_a_check_reads_its_source_only_once_the_map_is_in_sync() -> None:
    in_sync, api = threading.Event(), Reads()
    context = SimpleNamespace(in_sync=in_sync, api=api)
    checks = SourceChecks(lambda *_: context, LABELLED_CONCURRENCY, labelled=True)  # type: ignore[arg-type,return-value]

    async def scenario() -> None:
        task = asyncio.create_task(checks.check("configmap", "ns", "bundle"))
        await asyncio.sleep(0.3)
        assert api.reads == []
        in_sync.set()
        await asyncio.wait_for(task, 2)

    asyncio.run(scenario())
    assert api.reads == [("configmap", "ns", "bundle")]


def test_sources_queued_many_times_wait_as_one_name_each() -> None:
    checks = SourceChecks(lambda *_: None, labelled=True)  # type: ignore[arg-type,return-value]

    async def scenario() -> None:
        checks._queue = asyncio.Queue()
        for _ in range(3):
            for index in range(100):
                checks._put(("configmap", f"ns-{index:03d}", "bundle"))
        assert checks._queue.qsize() == 100

    asyncio.run(scenario())
