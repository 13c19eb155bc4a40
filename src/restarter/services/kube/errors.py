"""The API's failures as types, each parsed once from the answer (or its absence).

The client modules raise these for every error answer and every request that got no
answer; the layers above catch them by type and say them with ``describe()`` or
``brief``, never reading a status code or an answer's body themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: The most characters of the API's message told: it names the field and the limit.
MESSAGE_LIMIT = 300


class ApiError(Exception):
    """A request the API server refused, or did not answer (``status`` 0)."""

    def __init__(
        self, message: str = "", *, status: int = 0, reason: str = "", retry_after: float = 0.0
    ) -> None:
        super().__init__(message or reason)
        #: The HTTP status of the answer; 0 when there was none.
        self.status = status
        #: The answer's reason phrase (``Forbidden``); without an answer, what failed
        #: (``ReadTimeoutError``).
        self.reason = reason
        #: The API server's own message (``... is forbidden: ...``), or the transport's.
        self.message = message
        #: Seconds the server asked to wait before trying again (429 and 503 may say).
        self.retry_after = retry_after

    @property
    def brief(self) -> str:
        """``HTTP <status>``, or ``no answer (<what failed>)``: never the message."""
        return f"HTTP {self.status}" if self.status else f"no answer ({self.reason})"

    def describe(self) -> str:
        """``HTTP <status> <reason>: <the API's message>`` (cut to ``MESSAGE_LIMIT``), or
        ``no answer (<what failed>: <why>)``. The API's messages name objects, fields and
        limits, never a Secret's data; a transport's names the server's address."""
        if not self.status:
            why = f": {self.message[:MESSAGE_LIMIT]}" if self.message else ""
            return f"no answer ({self.reason}{why})"
        said = f"HTTP {self.status} {self.reason}".rstrip()
        return f"{said}: {self.message[:MESSAGE_LIMIT]}" if self.message else said


class NotFound(ApiError):
    """404: the object (or its kind) does not exist."""


class Conflict(ApiError):
    """The object changed since it was read (409 on a stale resourceVersion, a JSON
    patch's failed ``test``): decide again on what it is now."""


class Expired(ApiError):
    """410: the resourceVersion or continue token is older than the server keeps."""


class Refused(ApiError):
    """The request itself was refused (a 4xx other than the above, 429 and 401): asking
    again sends the same refused request."""


class Forbidden(Refused):
    """403: RBAC, or an admission policy, does not allow it."""


class Invalid(Refused):
    """400 or 422: the object or patch fails validation (a field, a size limit)."""


class Throttled(ApiError):
    """429: API Priority and Fairness turned the request away; ``retry_after`` says when
    to come back."""


class Unavailable(ApiError):
    """No answer (a timeout, a dead or refused connection) or a server error (5xx): the
    same request may pass later."""


class NoAnswer(Unavailable):
    """No answer at all: a timeout, or a connection refused, dropped or dead."""


class OtherError(ApiError):
    """Any other answer (401, an unexpected status)."""


#: The type of each status that has one of its own.
_BY_STATUS: dict[int, type[ApiError]] = {
    400: Invalid,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
    429: Throttled,
}


def from_answer(
    status: int, reason: str, body: str | bytes | None, headers: Mapping[str, str] | None = None
) -> ApiError:
    """The error an answer is: its type by status, with the API's message from its body
    (a ``Status`` object) and the seconds of its ``Retry-After``."""
    return _typed(status)(
        _message(body),
        status=status,
        reason=reason or "",
        retry_after=_seconds((headers or {}).get("Retry-After", "")),
    )


def from_status(status: Mapping[str, Any]) -> ApiError:
    """The error a watch's ``ERROR`` event carries (a ``Status`` object, already decoded)."""
    code = status.get("code")
    code = code if isinstance(code, int) else 0
    return _typed(code)(
        str(status.get("message") or ""), status=code, reason=str(status.get("reason") or "")
    )


def no_answer(error: BaseException) -> NoAnswer:
    """A request without an answer, named by what failed."""
    return NoAnswer(str(error), reason=type(error).__name__)


def _typed(status: int) -> type[ApiError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status == 0:
        return NoAnswer
    if status >= 500:
        return Unavailable
    if 400 <= status < 500 and status != 401:
        return Refused
    return OtherError


def _message(body: str | bytes | None) -> str:
    try:
        parsed = json.loads(body or "{}")
    except ValueError:
        return ""
    message = parsed.get("message") if isinstance(parsed, dict) else None
    return str(message or "")


def _seconds(value: str) -> float:
    return float(value) if value.isascii() and value.isdigit() else 0.0
