"""The one module that talks to the Kubernetes API (sync client; kopf runs us in threads)."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import queue
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from restarter.model import bodies
from restarter.model.kinds import KINDS, WORKLOAD_KINDS
from restarter.services import metrics

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: The apps/v1 workloads are built-in types: a strategic merge patch can add to and remove
#: from ``metadata.finalizers`` without replacing the list (a JSON merge patch cannot).
#: Custom resources (Rollouts) take only JSON merge patches (model/restart_decisions.py sends them
#: the whole list, conditional on the resourceVersion read).
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
RETRIABLE = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 4
#: Throttled (429, API Priority and Fairness) requests are tried longer: the server says
#: when to come back (Retry-After), and giving up would leave a stamp or restart undone.
THROTTLED_ATTEMPTS = 12
MAX_DELAY = 10.0
#: Seconds to open a connection (TCP and TLS): milliseconds to a live apiserver.
CONNECT_TIMEOUT = 5.0
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
#: TCP keepalive and user timeout on every connection to the apiserver (watches included).
#: An idle connection is probed after KEEPALIVE_IDLE seconds: well inside the idle cut-offs
#: on the way (kube-apiserver's 90 s, cloud load balancers' 4 to 6 min, NAT tables), so none
#: of them drops it for idleness. A peer that stopped answering is given up after
#: KEEPALIVE_INTERVAL * KEEPALIVE_PROBES more seconds (30 s in all): a watch on a dead
#: connection fails and is opened again instead of waiting out its read timeout (minutes).
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES = 15, 5, 3
#: Bytes sent and not acknowledged for this long (a dead route while a request goes out)
#: fail the connection; with keepalive on, Linux also ends the probing by it. A busy
#: apiserver still acknowledges what it receives, so a merely queued request never trips it.
USER_TIMEOUT_MS = 30_000
#: HTTP connections kept open: one per kopf worker thread (main.py, max_workers) and the
#: stamping pool, so parallel requests reuse connections instead of new TLS handshakes.
POOL_SIZE = 24

log = logging.getLogger(__name__)
T = TypeVar("T")


#: What a metadata-only list and watch ask for: the server sends PartialObjectMetadata.
METADATA_LIST = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
METADATA_WATCH = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}


class Conflict(RuntimeError):
    """The object changed since it was read (HTTP 409); decide again on the next tick."""


#: An error answer of the API server (``status``, ``reason``, ``body``), as the layers
#: above this one catch it: they never import the client themselves.
ApiError = ApiException
#: No answer at all (a refused or dropped connection, a timeout).
Unreachable = urllib3.exceptions.HTTPError


def error_detail(error: ApiError) -> str:
    """The API server's own one-line message (``... is forbidden: ...``), else the
    answer's reason phrase."""
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or error.reason)


def short_failure(error: BaseException) -> str:
    """What failed, briefly: ``HTTP <status>`` of an answer (the API's or another HTTP
    server's), else the error's type; never its message, which may carry a URL."""
    status = getattr(error, "status", None) or getattr(error, "code", None)
    return f"HTTP {status}" if isinstance(status, int) else type(error).__name__


def api_message(error: ApiError) -> str:
    """``error_detail``, with the status when the server sent no message of its own."""
    try:
        message = json.loads(error.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or f"{error.status} {error.reason}")


def stream_lines(response: Any) -> Iterator[str]:
    """The lines of a raw streaming response (a watch's events, one JSON object a line)."""
    yield from iter_resp_lines(response)  # type: ignore[no-untyped-call]


def load_client(
    kubeconfig: str | None = None, context: str | None = None
) -> kubernetes.client.ApiClient:
    """In-cluster credentials when running in a pod, else the user's kubeconfig. A kubeconfig
    or context asked for (a command's ``--kubeconfig``, ``--context``) is used even in a pod,
    and one that cannot be read raises KubeconfigError."""
    if kubeconfig is not None or context is not None:
        try:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context
            )
        except (kubernetes.config.ConfigException, OSError, ValueError) as error:
            raise KubeconfigError(str(error)) from None
        return client_for(kubernetes.client.Configuration.get_default_copy())
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    return client_for(kubernetes.client.Configuration.get_default_copy())


