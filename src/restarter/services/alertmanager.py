"""Alertmanager's v2 API, read for the alert gate: the alerts that fire now."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

#: Seconds Alertmanager has to answer.
ALERTS_TIMEOUT = 5.0
#: The alerts that can hold a restart: firing, neither silenced nor inhibited.
ALERTS_QUERY = "active=true&silenced=false&inhibited=false&unprocessed=true"


def read_alerts(base_url: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager's v2 API lists as firing, not silenced, not inhibited."""
    url = f"{base_url.rstrip('/')}/api/v2/alerts?{ALERTS_QUERY}"
    with urllib.request.urlopen(url, timeout=ALERTS_TIMEOUT) as response:
        found = json.loads(response.read())
    if not isinstance(found, list):
        raise ValueError("Alertmanager's answer is not a list of alerts")
    return [alert for alert in found if isinstance(alert, dict)]
