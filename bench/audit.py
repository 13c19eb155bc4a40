"""Counting the operator's API requests from the apiserver's audit log.

Only one operator runs at a time, and it is the only client whose user agent starts with
``kopf/`` (its watches and Event posts) or ``OpenAPI-Generator/`` (the kubernetes client
it patches and lists with), both for restarter and the naive baseline, or ``reloader/``
for Reloader (client-go's default agent, named after the binary:
``reloader/v0.0.0 (linux/amd64) kubernetes/$Format`` when built with plain ``go build``);
controllers and the harness have agents of their own.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

OPERATOR_AGENTS = ("kopf/", "OpenAPI-Generator/", "reloader/")


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        """A bookmark: requests logged after it are the ones to count."""
        return self.path.stat().st_size if self.path.exists() else 0

    def operator_requests(self, start: int, end: int | None = None) -> Counter[str]:
        """Operator requests logged between two bookmarks, by ``verb resource[/sub]``.

        A watch counts once, when its response starts; everything else when it completes.
        """
        counts: Counter[str] = Counter()
        for line in self._since(start, end).splitlines():
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line still being written
            if not str(event.get("userAgent", "")).startswith(OPERATOR_AGENTS):
                continue
            verb = event.get("verb", "?")
            stage = event.get("stage")
            if (verb == "watch") != (stage == "ResponseStarted"):
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "?")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            counts[f"{verb} {resource}"] += 1
        return counts

    def _since(self, start: int, end: int | None) -> bytes:
        """The log's bytes after a bookmark, across one rotation of the file."""
        data = b""
        if self.path.stat().st_size < start:  # rotated since the bookmark
            rotated = sorted(self.path.parent.glob(self.path.stem + "-*" + self.path.suffix))
            if rotated:
                with rotated[-1].open("rb") as old:
                    old.seek(start)
                    data, start, end = old.read(), 0, None
        with self.path.open("rb") as log:
            log.seek(start)
            return data + (log.read() if end is None else log.read(end - start))

    def wait_quiet(self, start: int, quiet: float = 2.0, timeout: float = 120.0) -> Counter[str]:
        """Operator requests since ``start``, once none was added for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        counts = self.operator_requests(start)
        still_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            latest = self.operator_requests(start)
            if latest != counts:
                counts, still_since = latest, time.monotonic()
            elif time.monotonic() - still_since >= quiet:
                break
        return counts
