"""Events on the objects a flow is about: through kopf's queue inside its handlers, or
straight to the API outside them (kopf's queue exists only in its handlers' context)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import kopf

from restarter.runtime.kube import Api

#: Reason of the Event on a workload whose due restart a hold keeps waiting.
RESTART_HELD = "RestartHeld"

#: Called with every Event posted here (object, type, reason, message): notifications.
Listener = Callable[[Mapping[str, Any], str, str, str], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Have ``listener`` told of every Event posted from now on (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


def _tell(obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
    for listener in list(_listeners):
        listener(obj, type, reason, message)


def event(obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """An Event on the object, posted by kopf's queue as component ``restarter``."""
    kopf.event(cast(Any, obj), type=type, reason=reason, message=message)
    _tell(obj, type, reason, message)


def warn(obj: Mapping[str, Any], *, reason: str, message: str) -> None:
    kopf.warn(cast(Any, obj), reason=reason, message=message)
    _tell(obj, "Warning", reason, message)


class Poster(Protocol):
    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None: ...

    def warn(self, obj: Mapping[str, Any], *, reason: str, message: str) -> None: ...


class KopfPoster:
    """Inside a kopf handler: its queue posts the Events in the background."""

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        event(obj, type=type, reason=reason, message=message)

    def warn(self, obj: Mapping[str, Any], *, reason: str, message: str) -> None:
        warn(obj, reason=reason, message=message)


#: The poster of kopf's handlers (it holds nothing).
KOPF = KopfPoster()


class ApiPoster:
    """Outside kopf's handlers: one create request per Event, from the calling thread."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.api.post_object_event(obj, {"type": type, "reason": reason, "message": message})
        _tell(obj, type, reason, message)

    def warn(self, obj: Mapping[str, Any], *, reason: str, message: str) -> None:
        self.event(obj, type="Warning", reason=reason, message=message)
