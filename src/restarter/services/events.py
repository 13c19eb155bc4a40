"""The one Event path: every Event restarter posts goes through ``Events.post``, with a
reason declared in ``model.reasons`` (the Event's type is the reason's).

One carrier, built once per run around the API's ``create_event``: one create request
from the calling thread. Every caller is a thread of a bounded pool already (the stamping
pool, the tick's and the source check's hops into kopf's handler threads, the streams,
the sweeper), so a fan-out to 10 000 dependents holds no queue of Events and no connection
per Event. Never from the event loop: a request there would stall every handler and timer
for as long as it takes, so ``post`` refuses to run in a thread that runs an event loop.

What a failed post costs is the caller's choice, a parameter of each call (``on_failure``):
``LOG`` logs it, counts it and goes on (the default: the decision is made, only its Event
is lost); ``RAISE`` counts it and hands the error to the caller, who tells its own story.
The listeners (``listen``: the notifications) are told of every Event posted, taken or not.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from restarter.model.reasons import Reason
from restarter.services import metrics
from restarter.services.kube.errors import ApiError
from restarter.services.kube.posting import Poster

log = logging.getLogger(__name__)

#: Called with every Event posted (the object, its reason, the message): notifications.
Listener = Callable[[Mapping[str, Any], Reason, str], None]


class OnFailure(enum.Enum):
    """What a post that the API did not take does, besides counting it."""

    LOG = "log"
    """Log a warning naming the object and the reason, and return."""

    RAISE = "raise"
    """Raise the error (an ``ApiError`` when the API answered, or left no answer)."""


LOG, RAISE = OnFailure.LOG, OnFailure.RAISE


class Events:
    """Posts restarter's Events, each as one request from the calling thread."""

    def __init__(self, poster: Poster) -> None:
        self._poster = poster
        # Replaced whole, never changed in place: the posting threads read it without a
        # lock while start-up and clean-up (one thread each) listen and stop.
        self._listeners: tuple[Listener, ...] = ()

    def listen(self, listener: Listener) -> None:
        """Have ``listener`` told of every Event posted from now on (once per listener)."""
        if listener not in self._listeners:
            self._listeners = (*self._listeners, listener)

    def unlisten(self, listener: Listener) -> None:
        """Stop telling ``listener``."""
        self._listeners = tuple(known for known in self._listeners if known != listener)

    def post(
        self,
        obj: Mapping[str, Any],
        *,
        reason: Reason,
        message: str,
        on_failure: OnFailure = LOG,
    ) -> None:
        """An Event about ``obj`` (its apiVersion, kind and metadata), as restarter; a
        failure as ``on_failure`` says. RuntimeError when called on an event loop."""
        if _on_event_loop():
            raise RuntimeError(f"the {reason} Event was posted from the event loop")
        try:
            self._poster.create_event(obj, type=reason.type, reason=reason.name, message=message)
        except Exception as error:
            metrics.EVENTS_FAILED.labels(reason.name).inc()
            self._tell(obj, reason, message)
            if on_failure is RAISE:
                raise
            log.warning(f"the {reason} Event on {_named(obj)} was not posted: {_brief(error)}")
            return
        self._tell(obj, reason, message)

    def _tell(self, obj: Mapping[str, Any], reason: Reason, message: str) -> None:
        for listener in self._listeners:
            listener(obj, reason, message)


def own_pod(environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """The operator's own Pod, as an Event about it names it: ``POD_NAME``,
    ``POD_NAMESPACE`` and ``POD_UID`` (the chart passes them through the downward API;
    without the uid ``kubectl describe pod`` does not list the Event). None outside a pod
    (no ``POD_NAME`` or ``POD_NAMESPACE``)."""
    name, namespace = environ.get("POD_NAME"), environ.get("POD_NAMESPACE")
    if not name or not namespace:
        return None
    metadata = {"name": name, "namespace": namespace, "uid": environ.get("POD_UID", "")}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _named(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{obj.get('kind', '')} {metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _brief(error: Exception) -> str:
    """The API's answer (``HTTP 403 Forbidden: ...``), or the error's type alone: nothing
    of the Event's message, nothing of a request's body."""
    return error.describe() if isinstance(error, ApiError) else type(error).__name__
