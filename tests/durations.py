"""Longest files first: the order in which xdist hands whole files to its workers.

The suite's wall time is the busiest worker's. xdist's own order (files with the most tests
first) sent the one-test fault and real-node files, minutes each, last. Here each file
starts in the order of its seconds in ``durations.json``, measured in a run of the suite;
a file not listed there goes after the listed ones.

Refresh after adding or slowing a file::

    .venv/bin/pytest -n 5 --dist loadfile --no-loadscope-reorder --junitxml=/tmp/suite.xml
    .venv/bin/python -m tests.durations /tmp/suite.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest

RECORDED = Path(__file__).with_name("durations.json")


def file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: files by recorded seconds, longest first; within a file,
    the collected order."""
    seconds: dict[str, float] = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    rank = {path: -took for path, took in seconds.items()}
    items.sort(key=lambda item: rank.get(file_of(item), 0.0))


def measured(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown) from a JUnit XML report."""
    took: Counter[str] = Counter()
    for case in ElementTree.parse(junit).iter("testcase"):
        module = [part for part in case.get("classname", "").split(".") if part[:1].islower()]
        took["/".join(module) + ".py"] += float(case.get("time", 0))
    return {path: round(took[path], 1) for path, _ in took.most_common()}


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(measured(Path(sys.argv[1])), indent=1) + "\n")