class KubeconfigError(RuntimeError):
    """The kubeconfig cannot be read; the message names it."""


def client_from_kubeconfig(
    path: str | None, context: str | None = None
) -> tuple[kubernetes.client.ApiClient, str]:
    """A client of the kubeconfig's ``context``, else its current one (``path``, else
    ``KUBECONFIG`` or ``~/.kube/config``), and that context's namespace (``default`` when it
    names none)."""
    try:
        contexts, current = kubernetes.config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path
        )
        if context is not None:
            current = next((entry for entry in contexts if entry.get("name") == context), None)
            if current is None:
                raise KubeconfigError(f"it has no context {context!r}")
        client = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, persist_config=False
        )
    except (kubernetes.config.ConfigException, OSError, ValueError) as error:
        raise KubeconfigError(str(error)) from None
    namespace = ((current or {}).get("context") or {}).get("namespace") or "default"
    return client, namespace


def client_for(configuration: kubernetes.client.Configuration) -> kubernetes.client.ApiClient:
    """A client of ``configuration``'s apiserver with restarter's pool, sockets and retries."""
    configuration.connection_pool_maxsize = POOL_SIZE
    configuration.socket_options = socket_options()
    # urllib3's own retries (3 by default) would try an idempotent GET again on the next
    # pooled connection, dead as well, silently and before ``retrying`` could close them:
    # every retry is ``retrying``'s, logged and on a fresh connection.
    configuration.retries = False
    client = kubernetes.client.ApiClient(configuration)
    _POOLS.add(client.rest_client.pool_manager)
    return client


def socket_options() -> list[tuple[int, int, int]]:
    """urllib3's defaults (no Nagle) plus keepalive and the user timeout, where defined."""
    options = list(urllib3.connection.HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
    ):
        if hasattr(socket, name):  # Linux has all four; a developer's macOS may not
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


#: The connection pools of the clients ``client_for`` made.
_POOLS: weakref.WeakSet[urllib3.PoolManager] = weakref.WeakSet()


def close_idle_connections() -> None:
    """Close every connection waiting in the pools; the next requests open new ones.

    Called when a request got no answer: the connections idle beside it went through the
    same event (a forwarder or load balancer that lost them, an apiserver gone) and a
    retry that took the next one would wait out its timeout again. A new connection costs
    one TLS handshake; connections in use (watches, requests in flight) are left alone.
    """
    for manager in list(_POOLS):
        for key in list(manager.pools.keys()):
            pool = manager.pools.get(key)
            idle = getattr(pool, "pool", None)  # its LIFO queue of connections (None: closed)
            if idle is None:
                continue
            taken = []
            with contextlib.suppress(queue.Empty):
                while True:
                    taken.append(idle.get(block=False))
            for connection in taken:
                if connection is not None:
                    connection.close()
                # An empty slot: the pool opens a connection when it hands it out.
                with contextlib.suppress(queue.Full):
                    idle.put(None, block=False)


#: Answers that are outcomes, not errors: gone (404), changed meanwhile (409).
EXPECTED = frozenset({404, 409})


def count_error(verb: str, error: Exception) -> None:
    """One failed request in restarter_api_errors_total (status 0: no answer)."""
    status = error.status if isinstance(error, ApiException) else 0
    if status not in EXPECTED:
        metrics.API_ERRORS.labels(verb, str(status)).inc()


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


def _retry_after(error: ApiException) -> float:
    value = (error.headers or {}).get("Retry-After", "")
    return float(value) if value.isascii() and value.isdigit() else 0.0


def retrying(call: Callable[[], T], verb: str) -> T:
    """Retry transient failures (throttling, 5xx, dropped connections) with back-off; the
    call sets its own timeout."""
    return retrying_timed(lambda _timeout: call(), verb)


