"""Notifications through apprise: restarter's notified Events (``model.notices``), told by
the Event path (``Events.listen``), sent to the configured URLs, batched per namespace.

A namespace's batch goes out once no notice joined it for ``batch`` seconds (a window's
restarts arrive together), or ``MAX_AGE`` batches after it began. URLs carry tokens: they
are never logged, and apprise's own log (which may name them) is silenced
(``services.logs``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from restarter.model import notices
from restarter.model.notices import Notice
from restarter.model.reasons import Reason
from restarter.services import metrics

log = logging.getLogger(__name__)

#: A batch older than this many batch intervals goes out even while notices keep coming.
MAX_AGE = 10
#: Seconds between the sender's looks for batches that are due.
POLL = 0.5


class NotifyError(ValueError):
    """A URL apprise cannot use; the message names its position and scheme only."""


def _apprise(urls: Iterable[str]) -> Any:
    import apprise  # loaded only when notifications are configured (its log: services.logs)

    sender = apprise.Apprise()
    for position, url in enumerate(urls, 1):
        if not sender.add(url):
            scheme = url.split("://", 1)[0] if "://" in url else "none"
            raise NotifyError(
                f"notification URL #{position} (scheme {scheme!r}) is not one apprise can use"
            )
    return sender


def check_urls(urls: Iterable[str]) -> None:
    """NotifyError for a URL apprise cannot use (at start-up, before anything is watched)."""
    _apprise(urls)


@dataclass
class _Batch:
    began: float
    last: float
    notices: list[Notice] = field(default_factory=list)


class Notifier:
    """Listens to restarter's Events (``Events.listen``) and sends batches in a thread."""

    def __init__(self, urls: Iterable[str], batch: float) -> None:
        self._sender = _apprise(urls)
        self.batch = batch
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def told(self, obj: Mapping[str, Any], reason: Reason, message: str) -> None:
        notice = notices.notice_of(obj, reason.type, reason.name, message)
        if notice is None:
            return
        now = time.monotonic()
        with self._lock:
            batch = self._batches.setdefault(notice.namespace, _Batch(now, now))
            batch.notices.append(notice)
            batch.last = now

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="notifications", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Send what is batched, then stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._send(self._due(force=True))

    def _due(self, force: bool = False) -> list[tuple[str, list[Notice]]]:
        now = time.monotonic()
        with self._lock:
            due = [
                namespace
                for namespace, batch in self._batches.items()
                if force
                or now - batch.last >= self.batch
                or now - batch.began >= MAX_AGE * self.batch
            ]
            return [(namespace, self._batches.pop(namespace).notices) for namespace in due]

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            self._send(self._due())

    def _send(self, batches: list[tuple[str, list[Notice]]]) -> None:
        for namespace, batch in batches:
            title, body, warns = notices.render(namespace, batch)
            try:
                sent = bool(
                    self._sender.notify(
                        body=body, title=title, notify_type="warning" if warns else "info"
                    )
                )
            except Exception as error:  # a notification must never stop restarts
                log.warning(f"notification for {namespace} not sent: {type(error).__name__}")
                sent = False
            if not sent:
                log.warning(f"notification for {namespace} not sent ({len(batch)} notice(s))")
            metrics.NOTIFICATIONS.labels("sent" if sent else "failed").inc()
