"""The one Event path: every Event restarter posts goes through ``EventPath.post``, with a
reason declared in ``model.reasons`` (the Event's type is the reason's).

Two carriers, chosen by where the flow runs, behind the one method:

- ``QUEUED``, inside kopf's handlers: kopf's queue posts the Event in the background,
  through its bounded posting workers (``main.POSTING_WORKERS``).
- ``Direct(api)``, outside them (the stamping threads, the streams, the source checks):
  one create request from the calling thread, which its own bounded pool already limits
  (a fan-out to 10 000 dependents holds no queue of Events and no connection per Event).

Both tell the listeners (``listen``) of every Event they post: the notifications.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import kopf

from restarter.model.reasons import Reason
from restarter.services.kube.posting import Poster

#: Called with every Event posted (the object, its reason, the message): notifications.
Listener = Callable[[Mapping[str, Any], Reason, str], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Have ``listener`` told of every Event posted from now on (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    """Stop telling ``listener``."""
    if listener in _listeners:
        _listeners.remove(listener)


def _tell(obj: Mapping[str, Any], reason: Reason, message: str) -> None:
    for listener in list(_listeners):
        listener(obj, reason, message)


class EventPath(Protocol):
    def post(self, obj: Mapping[str, Any], *, reason: Reason, message: str) -> None:
        """An Event about ``obj`` (its apiVersion, kind and metadata), as restarter."""
        ...


class Queued:
    """Inside a kopf handler: its queue posts the Event in the background."""

    def post(self, obj: Mapping[str, Any], *, reason: Reason, message: str) -> None:
        kopf.event(cast(Any, obj), type=reason.type, reason=reason.name, message=message)
        _tell(obj, reason, message)


#: The path of kopf's handlers (it holds nothing).
QUEUED = Queued()


class Direct:
    """Outside kopf's handlers: one create request per Event, from the calling thread."""

    def __init__(self, api: Poster) -> None:
        self.api = api

    def post(self, obj: Mapping[str, Any], *, reason: Reason, message: str) -> None:
        self.api.create_event(obj, type=reason.type, reason=reason.name, message=message)
        _tell(obj, reason, message)
