"""Whether Rollouts are served is asked of discovery at most once per interval, however
many namespaces' Rollout streams ask (a namespace selector may give hundreds)."""

from __future__ import annotations

from restarter.cluster import workload_streams
from restarter.cluster.workload_streams import ServedAsked


class Discovery:
    def __init__(self) -> None:
        self.asked = 0
        self.serves = False

    def served(self, plural: str) -> bool:
        assert plural == "rollouts"
        self.asked += 1
        return self.serves


def test_many_streams_ask_discovery_once_per_interval(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = [100.0]
    monkeypatch.setattr(workload_streams.time, "monotonic", lambda: clock[0])
    discovery = Discovery()
    served = ServedAsked(discovery)  # type: ignore[arg-type]
    assert [served() for _ in range(50)] == [False] * 50
    assert discovery.asked == 1
    discovery.serves = True
    clock[0] += workload_streams.DISCOVERY_INTERVAL - 0.1
    assert served() is False and discovery.asked == 1
    clock[0] += 0.2
    assert served() is True and discovery.asked == 2
    clock[0] += 1000
    discovery.serves = False  # once served, for good: no more questions
    assert served() is True and discovery.asked == 2