def retrying_timed(call: Callable[[Timeout], T], verb: str) -> T:
    """``retrying``, handing the call its attempt's timeout: ``FIRST_TIMEOUT``, then
    ``REQUEST_TIMEOUT``. A request without an answer closes the idle pooled connections
    first, so its retry goes out on a new one."""
    attempt = 0
    while True:
        attempt += 1
        delay = min(MAX_DELAY, 0.25 * 2**attempt)
        try:
            with CONCURRENCY:
                result = call(FIRST_TIMEOUT if attempt == 1 else REQUEST_TIMEOUT)
            CONCURRENCY.answered(throttled=False)
            return result
        except ApiException as error:
            count_error(verb, error)
            CONCURRENCY.answered(throttled=error.status == 429)
            limit = THROTTLED_ATTEMPTS if error.status == 429 else ATTEMPTS
            if error.status not in RETRIABLE or attempt >= limit:
                raise
            delay = min(MAX_DELAY, max(delay, _retry_after(error)))
            # Throttling is counted (restarter_api_errors_total) and expected under a
            # fan-out; a server error is worth a line.
            level = logging.DEBUG if error.status == 429 else logging.WARNING
            log.log(level, f"{verb}: API error {error.status} {error.reason}; {_again(delay)}")
        except urllib3.exceptions.HTTPError as error:
            count_error(verb, error)
            close_idle_connections()
            if attempt >= ATTEMPTS:
                raise
            # A request that got no answer (a timeout, a dropped connection) held its
            # caller for up to the read timeout: say so, or a late stamp looks like none.
            log.warning(f"{verb}: no answer ({type(error).__name__}: {error}); {_again(delay)}")
        time.sleep(delay)


def _again(delay: float) -> str:
    return f"trying again in {delay:g}s"


