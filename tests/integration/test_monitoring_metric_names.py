"""The chart's alerts and dashboard query series a running operator really exports."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable

from restarter_cluster.ports import free_port
from tests.chart_monitoring import used_metric_names
from tests.conftest import Operator

#: A family's name on its HELP and TYPE lines, and a sample's name.
DECLARED = re.compile(r"^# (?:HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) ", re.MULTILINE)
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", re.MULTILINE)


def exported_names(port: int) -> set[str]:
    """Every series name the endpoint declares or samples (a counter with labels and no
    sample yet is declared only)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return set(DECLARED.findall(text)) | set(SAMPLE.findall(text))


def test_every_series_the_alerts_and_the_dashboard_query_is_exported(
    operator: Callable[..., Operator],
) -> None:
    port = free_port()
    operator("--metrics-port", str(port))
    used = used_metric_names()
    assert len(used) >= 14, used  # the names were found in the rendered rule and dashboard
    exported = exported_names(port)
    assert sorted(used - exported) == []
