"""The operator's logging, set up in one place (``configure``), by the entry point, once,
before anything that logs runs: kopf's format for every line, the level, and the
libraries' loggers that would be too loud or could name a secret. Every other module only
takes its logger (``logging.getLogger(__name__)``) and never sets a level or a filter."""

from __future__ import annotations

import logging

import kopf

#: Libraries' loggers and the least level they show.
LIBRARY_LEVELS = {
    # A line per request (its body at DEBUG), connection and retry.
    "kubernetes.client.rest": logging.WARNING,
    "urllib3": logging.WARNING,
    # The Kubernetes client's leader election: a line per attempt to acquire or renew.
    "leaderelection": logging.WARNING,
    # apprise's lines may name the notification URLs, which carry tokens: none is shown.
    "apprise": logging.CRITICAL + 1,
}


def configure(log_format: str, level: str | int) -> None:
    """kopf's format (``json`` or its full plain lines, each object named first), the
    root level, the libraries' levels, and kopf's per-tick success line dropped."""
    kopf.configure(
        log_format=kopf.LogFormat.JSON if log_format == "json" else kopf.LogFormat.FULL,
        log_prefix=True,
    )
    logging.getLogger().setLevel(level)
    for name, least in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(least)
    objects = logging.getLogger("kopf.objects")
    if quiet_timer_ticks not in objects.filters:
        objects.addFilter(quiet_timer_ticks)


def quiet_timer_ticks(record: logging.LogRecord) -> bool:
    """Drop kopf's "Timer ... succeeded." line: every pending workload logs it every tick."""
    message = record.getMessage()
    return not (message.startswith("Timer 'pending_restart") and message.endswith("succeeded."))