class Api:
    """Patches restarter sends; each returns the object as a plain dict, or None if gone."""

    def __init__(self, client: kubernetes.client.ApiClient) -> None:
        self.client = client
        self._core = kubernetes.client.CoreV1Api(client)
        self._apps = kubernetes.client.AppsV1Api(client)
        self._custom = kubernetes.client.CustomObjectsApi(client)

    @staticmethod
    def _plain(response: Any) -> dict[str, Any]:
        """A raw response's list (``_preload_content=False``) as plain dicts, decoded to
        the fields restarter reads (model/bodies.py): never the client's model objects,
        which cost two orders of magnitude more CPU than the parse."""
        return bodies.decode_list(response.data)

    def patch_source(
        self, kind: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Patch a Secret (``secret``) or ConfigMap (``configmap``)."""
        method = {
            "secret": self._core.patch_namespaced_secret,
            "configmap": self._core.patch_namespaced_config_map,
        }[kind]
        # The response carries the source's data: it is never parsed, only its existence told.
        result = self._patch(method, namespace, name, patch, decode=_discard)
        return None if result is None else {}

    def patch_workload(
        self, plural: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Patch a workload (by resource plural): a strategic merge patch where its kind
        merges finalizers as a set, else a JSON merge patch (a custom resource)."""
        content_type = STRATEGIC_MERGE_PATCH if KINDS[plural].merges_finalizers else MERGE_PATCH
        method = self._workload_method("patch", plural)
        return self._patch(method, namespace, name, patch, content_type, bodies.decode_object)

    def create_event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """An Event about an object (its apiVersion, kind and metadata), shown by
        ``kubectl describe`` like kopf's own (``services.events`` is the path to it)."""
        metadata = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "uid": metadata.get("uid", ""),
        }
        event = {"type": type, "reason": reason, "message": message}
        self._post(involved, metadata.get("namespace", ""), metadata.get("name", ""), event)

    def _post(
        self, involved: Mapping[str, str], namespace: str, name: str, event: Mapping[str, str]
    ) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {**involved, "name": name, "namespace": namespace},
            "type": event["type"],
            "reason": event["reason"],
            "message": event["message"][:1024],
            "source": {"component": "restarter"},
            "reportingComponent": "restarter",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        retrying_timed(
            lambda timeout: self._core.create_namespaced_event(
                namespace, body, _request_timeout=timeout
            ),
            "create",
        )

    def read_source(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret or ConfigMap as it is now (held in memory only), or None if gone."""
        method = {
            "secret": self._core.read_namespaced_secret,
            "configmap": self._core.read_namespaced_config_map,
        }[kind]
        return self._read(method, namespace, name)

    def read_source_metadata(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret's or ConfigMap's metadata alone (PartialObjectMetadata: never its data),
        or None if gone."""
        method = {
            "secret": self._core.read_namespaced_secret,
            "configmap": self._core.read_namespaced_config_map,
        }[kind]

        def metadata_only(name: str, namespace: str, **options: Any) -> Any:
            return method(name, namespace, _headers=METADATA_WATCH, **options)

        return self._read(metadata_only, namespace, name, bodies.decode_object)

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The pods in ``namespace`` that ``selector`` selects, whole (their statuses: how
        the circuit breaker tells a crash-looping pod)."""
        response: Any = retrying_timed(
            lambda timeout: self._core.list_namespaced_pod(
                namespace,
                label_selector=selector,
                _request_timeout=timeout,
                _preload_content=False,
            ),
            "list",
        )
        return list(_parse(response.data).get("items") or [])

    def read_workload(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A Deployment, StatefulSet, DaemonSet or Rollout as it is now, or None if gone."""
        return self._read(
            self._workload_method("read", plural), namespace, name, bodies.decode_object
        )

    def read_namespace(self, name: str) -> dict[str, Any] | None:
        """A Namespace as it is now (for its ``restarter.io/hold``), or None if gone."""

        def namespace(name: str, _namespace: str, **options: Any) -> Any:
            return self._core.read_namespace(name, **options)

        return self._read(namespace, "", name)

    def selected_pods(self, namespace: str | None, selector: str) -> list[str]:
        """``namespace/name`` of every pod matching ``selector`` (None: in any namespace),
        listed as metadata only."""
        lister: Callable[..., Any]
        if namespace:
            lister = functools.partial(self._core.list_namespaced_pod, namespace)
        else:
            lister = self._core.list_pod_for_all_namespaces
        return sorted(
            f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            for metadata in self._selected_metadata(lister, selector)
        )

    def served(self, plural: str) -> bool:
        """True when the API server serves the kind (its group version's discovery lists
        it): how restarter notices that the Rollout CRD was installed. Discovery needs no
        RBAC rule of its own."""
        kind = KINDS[plural]

        def discovery(_name: str, _namespace: str, **options: Any) -> Any:
            return self._custom.get_api_resources(kind.group, kind.version, **options)

        found = self._read(discovery, "", "")
        return found is not None and any(
            item.get("name") == plural for item in found.get("resources") or []
        )

    def _read(
        self,
        method: Callable[..., Any],
        namespace: str,
        name: str,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        try:
            found = retrying_timed(
                lambda timeout: method(
                    name, namespace, _request_timeout=timeout, _preload_content=False
                ),
                "get",
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return (decode or _parse)(found.data)

    def _list_workloads(
        self, plural: str, namespaces: tuple[str, ...], timeout: Timeout
    ) -> list[Any]:
        return [
            self._lister(plural, namespace)(_request_timeout=timeout, _preload_content=False)
            for namespace in namespaces or (None,)
        ]

    def list_workloads(self, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        """Every workload of a kind in ``namespace`` (None: every namespace), as plain dicts."""
        namespaces = (namespace,) if namespace else ()
        listings = retrying_timed(
            lambda timeout: self._list_workloads(plural, namespaces, timeout), "list"
        )
        return [
            item
            for listing in listings
            for item in bodies.decode_list(listing.data).get("items") or []
        ]

    def list_page(
        self, plural: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent (etcd) list of a workload kind; raises 410 when the
        continue token has expired."""
        options = _page_options(continue_token, limit)
        response = retrying_timed(
            lambda timeout: self._lister(plural, namespace)(
                **options, _request_timeout=timeout, _preload_content=False
            ),
            "list",
        )
        return bodies.decode_list(response.data)

    def watch(self, plural: str, namespace: str | None, resource_version: str, timeout: int) -> Any:
        """A watch of a workload kind from ``resource_version``, with bookmarks: the raw
        streaming response (one JSON event per line), to be closed by the caller."""
        return self._lister(plural, namespace)(
            **_watch_options(resource_version, timeout),
        )

    def list_workload_metadata(
        self, plural: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a workload kind's list as metadata only (PartialObjectMetadataList),
        decoded to the fields read: never the client's model objects."""
        return self._metadata_page(self._lister(plural, namespace), continue_token, limit)

    def json_patch_workload(
        self, plural: str, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> bool:
        """Apply a JSON patch (RFC 6902) to a workload: False when it is gone; ``Conflict``
        when one of its ``test`` operations failed (the object changed since it was read)."""
        method = self._workload_method("patch", plural)
        return self._patch(method, namespace, name, operations, JSON_PATCH, _discard) is not None

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> str | None:
        """Scale a Deployment; its pods' label selector, or None when it does not exist."""
        try:
            scale = retrying_timed(
                lambda timeout: self._apps.patch_namespaced_deployment_scale(
                    name,
                    namespace,
                    {"spec": {"replicas": replicas}},
                    _content_type=MERGE_PATCH,
                    _request_timeout=timeout,
                ),
                "patch",
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return str(scale.status.selector or "") if scale.status else ""

    def pod_names(self, namespace: str, selector: str) -> list[str]:
        """The names of the pods in ``namespace`` that ``selector`` selects, sorted."""
        lister = functools.partial(self._core.list_namespaced_pod, namespace)
        return sorted(
            str(metadata.get("name") or "?")
            for metadata in self._selected_metadata(lister, selector)
        )

    def list_namespaces(self, continue_token: str | None, limit: int) -> dict[str, Any]:
        """One page of a consistent list of Namespaces."""
        options = _page_options(continue_token, limit)
        response = retrying_timed(
            lambda timeout: self._core.list_namespace(
                **options, _request_timeout=timeout, _preload_content=False
            ),
            "list",
        )
        return self._plain(response)

    def watch_namespaces(self, resource_version: str, timeout: int) -> Any:
        """A watch of Namespaces from ``resource_version``, with bookmarks: the raw
        streaming response, to be closed by the caller."""
        return self._core.list_namespace(
            **_watch_options(resource_version, timeout),
        )

    def labelled_names(
        self, resource: str, namespace: str | None, label: str
    ) -> list[dict[str, Any]]:
        """The metadata of every workload (by plural) or source (``secret``,
        ``configmap``) in ``namespace`` that carries ``label``: never a source's data."""
        if resource in WORKLOAD_KINDS:
            lister = self._lister(resource, namespace)
        else:
            lister = self._source_lister(resource, namespace)
        return self._selected_metadata(lister, label)

    def _selected_metadata(self, lister: Callable[..., Any], selector: str) -> list[dict[str, Any]]:
        """The metadata of every object ``lister`` lists under a label selector (a
        metadata-only list: never a source's data)."""
        response = retrying_timed(
            lambda timeout: lister(
                label_selector=selector,
                _headers=METADATA_LIST,
                _request_timeout=timeout,
                _preload_content=False,
            ),
            "list",
        )
        return [item["metadata"] for item in self._plain(response).get("items") or []]

    def list_source_metadata(
        self, kind: str, namespace: str | None, continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent list of Secrets or ConfigMaps, metadata only (names,
        labels, annotations, resourceVersion: never data)."""
        return self._metadata_page(self._source_lister(kind, namespace), continue_token, limit)

    def _metadata_page(
        self, lister: Callable[..., Any], continue_token: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a consistent list, metadata only (PartialObjectMetadataList)."""
        options = _page_options(continue_token, limit)
        response = retrying_timed(
            lambda timeout: lister(
                **options, _headers=METADATA_LIST, _request_timeout=timeout, _preload_content=False
            ),
            "list",
        )
        return self._plain(response)

    def watch_source_metadata(
        self, kind: str, namespace: str | None, resource_version: str, timeout: int
    ) -> Any:
        """A metadata-only watch of Secrets or ConfigMaps from ``resource_version``, with
        bookmarks: the raw streaming response, to be closed by the caller."""
        return self._source_lister(kind, namespace)(
            **_watch_options(resource_version, timeout),
            _headers=METADATA_WATCH,
        )

    def _source_lister(self, kind: str, namespace: str | None) -> Callable[..., Any]:
        stem = {"secret": "secret", "configmap": "config_map"}[kind]
        if namespace:
            method = getattr(self._core, f"list_namespaced_{stem}")
            return lambda **options: method(namespace, **options)
        return cast(Callable[..., Any], getattr(self._core, f"list_{stem}_for_all_namespaces"))

    def _workload_method(self, verb: str, plural: str) -> Callable[..., Any]:
        """The client's ``<verb>_namespaced_...`` method of a workload kind, taking (name,
        namespace[, body], **options) for built-in kinds and custom resources alike."""
        kind = KINDS[plural]
        if kind.client_stem is not None:
            return cast(
                Callable[..., Any], getattr(self._apps, f"{verb}_namespaced_{kind.client_stem}")
            )
        custom = getattr(
            self._custom, f"{'get' if verb == 'read' else verb}_namespaced_custom_object"
        )

        def method(name: str, namespace: str, *body: Any, **options: Any) -> Any:
            return custom(kind.group, kind.version, namespace, plural, name, *body, **options)

        return method

    def _lister(self, plural: str, namespace: str | None) -> Callable[..., Any]:
        kind = KINDS[plural]
        if kind.client_stem is None:
            if namespace:
                return lambda **options: self._custom.list_namespaced_custom_object(
                    kind.group, kind.version, namespace, plural, **options
                )
            return lambda **options: self._custom.list_cluster_custom_object(
                kind.group, kind.version, plural, **options
            )
        stem = kind.client_stem
        if namespace:
            method = getattr(self._apps, f"list_namespaced_{stem}")
            return lambda **options: method(namespace, **options)
        return cast(Callable[..., Any], getattr(self._apps, f"list_{stem}_for_all_namespaces"))

    def _patch(
        self,
        method: Callable[..., Any],
        namespace: str,
        name: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        content_type: str = MERGE_PATCH,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """The patched object (None: gone); ``Conflict`` when it changed since it was read
        (409 on a stale resourceVersion, 422 on a JSON patch's failed ``test``)."""
        try:
            result = retrying_timed(
                lambda timeout: method(
                    name,
                    namespace,
                    patch,
                    _content_type=content_type,
                    _request_timeout=timeout,
                    _preload_content=False,
                ),
                "patch",
            )
        except ApiException as error:
            if error.status == 404:
                return None
            if error.status == 409 or (content_type == JSON_PATCH and error.status == 422):
                raise Conflict(f"{namespace}/{name} changed while deciding") from None
            raise
        return (decode or _parse)(result.data)


def _parse(data: bytes) -> dict[str, Any]:
    """A whole JSON body as plain dicts (a source read for its data)."""
    return dict(json.loads(data))


def _discard(data: bytes) -> dict[str, Any]:
    """An answer that is not read (its body was received whole: the connection is reusable)."""
    return {}


def _page_options(continue_token: str | None, limit: int) -> dict[str, Any]:
    """The options of one page of a consistent list."""
    options: dict[str, Any] = {"limit": limit}
    if continue_token:
        options["_continue"] = continue_token
    return options


def _watch_options(resource_version: str, timeout: int) -> dict[str, Any]:
    """The options of a watch from ``resource_version`` with bookmarks, as a raw stream."""
    return {
        "watch": True,
        "resource_version": resource_version,
        "allow_watch_bookmarks": True,
        "timeout_seconds": timeout,
        # The server ends the watch after ``timeout``; the long read timeout only catches
        # one that never ends. A dead peer is noticed sooner, by keepalive (socket_options).
        "_request_timeout": (CONNECT_TIMEOUT, timeout + 30),
        "_preload_content": False,
    }
