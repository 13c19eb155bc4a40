"""Posting an Event about an object, as ``kubectl describe`` shows it (``services.events``
is the one path to it: this is its request)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from restarter.services.kube.endpoints import Endpoints
from restarter.services.kube.requesting import retrying_timed

#: The most characters of an Event's message (the API's limit is 1 024 bytes of a note).
MESSAGE_LIMIT = 1024


class Poster(Endpoints):
    """Creates Events; a failure is a type of ``errors``."""

    def create_event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """An Event about an object (its apiVersion, kind and metadata), shown by
        ``kubectl describe`` like kopf's own."""
        metadata = obj.get("metadata") or {}
        namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "uid": metadata.get("uid", ""),
                "name": name,
                "namespace": namespace,
            },
            "type": type,
            "reason": reason,
            "message": message[:MESSAGE_LIMIT],
            "source": {"component": "restarter"},
            "reportingComponent": "restarter",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        # The created Event is not read: its answer is drained (the connection goes back to
        # the pool), never turned into the client's models.
        created: Any = retrying_timed(
            lambda timeout: self._core.create_namespaced_event(
                namespace, body, _request_timeout=timeout, _preload_content=False
            ),
            "create",
        )
        created.data  # noqa: B018
