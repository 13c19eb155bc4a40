"""One request to the API server: its timeouts, its share of the concurrency, its retries
on throttling, server errors and lost connections, and its failure as a type of
``errors`` (counted in restarter_api_errors_total)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from restarter.services import metrics
from restarter.services.kube import errors
from restarter.services.kube.connecting import CONNECT_TIMEOUT, POOL_SIZE, close_idle_connections
from restarter.services.kube.errors import ApiError, Conflict, NoAnswer, NotFound, Throttled

RETRIABLE = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 4
#: Throttled (429, API Priority and Fairness) requests are tried longer: the server says
#: when to come back (Retry-After), and giving up would leave a stamp or restart undone.
THROTTLED_ATTEMPTS = 12
MAX_DELAY = 10.0
#: (connect, read) seconds of a request's first attempt (one object's GET or PATCH, an
#: Event, a page of a list). Kubernetes' own SLO puts the 99th percentile of single-object
#: calls under 1 s; a pooled connection that died silently while idle (a load balancer's
#: idle timeout, an apiserver restarted behind a virtual IP, a stuck forwarder) never
#: answers, and must cost a few seconds, not half a minute (it did: a stamp 30 s late).
FIRST_TIMEOUT = (CONNECT_TIMEOUT, 5.0)
#: (connect, read) seconds of every retry, on a fresh connection. API Priority and Fairness
#: may keep a request queued for up to a quarter of kube-apiserver's 60 s request timeout
#: (15 s) before it answers 429: a retry waits that out and the request's own time, so a
#: busy apiserver that held the first attempt past 5 s is not abandoned a second time.
REQUEST_TIMEOUT = (CONNECT_TIMEOUT, 20.0)
#: Timeout = (connect, read) seconds, as ``_request_timeout`` takes them.
Timeout = tuple[float, float]

log = logging.getLogger(__name__)
T = TypeVar("T")


def typed(answer: ApiException) -> ApiError:
    """The client's error answer as the type of ``errors`` it is."""
    if not isinstance(answer.status, int):  # the client refused to send it (a bad argument)
        return errors.OtherError(str(answer.reason or ""))
    return errors.from_answer(answer.status, answer.reason or "", answer.body, answer.headers)


@contextlib.contextmanager
def typed_errors() -> Iterator[None]:
    """The client's errors, raised as the types of ``errors``, for what is not retried
    (opening a watch, reading its stream)."""
    try:
        yield
    except ApiException as answer:
        raise typed(answer) from None
    except urllib3.exceptions.HTTPError as lost:
        raise errors.no_answer(lost) from None


def count_error(verb: str, error: ApiError) -> None:
    """One failed request in restarter_api_errors_total (status 0: no answer). Gone (404)
    and changed meanwhile (409) are outcomes, not errors."""
    if not isinstance(error, (NotFound, Conflict)):
        metrics.API_ERRORS.labels(verb, str(error.status)).inc()


class Concurrency:
    """How many of restarter's requests may be open at once: halved on each 429, grown
    back by one per ``limit`` answers (additive increase, multiplicative decrease), so a
    throttled operator settles at what API Priority and Fairness lets it have instead of
    retrying its whole stamping pool against a full queue."""

    def __init__(self, limit: int) -> None:
        self.ceiling = limit
        self.limit = float(limit)
        self.open = 0
        self._changed = threading.Condition()

    def __enter__(self) -> Concurrency:
        with self._changed:
            self._changed.wait_for(lambda: self.open < max(1, int(self.limit)))
            self.open += 1
        return self

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self.open -= 1
            self._changed.notify()

    def answered(self, throttled: bool) -> None:
        with self._changed:
            if throttled:
                self.limit = max(1.0, self.limit / 2)
            else:
                self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            self._changed.notify_all()


#: Shared by every request restarter itself sends (kopf's own requests are kopf's).
CONCURRENCY = Concurrency(POOL_SIZE)


def retrying(call: Callable[[], T], verb: str) -> T:
    """Retry transient failures (throttling, 5xx, dropped connections) with back-off; the
    call sets its own timeout."""
    return retrying_timed(lambda _timeout: call(), verb)


def retrying_timed(call: Callable[[Timeout], T], verb: str) -> T:
    """``retrying``, handing the call its attempt's timeout: ``FIRST_TIMEOUT``, then
    ``REQUEST_TIMEOUT``. A request without an answer closes the idle pooled connections
    first, so its retry goes out on a new one. What fails for good is raised as the type
    of ``errors`` it is."""
    attempt = 0
    while True:
        attempt += 1
        try:
            with CONCURRENCY:
                result = call(FIRST_TIMEOUT if attempt == 1 else REQUEST_TIMEOUT)
            CONCURRENCY.answered(throttled=False)
            return result
        except ApiException as answer:
            failure = typed(answer)
            CONCURRENCY.answered(throttled=isinstance(failure, Throttled))
        except urllib3.exceptions.HTTPError as lost:
            failure = errors.no_answer(lost)
            close_idle_connections()
        time.sleep(_delay_or_raise(verb, failure, attempt))


def _delay_or_raise(verb: str, failure: ApiError, attempt: int) -> float:
    """Seconds to wait before trying ``failure``'s request again; raised when it is not
    worth trying again."""
    count_error(verb, failure)
    throttled = isinstance(failure, Throttled)
    answered = not isinstance(failure, NoAnswer)
    if (answered and failure.status not in RETRIABLE) or attempt >= (
        THROTTLED_ATTEMPTS if throttled else ATTEMPTS
    ):
        raise failure
    delay = min(MAX_DELAY, max(0.25 * 2.0**attempt, failure.retry_after))
    again = f"trying again in {delay:g}s"
    if answered:
        # Throttling is counted (restarter_api_errors_total) and expected under a
        # fan-out; a server error is worth a line.
        level = logging.DEBUG if throttled else logging.WARNING
        log.log(level, f"{verb}: API error {failure.status} {failure.reason}; {again}")
    else:
        # A request that got no answer (a timeout, a dropped connection) held its
        # caller for up to the read timeout: say so, or a late stamp looks like none.
        log.warning(f"{verb}: no answer ({failure.reason}: {failure.message}); {again}")
    return delay
